"""A dataset's privacy budget and its append-only ledger.

A privacy officer sets a dataset's total ε (and δ); every differentially private release
spends from it, and a row-level extract of the same dataset is recorded beside, outside the
DP budget, so the officer sees both. Releases compose by basic sequential composition: what
remains is the total minus the sum of the spends.

Spending is atomic. :func:`spend` locks the budget row (``SELECT ... FOR UPDATE`` on
PostgreSQL; on SQLite every write transaction begins ``IMMEDIATE`` (see settings), which
serialises writers) and checks and inserts in one transaction, so concurrent releases can
never spend more than the total. Amounts are exact decimals: a spend is rounded up to 12
places, a budget down, so rounding never lets through what exact numbers would refuse.

Call :func:`spend` before any noise is drawn, and let it commit: a release whose run then
fails has still spent its ε, which is the safe side.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from typing import Any, cast

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from releases.core import audit, roles
from releases.core.errors import InvalidInput
from releases.models import AuditEvent, BudgetEntry, Dataset, PrivacyBudget, ReleaseRequest
from releases.models.privacy_budget import DELTA_PLACES, EPSILON_PLACES

Kind = BudgetEntry.Kind
ZERO = Decimal(0)
#: The largest total ε an officer may set (the field holds six digits before the point).
MAX_EPSILON_TOTAL = Decimal(100_000)


@dataclass(frozen=True)
class Remaining:
    epsilon: Decimal
    delta: Decimal


@dataclass(frozen=True)
class LedgerLine:
    """An entry and the budget it left: the total in force, spent so far, and what remained."""

    entry: BudgetEntry
    epsilon_total: Decimal | None
    epsilon_spent: Decimal
    epsilon_remaining: Decimal | None


@dataclass(frozen=True)
class Ledger:
    budget: PrivacyBudget | None
    lines: list[LedgerLine]
    epsilon_spent: Decimal
    delta_spent: Decimal
    #: None while no budget is set (nothing may be spent then).
    epsilon_remaining: Decimal | None
    delta_remaining: Decimal | None
    dp_releases: int
    row_level_releases: int


# --- Amounts ------------------------------------------------------------------------------


def _decimal(value: Any, what: str) -> Decimal:
    try:
        number = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise InvalidInput(f"{what} must be a number, not {value!r}.") from None
    if not number.is_finite():
        raise InvalidInput(f"{what} must be a finite number.")
    return number


def _epsilon(value: Any, rounding: str) -> Decimal:
    return _decimal(value, "ε").quantize(Decimal(1).scaleb(-EPSILON_PLACES), rounding=rounding)


def _delta(value: Any, rounding: str) -> Decimal:
    return _decimal(value, "δ").quantize(Decimal(1).scaleb(-DELTA_PLACES), rounding=rounding)


def _spent(dataset: Dataset) -> tuple[Decimal, Decimal]:
    totals = BudgetEntry.objects.filter(dataset=dataset, kind=Kind.DP_SPEND).aggregate(
        epsilon=Sum("epsilon"), delta=Sum("delta")
    )
    return totals["epsilon"] or ZERO, totals["delta"] or ZERO


def show(value: Decimal | None) -> str:
    """A ledger amount as people write it: 0.3, not 0.300000000000."""
    if value is None:
        return "—"
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


# --- Reads ----------------------------------------------------------------------------------


def budget_of(dataset: Dataset) -> PrivacyBudget | None:
    return PrivacyBudget.objects.filter(dataset=dataset).select_related("set_by").first()


def remaining(dataset: Dataset) -> Remaining | None:
    """What the dataset's DP releases may still spend; None while no budget is set."""
    budget = budget_of(dataset)
    if budget is None:
        return None
    epsilon, delta = _spent(dataset)
    return Remaining(budget.epsilon_total - epsilon, budget.delta_total - delta)


