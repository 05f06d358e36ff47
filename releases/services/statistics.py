"""Differentially private statistics releases: requesting one, running it, its checks and report.

A statistics release is a :class:`~releases.models.ReleaseRequest` of kind "statistics". It goes
through everything an extract does (the lifecycle table, rounds, blind votes, review bound to
the package digest, named recipients, terms, expiry, revocation, logged downloads, the audit
log); what differs lives here:

* the request holds a list of queries (``engine.dp``), each with its ε, checked against the
  dataset's columns and refused up front when their ε does not fit what remains of the
  dataset's privacy budget (the spend checks again, atomically);
* a query may read only the columns chosen for release (quasi-identifiers, sensitive columns,
  columns released as is): never a direct identifier, a withheld column or one with no role
  yet. That is checked on request, in the preview, and again by the worker before it spends;
* a histogram's labels are published as they are, so they come from a public source (typed
  by the steward, a level of the column's hierarchy, the column's declared values) or from
  the data through OpenDP's private key release, which needs δ > 0 from the budget;
* the run (:func:`run_statistics`, the worker's body) spends first, through
  ``budget.spend``, and commits; then it draws the noise once with OpenDP and writes the tables
  as CSV and JSON, the files the officers' review is bound to. A run that fails after spending
  has still spent: the ledger says so;
* a round spends once (a task delivered twice does not spend twice); a resubmission is a new
  round, and spends again, visibly.

Nothing here reads the original data except the run (which also counts, for the officers
only, the true rows behind each published cell) and the hierarchy a steward's labels come from.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import pandas as pd
from celery.exceptions import SoftTimeLimitExceeded
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from ..engine import EngineError, dp
from ..engine.export import write_csv
from ..models import (
    AuditEvent,
    BudgetEntry,
    Dataset,
    DatasetColumn,
    ReleaseFile,
    ReleaseRequest,
    ReleaseRound,
    Role,
)
from ..models.datasets import RELEASED_ROLES
from . import (
    InvalidInput,
    audit,
    budget,
    datasets,
    dispatch,
    leases,
    lifecycle,
    package,
    roles,
    storage,
)
from .release import (
    RunCancelled,
    Sharing,
    claim_run,
    default_terms,
    fail_attempt,
    locked,
    memory_message,
    open_round,
    soft_limit_message,
    validate_sharing,
)
from .review import Check

logger = logging.getLogger(__name__)

State = ReleaseRequest.State
STATISTICS = ReleaseRequest.Kind.STATISTICS
Format = ReleaseFile.Format
TASK = "releases.run_statistics"
#: The columns of the CSV table, one row per published number.
CSV_COLUMNS = [
    "query",
    "statistic",
    "group",
    "value",
    "error_95",
    "error_kind",
    "epsilon",
    "delta",
    "mechanism",
]
#: What the values offered as categories may hold at most (the engine's own limit).
MAX_OFFERED_CATEGORIES = dp.MAX_CATEGORIES


def is_statistics(release_request: ReleaseRequest) -> bool:
    return release_request.kind == STATISTICS


def is_statistics_request(request_id: int) -> bool:
    return ReleaseRequest.objects.filter(pk=request_id, kind=STATISTICS).exists()


# --- Queries ---------------------------------------------------------------------------------


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


def _amount(queries: list[dp.Query]) -> tuple[Decimal, Decimal]:
    return dp.requested_epsilon(queries), dp.requested_delta(queries)


def check_fits(dataset: Dataset, epsilon: Decimal, delta: Decimal) -> budget.Remaining:
    """Refuse, with what remains, a release whose ε or δ exceeds what the budget has left."""
    left = budget.remaining(dataset)
    if left is None:
        raise InvalidInput(
            f"No privacy budget is set for {dataset.name}; a privacy officer sets one before "
            "any statistics release."
        )
    if epsilon > left.epsilon or delta > left.delta:
        needs = f"ε {budget.show(epsilon)}" + (f" and δ {budget.show(delta)}" if delta else "")
        raise InvalidInput(
            f"These queries need {needs}, but only ε {budget.show(left.epsilon)}"
            + (f" and δ {budget.show(left.delta)}" if delta else "")
            + f" of the privacy budget of {dataset.name} remains. Lower the ε of some "
            "queries, drop some, or ask a privacy officer to raise the budget."
        )
    return left


@dataclass(frozen=True)
class QueryPreview:
    """One row of the request form: its plan (mechanism, ε, error at 95 %) or why it cannot run."""

    number: int
    plan: dp.QueryPlan | None
    error: str = ""


@dataclass(frozen=True)
class Preview:
    rows: list[QueryPreview]
    epsilon: Decimal
    delta: Decimal
    remaining: budget.Remaining | None
    #: Why the release cannot be requested as it stands (empty when it can).
    refusal: str

    @property
    def fits(self) -> bool:
        return not self.refusal


def preview(user, dataset: Dataset, items: list[dict | None]) -> Preview:
    """Each query's mechanism and expected error at 95 %, and the total against what remains.

    Reads no data and spends nothing. ``items`` are the form's rows (None for an empty row);
    a mean's error is given at the dataset's number of rows, which its steward knows."""
    dataset = datasets.get_dataset_for(user, dataset.pk)
    columns = dataset_columns(dataset)
    rows: list[QueryPreview] = []
    valid: list[dp.Query] = []
    for number, item in enumerate(items, start=1):
        if item is None:
            continue
        try:
            (query,) = parse_queries([item], dataset)
            (plan,) = dp.preview([query], rows=dataset.row_count or None)
        except (EngineError, InvalidInput) as exc:
            # One row at a time: "Query 1 (...)" is this row.
            rows.append(QueryPreview(number, None, str(exc).replace("Query 1 ", "This query ", 1)))
            continue
        rows.append(QueryPreview(number, plan))
        valid.append(query)
    epsilon, delta = _amount(valid)
    remaining = budget.remaining(dataset)
    refusal = ""
    if not valid:
        refusal = "Add at least one query."
    elif any(r.error for r in rows):
        refusal = "Correct the queries marked below."
    else:
        try:
            dp.validate_queries(valid, columns)
            check_fits(dataset, epsilon, delta)
        except (EngineError, InvalidInput) as exc:
            refusal = str(exc)
    return Preview(rows, epsilon, delta, remaining, refusal)


# --- Requesting and resubmitting -----------------------------------------------------------------


def _describe(queries: list[dp.Query]) -> list[dict]:
    return [
        {"kind": q.kind, "description": q.describe(), "epsilon": q.epsilon, "delta": q.delta}
        for q in queries
    ]


def request_statistics(
    user, dataset: Dataset, items: list[dict], sharing: Sharing | None = None
) -> ReleaseRequest:
    """Save a statistics release request and enqueue its run once the transaction commits.

    Refused up front (nothing saved) when a query cannot run or the queries' ε does not fit
    what remains of the dataset's budget."""
    dataset = datasets.get_dataset_for(user, dataset.pk)
    datasets.ensure_ready(dataset)
    sharing = sharing or Sharing()
    queries = parse_queries(items, dataset)
    epsilon, delta = _amount(queries)
    check_fits(dataset, epsilon, delta)
    validate_sharing(sharing)
    with transaction.atomic():
        release_request = ReleaseRequest.objects.create(
            dataset=dataset,
            requested_by=user,
            kind=STATISTICS,
            queries=[q.to_dict() for q in queries],
            config={"kind": STATISTICS, "columns": sorted({c for q in queries for c in q.columns})},
            stage="Waiting for a worker",
            terms=(sharing.terms if sharing.terms is not None else default_terms()).strip(),
            expires_at=sharing.expires_at,
        )
        release_request.recipients.set(sharing.recipients)
        release_request.recipient_groups.set(sharing.recipient_groups)
        audit.record(
            AuditEvent.Action.REQUEST,
            user,
            request=release_request,
            kind=STATISTICS,
            queries=_describe(queries),
            epsilon=budget.show(epsilon),
            delta=budget.show(delta),
            recipients=[u.get_username() for u in sharing.recipients],
            recipient_groups=[g.name for g in sharing.recipient_groups],
            expires_at=sharing.expires_at.isoformat() if sharing.expires_at else None,
        )
        dispatch.enqueue(TASK, release_request.pk)
    return release_request


