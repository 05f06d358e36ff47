"""Reads for the dataset pages: which datasets a steward sees, a dataset's columns a page at a
time, and its privacy budget with the ledger. Nothing here changes state."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Q, QuerySet
from django.http import Http404

from releases.background import leases, outbox
from releases.core import roles
from releases.core.errors import InvalidInput
from releases.datasets import budget, column_store, hierarchies, rules
from releases.engine import Hierarchy, HierarchyError
from releases.models import Dataset, DatasetColumn, Role
from releases.models.datasets import ColumnType, DateOrder

#: The task that profiles an upload.
PROFILE_TASK = "releases.profile_dataset"


# --- Which datasets a user sees ------------------------------------------------------------


def get_dataset_for(user, dataset_id: int, *, to_change: bool = True) -> Dataset:
    """A dataset ``user`` sees (``rules.can_see``: their own, or their project's where it lets
    stewards see all of them); anyone else's is out of reach (404). With ``to_change`` (the
    default), one they see but may not change is refused (403, ``rules.check_change``)."""
    rules.check_owner(user)
    try:
        dataset = visible_datasets(user).select_related("project", "owner").get(pk=dataset_id)
    except Dataset.DoesNotExist:
        raise Http404("No such dataset.") from None
    if to_change:
        rules.check_change(user, dataset)
    return dataset


def visible_datasets(user) -> QuerySet[Dataset]:
    """The steward's own datasets, and every dataset of their projects that let stewards see
    all of them."""
    steward_of = roles.projects_where(user, roles.STEWARD)
    return Dataset.objects.filter(
        Q(owner=user, project__in=steward_of)
        | Q(project__in=steward_of, project__stewards_see_all=True)
    )


def ensure_ready(dataset: Dataset) -> None:
    """Refuse a dataset still being profiled, or whose file was refused (``InvalidInput``)."""
    rules.check_use(Dataset.objects.filter(pk=dataset.pk).values_list("status", flat=True).first())


# --- Hierarchies ----------------------------------------------------------------------------


def column_values(dataset: Dataset, column: DatasetColumn) -> list[str]:
    return column_store.distinct_values(dataset, column.name)


def build_hierarchy(
    dataset: Dataset, column: DatasetColumn, builder: str, params: dict
) -> Hierarchy:
    """The builder's hierarchy on the column's values (``InvalidInput`` naming the problem)."""
    try:
        return hierarchies.build(column_values(dataset, column), builder, params, column.name)
    except HierarchyError as exc:
        raise InvalidInput(str(exc)) from None


def current_hierarchy(dataset: Dataset, column: DatasetColumn) -> Hierarchy:
    if column.hierarchy_text:
        return Hierarchy.from_arx_csv(column.hierarchy_text, attribute=column.name)
    return Hierarchy.automatic(column_values(dataset, column), attribute=column.name)


def hierarchy_preview(dataset: Dataset, column: DatasetColumn, builder: str, fields) -> dict:
    """The levels ``builder`` makes on the column's actual values (its current hierarchy when
    no builder is chosen), with its parameters from the form's ``fields``, for the live
    preview; ``error`` says why there is none."""
    context = {"column": column, "error": "", "rows": [], "levels": []}
    try:
        ensure_ready(dataset)
        params = hierarchies.params_from(fields, builder)
        if builder in ("", DatasetColumn.HierarchySource.UPLOADED):
            hierarchy = current_hierarchy(dataset, column)
        else:
            hierarchy = build_hierarchy(dataset, column, builder, params)
    except (InvalidInput, HierarchyError) as exc:
        context["error"] = str(exc)
    else:
        context["rows"] = hierarchies.preview_rows(hierarchy)
        context["levels"] = hierarchies.level_counts(hierarchy)
        context["height"] = hierarchy.height
        context["values"] = len(hierarchy.rows)
    return context


def datasets_for(user) -> QuerySet[Dataset]:
    """The datasets a steward sees (their own, and their projects' where the project allows),
    newest first, with their request counts."""
    roles.require(user, roles.STEWARDS, "see datasets")
    return (
        visible_datasets(user)
        .select_related("project", "owner")
        .annotate(
            request_count=Count("requests", distinct=True),
            quasi_count=Count(
                "columns", filter=Q(columns__role=Role.QUASI_IDENTIFIER), distinct=True
            ),
            unroled_count=Count("columns", filter=Q(columns__role=""), distinct=True),
        )
        .order_by("-created_at", "-id")
    )  # aggregation drops Meta.ordering


# --- A dataset's page -----------------------------------------------------------------------


def decorate(column: DatasetColumn) -> DatasetColumn:
    """Attach what the column's rows show besides the model's fields."""
    share = column.unique_row_share
    params = column.hierarchy_params or {}
    vars(column).update(
        distinct_percent=round(100 * column.distinct_share, 1),
        unique_row_percent=None if share is None else round(100 * share, 1),
        widths_text=", ".join(
            str(int(w)) if float(w).is_integer() else str(w) for w in params.get("widths") or []
        ),
        dayfirst=params.get("dayfirst", hierarchies.dayfirst_default(column)),
    )
    return column


# The choices every column row offers.
COLUMN_CHOICES = {
    # No role is the default and withholds the column; every role is an explicit choice.
    "roles": [("", "— choose a role (withheld until then) —"), *Role.choices],
    "column_types": ColumnType.choices,
    "date_orders": DateOrder.choices,
    "builders": hierarchies.BUILDERS,
}


#: Columns shown on one page of a dataset (a file may have thousands).
COLUMNS_PER_PAGE = 50
#: Columns without a role named on the request form (the rest are counted).
UNROLED_SHOWN = 20


def unroled_columns(dataset) -> tuple[int, list]:
    """How many columns are still without a role (on any page), and the first of them, each
    with the page it is shown on."""
    unroled = dataset.columns.filter(role="").order_by("position")
    count = unroled.count()
    columns = list(unroled.only("pk", "name", "position")[:UNROLED_SHOWN])
    if columns:
        order = {
            pk: i
            for i, pk in enumerate(
                dataset.columns.order_by("position").values_list("pk", flat=True)
            )
        }
        for column in columns:
            vars(column)["page_number"] = order[column.pk] // COLUMNS_PER_PAGE + 1
    return count, columns


def suggestions_pending(dataset) -> int:
    """How many columns have a suggested role other than their role (or none yet)."""
    return dataset.columns.exclude(suggested_role="").exclude(suggested_role=F("role")).count()


def dataset_page(dataset: Dataset, page_number=None) -> dict:
    """The dataset page: one page of its columns (and of the preview's cells), the rest
    behind a pager, so a file of thousands of columns renders as fast as one of ten."""
    page = Paginator(dataset.columns.order_by("position"), COLUMNS_PER_PAGE).get_page(page_number)
    for column in page:
        decorate(column)
    first = (page.number - 1) * COLUMNS_PER_PAGE
    unroled_count, unroled = unroled_columns(dataset)
    return {
        "dataset": dataset,
        "columns": page,
        "page": page,
        "column_count": page.paginator.count,
        "preview": [row[first : first + COLUMNS_PER_PAGE] for row in dataset.preview or []],
        "unroled": unroled,
        "unroled_count": unroled_count,
        **COLUMN_CHOICES,
        "requests": dataset.requests.select_related("requested_by")[:20],
        "suggestions_pending": suggestions_pending(dataset),
        # The privacy budget and ledger (the steward sees them; officers set the budget).
        **budget_context(None, dataset),
    }


def waiting_for_queue(dataset: Dataset) -> bool:
    """Is this pending dataset's message still waiting for the broker (Redis unreachable)?"""
    return dataset.status == Dataset.Status.PENDING and outbox.is_waiting(PROFILE_TASK, dataset.pk)


def stalled(dataset: Dataset) -> leases.Stall | None:
    """The profiling's worker stopped (its lease lapsed) and the sweeper has yet to retry it:
    when it will have, instead of the dead worker's last progress."""
    return leases.stall(dataset) if dataset.status == Dataset.Status.PROFILING else None


# --- The privacy budget and its ledger --------------------------------------------------------

LEDGER_PER_PAGE = 20


def can_see_budget(user, dataset: Dataset) -> bool:
    if user is None or not user.is_authenticated:
        return False
    return roles.has_role(user, roles.OFFICER, dataset.project_id) or (
        roles.has_role(user, roles.STEWARD, dataset.project_id) and dataset.owner_id == user.pk
    )


def can_set_budget(user, dataset: Dataset) -> bool:
    """Privacy officers set budgets, never of a dataset they own (``budget.set_budget``)."""
    return (
        user is not None
        and user.is_authenticated
        and roles.has_role(user, roles.OFFICER, dataset.project_id)
        and dataset.owner_id != user.pk
    )


@dataclass(frozen=True)
class LedgerPage:
    ledger: budget.Ledger
    #: The page of ledger lines, newest first.
    page: Page


def ledger_page(dataset: Dataset, page_number=None) -> LedgerPage:
    """The dataset's ledger, newest line first, one page of it; each line with the total in
    force, what was spent and what remained once it was written."""
    ledger = budget.ledger_for(dataset)
    lines = list(reversed(ledger.lines))
    return LedgerPage(ledger, Paginator(lines, LEDGER_PER_PAGE).get_page(page_number))


def budget_context(user, dataset: Dataset, page_number=None) -> dict:
    """The budget card of a page: figures, the ledger's page, and whether ``user`` sets it."""
    found = ledger_page(dataset, page_number)
    return {
        "budget_dataset": dataset,
        "ledger": found.ledger,
        "ledger_lines": found.page,
        "can_set_budget": can_set_budget(user, dataset),
    }