def ledger_for(dataset: Dataset) -> Ledger:
    """The dataset's ledger, oldest first, with totals; for the dataset and request pages.

    Access is the page's concern (the dataset's owner and privacy officers see it)."""
    budget = budget_of(dataset)
    entries = list(
        BudgetEntry.objects.filter(dataset=dataset).select_related("actor", "release_request")
    )
    lines = []
    total: Decimal | None = None
    spent = delta_spent = ZERO
    for entry in entries:
        if entry.kind == Kind.BUDGET_SET:
            total = entry.epsilon
        elif entry.kind == Kind.DP_SPEND:  # a spend has its ε and δ
            spent += cast(Decimal, entry.epsilon)
            delta_spent += cast(Decimal, entry.delta)
        lines.append(LedgerLine(entry, total, spent, None if total is None else total - spent))
    return Ledger(
        budget=budget,
        lines=lines,
        epsilon_spent=spent,
        delta_spent=delta_spent,
        epsilon_remaining=None if budget is None else budget.epsilon_total - spent,
        delta_remaining=None if budget is None else budget.delta_total - delta_spent,
        dp_releases=sum(e.kind == Kind.DP_SPEND for e in entries),
        row_level_releases=sum(e.kind == Kind.ROW_LEVEL for e in entries),
    )


# --- Changes --------------------------------------------------------------------------------


def apply_project_default(dataset: Dataset) -> PrivacyBudget | None:
    """A new dataset's budget from its project's default total ε (δ 0), if the project has one;
    a privacy officer may change it later like any budget. Call inside the upload's
    transaction."""
    epsilon = dataset.project.epsilon_total
    if epsilon is None:
        return None
    epsilon = _epsilon(epsilon, ROUND_FLOOR)
    budget = PrivacyBudget.objects.create(
        dataset=dataset, epsilon_total=epsilon, delta_total=ZERO, set_at=timezone.now()
    )
    BudgetEntry.objects.create(
        dataset=dataset,
        dataset_name=dataset.name,
        kind=Kind.BUDGET_SET,
        epsilon=epsilon,
        delta=ZERO,
        epsilon_remaining=epsilon,
        delta_remaining=ZERO,
        detail={"previous": None, "project_default": dataset.project.slug},
    )
    audit.record(
        AuditEvent.Action.BUDGET_SET,
        None,
        dataset=dataset,
        epsilon=show(epsilon),
        delta=show(ZERO),
        previous=None,
        project_default=dataset.project.slug,
    )
    return budget


def set_budget(officer, dataset: Dataset, epsilon: Any, delta: Any = 0) -> PrivacyBudget:
    """Set (or change) a dataset's total ε and δ; never below what was already spent."""
    roles.require_in(officer, roles.OFFICER, dataset.project_id, "set its privacy budgets")
    if dataset.owner_id == officer.pk:
        raise PermissionDenied(
            "You own this dataset: another privacy officer sets its privacy budget."
        )
    epsilon = _epsilon(epsilon, ROUND_FLOOR)
    delta = _delta(delta, ROUND_FLOOR)
    if not ZERO <= epsilon <= MAX_EPSILON_TOTAL:
        raise InvalidInput(f"The total ε must be between 0 and {MAX_EPSILON_TOTAL}.")
    if not ZERO <= delta < 1:
        raise InvalidInput("δ is a probability: at least 0 and below 1.")
    try:
        with transaction.atomic():
            budget = PrivacyBudget.objects.select_for_update().filter(dataset=dataset).first()
            spent_epsilon, spent_delta = _spent(dataset)
            if epsilon < spent_epsilon or delta < spent_delta:
                raise InvalidInput(
                    f"Releases of {dataset.name} have already spent ε {show(spent_epsilon)} "
                    f"and δ {show(spent_delta)}; the budget cannot be set below that."
                )
            previous = None
            if budget is None:
                budget = PrivacyBudget(dataset=dataset)
            else:
                previous = {
                    "epsilon": show(budget.epsilon_total),
                    "delta": show(budget.delta_total),
                }
            budget.epsilon_total = epsilon
            budget.delta_total = delta
            budget.set_by = officer
            budget.set_at = timezone.now()
            budget.save()
            BudgetEntry.objects.create(
                dataset=dataset,
                dataset_name=dataset.name,
                kind=Kind.BUDGET_SET,
                epsilon=epsilon,
                delta=delta,
                epsilon_remaining=epsilon - spent_epsilon,
                delta_remaining=delta - spent_delta,
                actor=officer,
                detail={"previous": previous},
            )
            audit.record(
                AuditEvent.Action.BUDGET_SET,
                officer,
                dataset=dataset,
                epsilon=show(epsilon),
                delta=show(delta),
                previous=previous,
            )
    except IntegrityError:
        # Another officer created the budget at the same moment.
        raise InvalidInput(
            "The budget was set by someone else at the same moment; reload and try again."
        ) from None
    return budget