def resubmit(user, request_id: int, items: list[dict], response: str) -> ReleaseRequest:
    """Answer a "changes requested" (or a failed or cancelled run) with these queries: a new
    round, which runs again and spends again."""
    response = (response or "").strip()
    with transaction.atomic():
        release_request = locked(request_id)
        lifecycle.check_resubmit(user, release_request)
        if not is_statistics(release_request):
            raise InvalidInput("This request is an extract: resubmit it with a privacy model.")
        if not response:
            raise InvalidInput("Answer the reviewers' comments before resubmitting.")
        dataset = datasets.get_dataset_for(user, release_request.dataset_id)
        queries = parse_queries(items, dataset)
        epsilon, delta = _amount(queries)
        check_fits(dataset, epsilon, delta)
        old_files = list(release_request.files.filter(round=release_request.round))
        spent = budget.spend_of_round(release_request, release_request.round)
        ReleaseRound.objects.create(
            request=release_request,
            number=release_request.round,
            parameters={
                "kind": STATISTICS,
                "queries": release_request.queries,
                "package_sha256": release_request.package_sha256,
                "files": [
                    {"format": f.format, "sha256": f.sha256, "size_bytes": f.size_bytes}
                    for f in old_files
                ],
                "spent": budget.show(spent.epsilon) if spent else None,
            },
            outcome=release_request.state,
            summary=release_request.summary,
            error=release_request.error,
            extract_sha256=release_request.extract_sha256,
            submitted_at=release_request.submitted_at,
            response=response,
        )
        # The previous round's files can never be downloaded: their rows go now, the files
        # once committed. Their numbers stay in the round's summary.
        old_paths = [f.path for f in old_files]
        ReleaseFile.objects.filter(pk__in=[f.pk for f in old_files]).delete()
        release_request.queries = [q.to_dict() for q in queries]
        release_request.config = {
            "kind": STATISTICS,
            "columns": sorted({c for q in queries for c in q.columns}),
        }
        open_round(release_request, "resubmit")
        release_request.save()
        audit.record(
            AuditEvent.Action.RESUBMIT,
            user,
            request=release_request,
            round=release_request.round,
            comment=response,
            queries=_describe(queries),
            epsilon=budget.show(epsilon),
        )
        transaction.on_commit(lambda: [storage.delete_quietly(p) for p in old_paths])
        dispatch.enqueue(TASK, release_request.pk)
    return release_request


