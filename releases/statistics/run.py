"""The statistics run, the worker's body: spend first (``budget.spend``) and commit, then draw
the noise once with OpenDP and write the tables as CSV and JSON, the files the officers' review
is bound to. A run that fails after spending has still spent (the ledger says so); a round
spends once (a task delivered twice does not spend twice).

The run reads the original (the columns its queries use) and also counts, for the officers
only, the true rows behind each published cell.
"""

from __future__ import annotations

import io
import json
import logging
from decimal import Decimal
from typing import Any, cast

import pandas as pd
from django.core.exceptions import PermissionDenied

from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.datasets import budget
from releases.datasets import services as datasets
from releases.engine import EngineError, dp
from releases.engine.export import write_csv
from releases.events import emit
from releases.models import (
    AuditEvent,
    BudgetEntry,
    Dataset,
    ReleaseFile,
    ReleaseRequest,
)
from releases.requests import package, rules
from releases.requests.run import RequestRun
from releases.statistics.queries import amount, check_columns, dataset_columns, describe
from releases.statistics.report import methods

logger = logging.getLogger(__name__)

STATISTICS = ReleaseRequest.Kind.STATISTICS
Format = ReleaseFile.Format


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


def _stored_queries(release_request: ReleaseRequest) -> list[dp.Query]:
    """The round's queries as requested (their labels were taken from their sources then)."""
    try:
        queries = dp.queries_from_list(release_request.queries)
        dp.validate_queries(queries, dataset_columns(release_request.dataset))
    except EngineError as exc:
        raise InvalidInput(str(exc)) from None
    return queries


def _spend(release_request: ReleaseRequest, queries: list[dp.Query]) -> BudgetEntry:
    """The round's spend: made now (committed before any noise is drawn), or the one this
    round already made when the task is delivered a second time."""
    earlier = budget.spend_of_round(release_request, release_request.round)
    if earlier is not None:
        return earlier
    epsilon, delta = amount(queries)
    return budget.spend(
        release_request.dataset,
        epsilon,
        delta,
        release_request.requested_by,
        {
            "round": release_request.round,
            "request": release_request.pk,
            "queries": describe(queries),
        },
        release_request=release_request,
    )


def _budget_figures(entry: BudgetEntry) -> dict:
    """The budget around a spend: the total in force, what remained before and after it."""
    # A spend has its ε and δ, and what remained after it.
    epsilon, delta = cast(Decimal, entry.epsilon), cast(Decimal, entry.delta)
    epsilon_left = cast(Decimal, entry.epsilon_remaining)
    delta_left = cast(Decimal, entry.delta_remaining)
    total = epsilon + epsilon_left
    budget_row = budget.budget_of(cast(Dataset, entry.dataset)) if entry.dataset_id else None
    return {
        "entry": entry.pk,
        "spent_at": entry.created_at.isoformat(),
        "epsilon": budget.show(entry.epsilon),
        "delta": budget.show(entry.delta),
        "before": budget.show(total),
        "after": budget.show(entry.epsilon_remaining),
        "delta_before": budget.show(delta + delta_left),
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


class StatisticsRun(RequestRun):
    """Spend, then draw the noise once and store the tables: the round is ready for review.

    The spend commits before any noise is drawn; a run that fails or is cancelled after it
    keeps its spend (and says so on its page and in the ledger). Its lease is a row-level
    run's: cancelled, deleted or handed to another attempt, the run stops within a heartbeat;
    its process killed, the sweeper retries or fails it."""

    refusals = (EngineError, InvalidInput, PermissionDenied)
    first_stage = "Spending the privacy budget"
    first_progress = 0.05

    def __init__(self, pk: int) -> None:
        super().__init__(pk)
        self.files: list[ReleaseFile] = []

    def log_failure(self) -> None:
        logger.exception("Statistics release %s failed", self.pk)

    def stopped(self) -> None:
        _discard(self.files)
        if ReleaseRequest.objects.filter(
            pk=self.pk, state=rules.TABLE.target_of("cancel")
        ).exists():
            audit.record(
                AuditEvent.Action.RUN_CANCELLED, None, request=self.row, round=self.row.round
            )

    def fail(self, reason: str) -> None:
        _discard(self.files)
        spent = budget.spend_of_round(self.row, self.row.round)
        if spent is not None:
            reason += (
                f" The privacy budget was spent all the same (ε {budget.show(spent.epsilon)})."
            )
        super().fail(reason)

    def body(self) -> None:
        """Spend, draw the noise, store the tables, record the result."""
        release_request = self.row
        queries = _stored_queries(release_request)
        # The roles as they are now: a column made an identifier or withheld since the request
        # is refused before anything is spent.
        check_columns(release_request.dataset, queries)
        entry = _spend(release_request, queries)
        self.progress("Drawing the noise (once)", progress=0.3)
        frame = _frame(release_request, queries)
        result = dp.run_release(frame, queries)
        counted = dp.true_counts(frame, queries, result)
        self.progress("Writing the tables", progress=0.8)
        self.files.extend(_store(release_request, result))
        by_format = {f.format: f for f in self.files}
        digest = package.package_digest({f.format: f.sha256 for f in self.files})
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
        self.result = (result, by_format, digest, summary)
        self.finish_run(
            extract_path=by_format[Format.CSV].path,
            extract_sha256=by_format[Format.CSV].sha256,
            package_sha256=digest,
            summary=summary,
        )

    def finished(self) -> None:
        result, by_format, digest, summary = self.result
        ReleaseFile.objects.bulk_create(self.files)
        audit.record(
            AuditEvent.Action.RUN_END,
            None,
            request=self.row,
            round=self.row.round,
            kind=STATISTICS,
            epsilon=summary["epsilon"],
            result_sha256=result.sha256,
            sha256=by_format[Format.CSV].sha256,
            package_sha256=digest,
            files={f.format: f.sha256 for f in self.files},
        )
        emit.transition(self.row, ReleaseRequest.State.RUNNING, ReleaseRequest.State.READY)


def run_statistics(request_id: int) -> None:
    """The Celery task's body: see :class:`StatisticsRun`."""
    StatisticsRun(request_id).run()
