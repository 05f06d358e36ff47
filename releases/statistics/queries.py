"""The queries of a statistics release checked against the dataset: the columns a query may
read (only those chosen for release: quasi-identifiers, sensitive columns, columns released as
is; never a direct identifier, a withheld column or one with no role yet), and where a
histogram's labels come from (typed by the steward, a level of the column's hierarchy, the
column's declared values: public sources; or the data, through OpenDP's private key release).
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from releases.core.errors import InvalidInput
from releases.datasets import services as datasets
from releases.engine import EngineError, dp
from releases.models import (
    Dataset,
    DatasetColumn,
    Role,
)
from releases.models.datasets import RELEASED_ROLES

#: What the values offered as categories may hold at most (the engine's own limit).
MAX_OFFERED_CATEGORIES = dp.MAX_CATEGORIES


def dataset_columns(dataset: Dataset) -> list[str]:
    return list(dataset.columns.order_by("position").values_list("name", flat=True))


#: How a column's role reads in a refusal ("fullname is a direct identifier").
_ROLE_WORDS = {
    Role.IDENTIFIER: "a direct identifier",
    Role.WITHHELD: "withheld",
    "": "a column with no role yet",
}


def column_roles(dataset: Dataset) -> dict[str, str]:
    return dict(dataset.columns.values_list("name", "role"))


def role_refusal(query_number: int, query: dp.Query, column: str, role: str) -> str:
    return (
        f"Query {query_number} ({query.kind}) uses {column}, which is "
        f"{_ROLE_WORDS.get(role, 'not released')}: statistics may use only the columns chosen "
        "for release (quasi-identifiers, sensitive columns and columns released as is). "
        f"Give {column} one of those roles on the dataset page, or choose another column."
    )


def role_problems(queries: list[dp.Query], roles: dict[str, str]) -> list[str]:
    """One sentence per column a query uses whose role keeps it out of every release."""
    problems = []
    for number, query in enumerate(queries, start=1):
        for column in dict.fromkeys(query.columns):
            role = roles.get(column, "")
            if role not in RELEASED_ROLES:
                problems.append(role_refusal(number, query, column, role))
    return problems


def check_columns(dataset: Dataset, queries: list[dp.Query]) -> None:
    """Refuse queries that read a direct identifier, a withheld column or a column with no role
    yet (``InvalidInput`` naming the first such column and its role). Run when a release is
    requested or resubmitted, in the preview, and again by the worker before it spends."""
    problems = role_problems(queries, column_roles(dataset))
    if problems:
        raise InvalidInput(problems[0])


def _hierarchy_labels(dataset: Dataset, column: DatasetColumn, level: int) -> list[str]:
    """The distinct labels at ``level`` (1 or more) of the column's hierarchy, in its order."""
    hierarchy = datasets.current_hierarchy(dataset, column)
    if not 1 <= level < hierarchy.height:
        raise InvalidInput(
            f"The hierarchy of {column.name} has levels 1 to {hierarchy.height - 1} above the "
            f"column's own values; level {level} is not one of them."
        )
    return list(dict.fromkeys(hierarchy.level(level)))


def _declared_labels(column: DatasetColumn) -> list[str]:
    if not column.declared_domain:
        raise InvalidInput(
            f"{column.name} has no declared values yet: declare them on the dataset page "
            "(a public list, such as a code list), or type the categories."
        )
    return list(column.declared_domain)


def _resolve_grouping(dataset: Dataset, grouping: dp.Grouping) -> dp.Grouping:
    """A grouping whose labels come from the column's hierarchy or declared values: checked
    against that source (and filled with all of its labels when none are listed)."""
    if grouping.source not in (dp.HIERARCHY, dp.DOMAIN):
        return grouping
    column = dataset.columns.filter(name=grouping.column).first()
    if column is None:
        raise InvalidInput(f"The dataset has no column {grouping.column!r}.")
    if grouping.source == dp.HIERARCHY:
        if grouping.level is None or grouping.level < 1:
            raise InvalidInput(
                f"Choose a level of 1 or more of {column.name}'s hierarchy (level 0 holds the "
                "column's own values)."
            )
        known = _hierarchy_labels(dataset, column, grouping.level)
        where = f"level {grouping.level} of {column.name}'s hierarchy"
    else:
        known = _declared_labels(column)
        where = f"the declared values of {column.name}"
    if not grouping.categories:
        return replace(grouping, categories=tuple(known))
    unknown = [c for c in grouping.categories if c not in set(known)]
    if unknown:
        raise InvalidInput(
            f"{unknown[0]!r} is not a label of {where}: labels from a source are those of the "
            "source (type the categories instead, and they are yours)."
        )
    return grouping


def resolve_labels(dataset: Dataset, queries: list[dp.Query]) -> list[dp.Query]:
    """The queries with every histogram's labels taken from their declared source."""
    out = []
    for number, query in enumerate(queries, start=1):
        if isinstance(query, dp.Histogram):
            try:
                query = replace(query, by=tuple(_resolve_grouping(dataset, g) for g in query.by))
            except InvalidInput as exc:
                raise InvalidInput(f"Query {number} ({query.kind}): {exc}") from None
        out.append(query)
    return out


def parse_queries(items: list[dict], dataset: Dataset) -> list[dp.Query]:
    """Queries from their dict form, checked against the dataset's columns and their roles,
    with their labels taken from their sources (``InvalidInput`` naming the first query that
    cannot run)."""
    columns = dataset_columns(dataset)
    try:
        queries = dp.queries_from_list(items)
        for number, query in enumerate(queries, start=1):
            missing = [c for c in query.columns if c not in columns]
            if missing:
                raise EngineError(
                    f"Query {number} ({query.kind}): The dataset has no column {missing[0]!r}."
                )
    except EngineError as exc:
        raise InvalidInput(str(exc)) from None
    check_columns(dataset, queries)
    queries = resolve_labels(dataset, queries)
    try:
        dp.validate_queries(queries, columns)
    except EngineError as exc:
        raise InvalidInput(str(exc)) from None
    return queries


def hierarchy_labels(user, dataset: Dataset, column: str, level: int) -> list[str]:
    """The labels of ``level`` of the column's hierarchy, offered to its steward as a
    histogram's categories (published as they are: the hierarchy is the steward's)."""
    dataset = datasets.get_dataset_for(user, dataset.pk)
    datasets.ensure_ready(dataset)
    found = dataset.columns.filter(name=column).first()
    if found is None:
        raise InvalidInput(f"The dataset has no column {column!r}.")
    return _hierarchy_labels(dataset, found, level)[:MAX_OFFERED_CATEGORIES]


def declared_labels(user, dataset: Dataset, column: str) -> list[str]:
    """The column's declared values, offered to its steward as a histogram's categories."""
    dataset = datasets.get_dataset_for(user, dataset.pk)
    found = dataset.columns.filter(name=column).first()
    if found is None:
        raise InvalidInput(f"The dataset has no column {column!r}.")
    return _declared_labels(found)[:MAX_OFFERED_CATEGORIES]


def amount(queries: list[dp.Query]) -> tuple[Decimal, Decimal]:
    return dp.requested_epsilon(queries), dp.requested_delta(queries)


def describe(queries: list[dp.Query]) -> list[dict]:
    return [
        {"kind": q.kind, "description": q.describe(), "epsilon": q.epsilon, "delta": q.delta}
        for q in queries
    ]