# --- Running a release (the worker's body) ---------------------------------------------------------


def _stored_queries(release_request: ReleaseRequest) -> list[dp.Query]:
    """The round's queries as requested (their labels were taken from their sources then)."""
    try:
        queries = dp.queries_from_list(release_request.queries)
        dp.validate_queries(queries, dataset_columns(release_request.dataset))
    except EngineError as exc:
        raise InvalidInput(str(exc)) from None
    return queries


def _progress(request_id: int, fraction: float, stage: str) -> None:
    still_running = ReleaseRequest.objects.filter(
        pk=request_id, state=State.RUNNING, worker=leases.worker_id()
    ).update(progress=fraction, stage=stage, heartbeat_at=timezone.now())
    if not still_running:
        raise RunCancelled()


def _spend(release_request: ReleaseRequest, queries: list[dp.Query]) -> BudgetEntry:
    """The round's spend: made now (committed before any noise is drawn), or the one this
    round already made when the task is delivered a second time."""
    earlier = budget.spend_of_round(release_request, release_request.round)
    if earlier is not None:
        return earlier
    epsilon, delta = _amount(queries)
    return budget.spend(
        release_request.dataset,
        epsilon,
        delta,
        release_request.requested_by,
        {
            "round": release_request.round,
            "request": release_request.pk,
            "queries": _describe(queries),
        },
        release_request=release_request,
    )


def _budget_figures(entry: BudgetEntry) -> dict:
    """The budget around a spend: the total in force, what remained before and after it."""
    total = entry.epsilon + entry.epsilon_remaining
    budget_row = budget.budget_of(entry.dataset) if entry.dataset_id else None
    return {
        "entry": entry.pk,
        "spent_at": entry.created_at.isoformat(),
        "epsilon": budget.show(entry.epsilon),
        "delta": budget.show(entry.delta),
        "before": budget.show(total),
        "after": budget.show(entry.epsilon_remaining),
        "delta_before": budget.show(entry.delta + entry.delta_remaining),
        "delta_after": budget.show(entry.delta_remaining),
        "total": budget.show(budget_row.epsilon_total) if budget_row else None,
        "delta_total": budget.show(budget_row.delta_total) if budget_row else None,
    }