def spend(
    dataset: Dataset,
    epsilon: Any,
    delta: Any,
    actor,
    detail: dict | None = None,
    *,
    statistics_release_id: int | None = None,
    release_request: ReleaseRequest | None = None,
) -> BudgetEntry:
    """Record a DP release's spend if it fits what remains; refuse it otherwise.

    ``actor``: the steward who requested the release (the worker spends on their behalf).
    ``detail``: what spent it, e.g. ``{"queries": [...]}`` (kind, description, ε each).
    ``release_request``: the statistics release spending (its id is also kept as
    ``statistics_release_id``).
    """
    if release_request is not None:
        statistics_release_id = release_request.pk
    if (
        actor is None
        or not roles.has_role(actor, roles.STEWARD, dataset.project_id)
        or dataset.owner_id != actor.pk
    ):
        raise PermissionDenied("Only the dataset's steward can spend its privacy budget.")
    epsilon = _epsilon(epsilon, ROUND_CEILING)
    delta = _delta(delta, ROUND_CEILING)
    if epsilon <= ZERO or delta < ZERO:
        raise InvalidInput("A release spends an ε above 0 and a δ of at least 0.")
    with transaction.atomic():
        # The lock serialises spends on this dataset: the sum read below cannot change
        # before this transaction's entry is written and committed.
        budget = PrivacyBudget.objects.select_for_update().filter(dataset=dataset).first()
        if budget is None:
            raise InvalidInput(
                f"No privacy budget is set for {dataset.name}; a privacy officer sets one "
                "before any statistics release."
            )
        spent_epsilon, spent_delta = _spent(dataset)
        left_epsilon = budget.epsilon_total - spent_epsilon
        left_delta = budget.delta_total - spent_delta
        if epsilon > left_epsilon or delta > left_delta:
            needs = f"ε {show(epsilon)}" + (f" and δ {show(delta)}" if delta else "")
            raise InvalidInput(
                f"This release needs {needs}, but only ε {show(left_epsilon)}"
                + (f" and δ {show(left_delta)}" if delta else "")
                + f" of the privacy budget of {dataset.name} remains "
                f"(ε {show(budget.epsilon_total)} in total)."
            )
        entry = BudgetEntry.objects.create(
            dataset=dataset,
            dataset_name=dataset.name,
            kind=Kind.DP_SPEND,
            epsilon=epsilon,
            delta=delta,
            epsilon_remaining=left_epsilon - epsilon,
            delta_remaining=left_delta - delta,
            actor=actor,
            statistics_release_id=statistics_release_id,
            release_request=release_request,
            detail=detail or {},
        )
        audit.record(
            AuditEvent.Action.BUDGET_SPEND,
            actor,
            dataset=dataset,
            request=release_request,
            epsilon=show(epsilon),
            delta=show(delta),
            remaining=show(left_epsilon - epsilon),
            statistics_release_id=statistics_release_id,
        )
    return entry


def spend_of_round(release_request: ReleaseRequest, round_number: int) -> BudgetEntry | None:
    """The spend a statistics release's round made, if it made one (a round spends once)."""
    return (
        BudgetEntry.objects.filter(
            kind=Kind.DP_SPEND,
            statistics_release_id=release_request.pk,
            detail__round=round_number,
        )
        .order_by("id")
        .first()
    )


def record_row_level_release(
    dataset: Dataset,
    actor,
    *,
    release_request: ReleaseRequest | None = None,
    detail: dict | None = None,
) -> BudgetEntry:
    """Note in the ledger a row-level extract of the dataset, outside the DP budget (ε null).

    Called by the service that releases the extract, after its own permission check; once
    per request (a second call returns the first entry).
    """
    with transaction.atomic():
        if release_request is not None:
            existing = BudgetEntry.objects.filter(
                release_request=release_request, kind=Kind.ROW_LEVEL
            ).first()
            if existing is not None:
                return existing
        return BudgetEntry.objects.create(
            dataset=dataset,
            dataset_name=dataset.name,
            kind=Kind.ROW_LEVEL,
            actor=actor,
            release_request=release_request,
            detail=detail or {},
        )
