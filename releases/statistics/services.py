"""Differentially private statistics releases: requesting one (with a free preview of each
query's mechanism and error), resubmitting it.

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
* the run (``statistics.run``, the worker's body) spends first, through
  ``budget.spend``, and commits; then it draws the noise once with OpenDP and writes the tables
  as CSV and JSON, the files the officers' review is bound to. A run that fails after spending
  has still spent: the ledger says so;
* a round spends once (a task delivered twice does not spend twice); a resubmission is a new
  round, and spends again, visibly.

Nothing here reads the original data except the run (which also counts, for the officers
only, the true rows behind each published cell) and the hierarchy a steward's labels come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction

from releases.background import outbox
from releases.core import audit
from releases.core.errors import InvalidInput
from releases.datasets import budget
from releases.datasets import services as datasets
from releases.engine import EngineError, dp
from releases.events import emit
from releases.models import (
    AuditEvent,
    Dataset,
    ReleaseFile,
    ReleaseRequest,
    ReleaseRound,
)
from releases.requests import rules
from releases.requests.selectors import locked
from releases.requests.services import (
    Sharing,
    default_terms,
    delete_files,
    open_round,
    validate_sharing,
)
from releases.statistics.queries import amount, dataset_columns, describe, parse_queries

STATISTICS = ReleaseRequest.Kind.STATISTICS
TASK = "releases.run_statistics"


# --- Queries ---------------------------------------------------------------------------------


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
    epsilon, delta = amount(valid)
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
    epsilon, delta = amount(queries)
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
            terms=(sharing.terms if sharing.terms is not None else default_terms(dataset)).strip(),
            expires_at=sharing.expires_at,
        )
        release_request.recipients.set(sharing.recipients)
        release_request.recipient_groups.set(sharing.recipient_groups)
        audit.record(
            AuditEvent.Action.REQUEST,
            user,
            request=release_request,
            kind=STATISTICS,
            queries=describe(queries),
            epsilon=budget.show(epsilon),
            delta=budget.show(delta),
            recipients=[u.get_username() for u in sharing.recipients],
            recipient_groups=[g.name for g in sharing.recipient_groups],
            expires_at=sharing.expires_at.isoformat() if sharing.expires_at else None,
        )
        emit.transition(release_request, "", release_request.state)
        outbox.enqueue(TASK, release_request.pk)
    return release_request


def resubmit(user, request_id: int, items: list[dict], response: str) -> ReleaseRequest:
    """Answer a "changes requested" (or a failed or cancelled run) with these queries: a new
    round, which runs again and spends again."""
    response = (response or "").strip()
    with transaction.atomic():
        release_request = locked(request_id)
        rules.check_resubmit(user, release_request)
        if not release_request.is_statistics:
            raise InvalidInput("This request is an extract: resubmit it with a privacy model.")
        if not response:
            raise InvalidInput("Answer the reviewers' comments before resubmitting.")
        dataset = datasets.get_dataset_for(user, release_request.dataset_id)
        queries = parse_queries(items, dataset)
        epsilon, delta = amount(queries)
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
        was = release_request.state
        open_round(release_request, "resubmit")
        release_request.save()
        emit.transition(release_request, was, release_request.state)
        audit.record(
            AuditEvent.Action.RESUBMIT,
            user,
            request=release_request,
            round=release_request.round,
            comment=response,
            queries=describe(queries),
            epsilon=budget.show(epsilon),
        )
        transaction.on_commit(lambda: delete_files(old_paths))
        outbox.enqueue(TASK, release_request.pk)
    return release_request


# --- Running a release (the worker's body) ---------------------------------------------------------


# --- Checks before approval ------------------------------------------------------------------------


# --- The release report ------------------------------------------------------------------------