def _frame(release_request: ReleaseRequest, queries: list[dp.Query]) -> pd.DataFrame:
    """The columns the queries read (a count alone reads the first column, for its rows)."""
    dataset = release_request.dataset
    needed = sorted({c for q in queries for c in q.columns})
    if not needed:
        needed = dataset_columns(dataset)[:1]
    return datasets.load_frame(dataset, columns=needed)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def table_csv(result: dp.ReleaseResult) -> bytes:
    """One row per published number (formulas neutralised, as in every CSV the app writes)."""
    rows = result.table_rows()
    plans = {r.plan.index + 1: r.plan for r in result.results}
    frame = pd.DataFrame(
        [
            {
                "query": str(row["query"]),
                "statistic": row["statistic"],
                "group": row["group"],
                "value": _cell(row["value"]),
                "error_95": _cell(row["error"]),
                "error_kind": row["error_kind"],
                "epsilon": _cell(row["epsilon"]),
                "delta": _cell(plans[row["query"]].delta),
                "mechanism": row["mechanism"],
            }
            for row in rows
        ],
        columns=CSV_COLUMNS,
        dtype=object,
    )
    out = io.BytesIO()
    write_csv(frame, out)
    return out.getvalue()


def methods(result: dict) -> list[dict]:
    """Per query, the methods note: what it is, mechanism, ε, δ, bounds, error at 95 %."""
    notes = []
    for r in result.get("results", []):
        query = r.get("query") or {}
        bounds = [query["lower"], query["upper"]] if "lower" in query and "upper" in query else None
        notes.append(
            {
                "query": r["index"] + 1,
                "kind": r["kind"],
                "statistic": r["description"],
                "mechanism": r["mechanism"],
                "epsilon": r["epsilon"],
                "delta": r["delta"],
                "bounds": bounds,
                "groups": query.get("by", []),
                "labels": [dp.describe_grouping(g) for g in query.get("by", [])],
                "noise_scale": r["scale"],
                "sensitivity": r["sensitivity"],
                "error_95": r["error"],
                "error_kind": r["error_kind"],
                "error_note": r["error_note"],
            }
        )
    return notes


def tables_json(release_request: ReleaseRequest, result: dp.ReleaseResult) -> bytes:
    """The JSON file: the release's methods note and its results, exactly those reviewed (the
    "result" member's canonical SHA-256 is ``result_sha256``)."""
    data = result.to_dict()
    content = {
        "release": release_request.pk,
        "round": release_request.round,
        "dataset": release_request.dataset.name,
        "epsilon": result.epsilon,
        "delta": result.delta,
        "confidence": result.confidence,
        "privacy_unit": result.privacy_unit,
        "composition": result.composition,
        "opendp_version": result.opendp_version,
        "methods": methods(data),
        "result": data,
        "result_sha256": result.sha256,
    }
    return (
        json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    ).encode("utf-8")


def _store(release_request: ReleaseRequest, result: dp.ReleaseResult) -> list[ReleaseFile]:
    files: list[ReleaseFile] = []
    try:
        for fmt, data in (
            (Format.CSV, table_csv(result)),
            (Format.JSON, tables_json(release_request, result)),
        ):
            files.append(
                ReleaseFile(
                    request=release_request,
                    round=release_request.round,
                    format=fmt,
                    sha256=storage.sha256_hex(data),
                    size_bytes=len(data),
                    path=storage.save_bytes("statistics", package.SUFFIXES[fmt], data),
                )
            )
    except BaseException:
        _discard(files)
        raise
    return files


def _discard(files: list[ReleaseFile]) -> None:
    for stored in files:
        storage.delete_quietly(stored.path)


def run_statistics(request_id: int) -> None:
    """Spend, then draw the noise once and store the tables: the round is ready for review.

    The spend commits before any noise is drawn; a run that fails or is cancelled after it
    keeps its spend (and says so on its page and in the ledger)."""
    release_request = claim_run(request_id, stage="Spending the privacy budget", progress=0.05)
    if release_request is None:
        return
    files: list[ReleaseFile] = []
    # A lease like a row-level run's: cancelled, deleted or handed to another attempt, the run
    # stops within a heartbeat; its process killed, the sweeper retries or fails it.
    lease = leases.Lease(
        ReleaseRequest,
        release_request.pk,
        interrupt=RunCancelled,
        state=State.RUNNING,
        worker=release_request.worker,
    )
    try:
        with lease:
            _run(release_request, lease, files)
    except RunCancelled:
        _discard(files)
        if ReleaseRequest.objects.filter(pk=release_request.pk, state=State.CANCELLED).exists():
            audit.record(
                AuditEvent.Action.RUN_CANCELLED,
                None,
                request=release_request,
                round=release_request.round,
            )
    except (EngineError, InvalidInput, PermissionDenied) as exc:
        _discard(files)
        _fail(release_request, str(exc))
    except SoftTimeLimitExceeded:
        _discard(files)
        _fail(release_request, soft_limit_message())
    except MemoryError:
        _discard(files)
        _fail(release_request, memory_message())
    except Exception:
        logger.exception("Statistics release %s failed", request_id)
        _discard(files)
        _fail(
            release_request,
            "The run stopped because of an internal error. The administrators can find the "
            "details in the worker's log.",
        )


def _run(release_request: ReleaseRequest, lease: leases.Lease, files: list[ReleaseFile]) -> None:
    """The run's body: spend, draw the noise, store the tables, record the result."""
    queries = _stored_queries(release_request)
    # The roles as they are now: a column made an identifier or withheld since the request
    # is refused before anything is spent.
    check_columns(release_request.dataset, queries)
    entry = _spend(release_request, queries)
    _progress(release_request.pk, 0.3, "Drawing the noise (once)")
    frame = _frame(release_request, queries)
    result = dp.run_release(frame, queries)
    counted = dp.true_counts(frame, queries, result)
    _progress(release_request.pk, 0.8, "Writing the tables")
    files.extend(_store(release_request, result))
    by_format = {f.format: f for f in files}
    digest = package.package_digest({f.format: f.sha256 for f in files})
    summary = {
        "kind": STATISTICS,
        "result": result.to_dict(),
        "result_sha256": result.sha256,
        "epsilon": budget.show(Decimal(repr(result.epsilon))),
        "delta": budget.show(Decimal(repr(result.delta))),
        "budget": _budget_figures(entry),
        # Exact counts behind the published cells: for the officers' review, never released.
        "true_counts": counted,
    }
    lease.stop()  # from here the conditional write decides
    with transaction.atomic():
        finished = ReleaseRequest.objects.filter(
            pk=release_request.pk,
            state__in=lifecycle.sources("finish_run"),
            worker=release_request.worker,
        ).update(
            state=lifecycle.target(State.RUNNING, "finish_run"),
            progress=1.0,
            stage="Ready for review",
            finished_at=timezone.now(),
            extract_path=by_format[Format.CSV].path,
            extract_sha256=by_format[Format.CSV].sha256,
            package_sha256=digest,
            summary=summary,
        )
        if not finished:
            raise RunCancelled()
        ReleaseFile.objects.bulk_create(files)
        audit.record(
            AuditEvent.Action.RUN_END,
            None,
            request=release_request,
            round=release_request.round,
            kind=STATISTICS,
            epsilon=summary["epsilon"],
            result_sha256=result.sha256,
            sha256=by_format[Format.CSV].sha256,
            package_sha256=digest,
            files={f.format: f.sha256 for f in files},
        )


def _fail(release_request: ReleaseRequest, reason: str) -> None:
    spent = budget.spend_of_round(release_request, release_request.round)
    if spent is not None:
        reason += f" The privacy budget was spent all the same (ε {budget.show(spent.epsilon)})."
    fail_attempt(release_request, reason)


# --- Checks before approval ------------------------------------------------------------------------


#: The check whose figures only privacy officers see (the exact counts behind the cells).
TRUE_COUNTS_CHECK = "smallest true count"


def checks(release_request: ReleaseRequest) -> list[Check]:
    """What a statistics round must satisfy before approval: its results are there and are
    those in its files; every column it reads is one chosen for release; every label comes
    from a public source or a private key release; the noise hides one row where few rows
    stand behind a cell; its spend is in the ledger; the files are the stored bytes."""
    summary = release_request.summary or {}
    result = summary.get("result")
    if not result:
        return [Check("result", False, "There is no result to check.")]
    out = []
    expected = len(release_request.queries or [])
    got = len(result.get("results", []))
    sha = hashlib.sha256(dp.canonical_json(result)).hexdigest()
    out.append(
        Check(
            "results",
            got == expected and sha == summary.get("result_sha256"),
            f"{got} results for {expected} queries, SHA-256 {sha[:12]}…"
            if sha == summary.get("result_sha256")
            else "the stored results do not match their SHA-256",
        )
    )
    queries = dp.queries_from_list(release_request.queries)
    out.append(columns_check(release_request.dataset, queries))
    out.append(label_check(release_request.queries, result))
    out.append(true_counts_check(summary))
    out.append(_budget_check(release_request, queries))
    out.append(_files_check(release_request, summary))
    return out


def columns_check(dataset: Dataset, queries: list[dp.Query]) -> Check:
    """Every column the queries read has a role that releases it (the roles as they are now)."""
    roles = column_roles(dataset)
    problems = role_problems(queries, roles)
    if problems:
        return Check("columns used", False, " ".join(problems))
    used = list(dict.fromkeys(c for q in queries for c in q.columns))
    if not used:
        return Check("columns used", True, "no column is read (a count of rows)")
    names = ", ".join(f"{c} ({Role(roles[c]).label.split(' (')[0].lower()})" for c in used)
    return Check("columns used", True, f"{names}: each chosen for release")


def label_sources(items: list[dict]) -> list[dict]:
    """Per histogram grouping of the stored queries: where its labels come from, in words, and
    whether that source may be published. A grouping stored without its source (requested
    before sources were recorded) with categories has labels of unknown origin: they may have
    been filled in from the data, so they may not."""
    out = []
    for number, item in enumerate(items, start=1):
        if item.get("kind") != "histogram":
            continue
        for grouping in item.get("by", []):
            unrecorded = "source" not in grouping and bool(grouping.get("categories"))
            from_data = grouping.get("source") == dp.DATA
            out.append(
                {
                    "query": number,
                    "column": grouping.get("column", ""),
                    "words": dp.describe_grouping(grouping),
                    "from_data": from_data,
                    "allowed": not unrecorded and (not from_data or bool(item.get("delta"))),
                }
            )
    return out


def label_check(items: list[dict], result: dict) -> Check:
    """Labels are public knowledge, or from the data through a private key release (which the
    run must have used: its mechanism is the threshold)."""
    sources = label_sources(items)
    if not sources:
        return Check("label sources", True, "no histogram: no label is published")
    mechanisms = {r["index"] + 1: r.get("mechanism", "") for r in result.get("results", [])}
    problems = []
    for s in sources:
        if not s["allowed"]:
            problems.append(
                f"query {s['query']}, {s['words']} (they may have been filled in from the data)"
            )
        elif s["from_data"] and "threshold" not in mechanisms.get(s["query"], ""):
            problems.append(
                f"query {s['query']}, {s['column']}: labels from the data without a private "
                "key release"
            )
    if problems:
        return Check(
            "label sources",
            False,
            "; ".join(problems) + ". Labels are published as they are: resubmit with labels "
            "typed, from the hierarchy or the declared values, or from the data released "
            "privately.",
        )
    return Check(
        "label sources", True, "; ".join(f"query {s['query']}, {s['words']}" for s in sources)
    )


def true_counts_check(summary: dict) -> Check:
    """The smallest true count behind a published cell, and whether the noise hides one row
    where few rows stand behind a cell (fails when a small cell is released nearly exact)."""
    counted = summary.get("true_counts")
    if counted is None:
        return Check(
            TRUE_COUNTS_CHECK,
            True,
            "not counted: this round ran before true counts were recorded (re-run it to see them)",
        )
    occupied = [c for c in counted if c.get("smallest") is not None]
    if not occupied:
        return Check(TRUE_COUNTS_CHECK, True, "no published cell holds a row")
    low = min(occupied, key=lambda c: c["smallest"])
    where = f"query {low['query']}" + (f", cell {low['cell']!r}" if low["cell"] else "")
    small = sum(c["small_cells"] for c in counted)
    exposed = [c for c in counted if c["small_cells"] and not c["hides_one_row"]]
    detail = (
        f"{low['smallest']} row{'s' if low['smallest'] != 1 else ''} ({where}); "
        f"{small} published cell{'s' if small != 1 else ''} hold fewer than {dp.SMALL_CELL} rows"
    )
    if exposed:
        queries = ", ".join(str(c["query"]) for c in exposed)
        return Check(
            TRUE_COUNTS_CHECK,
            False,
            f"{detail}; the noise of quer{'y' if len(exposed) == 1 else 'ies'} {queries} is "
            "smaller than one row's effect, so it hides nothing: lower its ε",
        )
    return Check(TRUE_COUNTS_CHECK, True, f"{detail}; the noise hides one row in each query")


def _budget_check(release_request: ReleaseRequest, queries: list[dp.Query]) -> Check:
    spent = budget.spend_of_round(release_request, release_request.round)
    epsilon, delta = _amount(queries)
    if spent is None:
        return Check("privacy budget spent", False, "no spend of this round is in the ledger")
    return Check(
        "privacy budget spent",
        spent.epsilon >= epsilon and spent.delta >= delta,
        f"ε {budget.show(spent.epsilon)}"
        + (f" and δ {budget.show(spent.delta)}" if spent.delta else "")
        + f" spent (line {spent.pk} of the ledger) for the queries' ε {budget.show(epsilon)}"
        + (f" and δ {budget.show(delta)}" if delta else ""),
    )


def checks_for(user, release_request: ReleaseRequest) -> list[Check]:
    """The checks as ``user`` may see them: the exact counts behind the cells are for privacy
    officers only (the line stays, its figures are withheld from anyone else)."""
    found = checks(release_request)
    if user is not None and roles.is_officer(user):
        return found
    return [
        Check(c.name, c.passed, "shown to privacy officers only")
        if c.name == TRUE_COUNTS_CHECK
        else c
        for c in found
    ]


def _files_check(release_request: ReleaseRequest, summary: dict) -> Check:
    files = {f.format: f for f in release_request.files.filter(round=release_request.round)}
    missing = [fmt for fmt in (Format.CSV, Format.JSON) if fmt not in files]
    if missing:
        return Check("files", False, f"no {' or '.join(missing).upper()} file for this round")
    for stored in files.values():
        if not storage.exists(stored.path) or storage.sha256_of(stored.path) != stored.sha256:
            return Check(
                "files", False, f"the {stored.get_format_display()} file is not the stored bytes"
            )
    content = json.loads(storage.read_bytes(files[Format.JSON].path))
    inside = dp.canonical_json(content.get("result"))
    if storage.sha256_hex(inside) != summary.get("result_sha256"):
        return Check("files", False, "the JSON file does not hold the results shown here")
    return Check("files", True, "CSV and JSON stored intact; the JSON holds the results shown")


# --- The release report ------------------------------------------------------------------------


def report(release_request: ReleaseRequest, audience: str) -> dict:
    """The release report of a statistics release (``services.report.build`` hands it here).

    Both audiences get the methods note per query (mechanism, ε, δ, bounds, error at 95 %,
    privacy unit, composition) with the noisy values, the budget figures, the approvals, the
    files and the terms: the noisy statistics are the release, nothing of the original is in
    it. Officers and the requester also get the checks, every review and the recipients."""
    from ..selectors import current_approvals, recipient_names, round_files
    from .downloads import filename_stem
    from .report import REPORT_VERSION, REVIEWER, _iso

    files = round_files(release_request)
    approvals = list(current_approvals(release_request))
    stem = filename_stem(release_request)
    released = release_request.state in ReleaseRequest.RELEASED_STATES
    content: dict = {
        "report_version": REPORT_VERSION,
        "kind": STATISTICS,
        "generated_at": timezone.now().isoformat(),
        "audience": audience,
        "release": {
            "id": release_request.pk,
            "round": release_request.round,
            "state": release_request.effective_state,
            "state_label": release_request.effective_state_label,
            "requested_by": release_request.requested_by.get_username(),
            "submitted_at": _iso(release_request.submitted_at),
            "approved_at": _iso(release_request.decided_at) if released else None,
            "expires_at": _iso(release_request.expires_at),
            "revoked": {
                "at": _iso(release_request.revoked_at),
                "by": release_request.revoked_by.get_username()
                if release_request.revoked_by
                else None,
                "reason": release_request.revocation_reason,
            }
            if release_request.revoked_at
            else None,
        },
        "dataset": {"name": release_request.dataset.name, "sha256": release_request.dataset.sha256},
        "extract": {
            "sha256": release_request.extract_sha256,
            "package_sha256": release_request.package_sha256,
            "files": [
                {
                    "format": f.format,
                    "filename": f"{stem}{package.SUFFIXES[f.format]}",
                    "sha256": f.sha256,
                    "size_bytes": f.size_bytes,
                }
                for f in files
            ],
            "not_offered": {},
        },
        **_statistics_sections(release_request),
        "approvals": [
            {"by": r.reviewer.get_username(), "at": _iso(r.created_at)} for r in approvals
        ],
        "terms": {"text": release_request.terms, "sha256": release_request.terms_sha256},
        "compliance": compliance(release_request, files),
    }
    if audience == REVIEWER:
        content["checks"] = [
            {"name": c.name, "passed": c.passed, "detail": c.detail}
            # A report travels: the exact counts behind the cells stay on the review page.
            for c in (checks_for(None, release_request) if release_request.summary else [])
        ]
        content["reviews"] = [
            {
                "round": r.round,
                "by": r.reviewer.get_username(),
                "decision": r.decision,
                "comment": r.comment,
                "package_sha256": r.package_sha256,
                "at": _iso(r.created_at),
            }
            for r in release_request.reviews.select_related("reviewer").order_by(
                "round", "created_at", "id"
            )
            if r.round < release_request.round
            or release_request.state != ReleaseRequest.State.READY
        ]
        content["recipients"] = recipient_names(release_request)
        content["terms"]["accepted_by"] = [
            {"user": a.user.get_username(), "at": _iso(a.accepted_at)}
            for a in release_request.terms_acceptances.select_related("user").filter(
                terms_sha256=release_request.terms_sha256
            )
        ]
    return content


def _statistics_sections(release_request: ReleaseRequest) -> dict:
    """The statistics part of the release report: the methods note per query with its noisy
    value, the privacy figures and the budget. Noisy values only: nothing of the original."""
    summary = release_request.summary or {}
    result = summary.get("result") or {}
    notes = methods(result)
    for note, r in zip(notes, result.get("results", []), strict=False):
        note["value"] = r["value"]
        note["error_95"] = r["error"]
        note["rows"] = dp.QueryResult.from_dict(r).table_rows()
    spend = summary.get("budget") or {}
    return {
        "statistics": {
            "queries": notes,
            "epsilon": summary.get("epsilon"),
            "delta": summary.get("delta"),
            "confidence": result.get("confidence"),
            "privacy_unit": result.get("privacy_unit"),
            "composition": result.get("composition"),
            "opendp_version": result.get("opendp_version"),
            "result_sha256": summary.get("result_sha256"),
        },
        "budget": {
            "epsilon_spent": spend.get("epsilon"),
            "delta_spent": spend.get("delta"),
            "before": spend.get("before"),
            "after": spend.get("after"),
            "spent_at": spend.get("spent_at"),
        },
    }


def compliance(release_request: ReleaseRequest, files: list) -> list[dict]:
    """The checklist items of a statistics release, each from facts the app holds."""
    from .report import DONE, NOT_APPLICABLE, OPEN, _item

    summary = release_request.summary or {}
    items = []
    if summary.get("result"):
        items.append(
            _item(
                "mechanisms",
                "Noise from a vetted library, drawn once",
                DONE,
                f"OpenDP {summary['result'].get('opendp_version')}: every mechanism and the "
                "accounting; the noise was drawn once, in the worker, and reviewed as stored.",
            )
        )
        items.append(
            _item(
                "budget",
                "Within the dataset's privacy budget",
                DONE if summary.get("budget") else OPEN,
                f"ε {summary['budget']['epsilon']} spent of the ε {summary['budget']['before']} "
                f"that remained; ε {summary['budget']['after']} remains."
                if summary.get("budget")
                else "No spend is recorded.",
            )
        )
        bounded = [q for q in release_request.queries if "lower" in q and "upper" in q]
        items.append(
            _item(
                "bounds",
                "Bounds set by the steward, not taken from the data",
                DONE if bounded else NOT_APPLICABLE,
                f"{len(bounded)} quer{'y clamps its' if len(bounded) == 1 else 'ies clamp their'} "
                "values to the bounds the steward typed."
                if bounded
                else "No query needs bounds.",
            )
        )
    else:
        items.append(_item("result", "Noisy results", OPEN, "No result yet."))
    named = release_request.recipients.count() + release_request.recipient_groups.count()
    if not release_request.terms.strip():
        status, reason = OPEN, "The release has no terms of use."
    elif not named:
        status, reason = OPEN, "No recipient is named on the release."
    else:
        status, reason = DONE, "Terms of use for the named recipients, accepted before download."
    items.append(_item("agreement", "Data sharing agreement in place", status, reason))
    items.append(
        _item(
            "files",
            "Files bound to the review",
            DONE if files else OPEN,
            "CSV and JSON with their SHA-256, approved as a package." if files else "No files yet.",
        )
    )
    return items
