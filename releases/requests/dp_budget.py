"""What a differentially private extract (SafePub) spends from its dataset's privacy budget.

The same ledger as statistics releases (:mod:`releases.datasets.budget`), so extracts and
statistics share one budget, and the same order: the request is refused while its ε or δ does
not fit what remains; the run spends first and commits, before the sample is drawn, and a
round spends once (a task delivered twice does not spend twice; a resubmission spends again).
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal

from releases.core.errors import InvalidInput
from releases.datasets import budget
from releases.engine import PrivacyModel
from releases.models import BudgetEntry, Dataset, ReleaseRequest
from releases.models.privacy_budget import DELTA_PLACES, EPSILON_PLACES

__all__ = ["amount", "check_fits", "spend"]

#: The privacy model that spends from the budget.
SAFEPUB = "safepub"


def amount(model: PrivacyModel) -> tuple[Decimal, Decimal] | None:
    """The (ε, δ) the model spends, as the ledger rounds a spend (up); None when it spends none."""
    criterion = next((c for c in model.criteria if c.name == SAFEPUB), None)
    if criterion is None:
        return None
    values = criterion.values
    epsilon = Decimal(repr(float(values["epsilon"])))
    delta = Decimal(repr(float(values["delta"])))
    return (
        epsilon.quantize(Decimal(1).scaleb(-EPSILON_PLACES), rounding=ROUND_CEILING),
        delta.quantize(Decimal(1).scaleb(-DELTA_PLACES), rounding=ROUND_CEILING),
    )


def check_fits(dataset: Dataset, model: PrivacyModel) -> None:
    """Refuse, with what remains, a request whose ε or δ exceeds what the budget has left."""
    needed = amount(model)
    if needed is None:
        return
    epsilon, delta = needed
    left = budget.remaining(dataset)
    if left is None:
        raise InvalidInput(
            f"No privacy budget is set for {dataset.name}; a privacy officer sets one before "
            "any differentially private release."
        )
    if epsilon > left.epsilon or delta > left.delta:
        raise InvalidInput(
            f"This extract needs ε {budget.show(epsilon)} and δ {budget.show(delta)}, but only "
            f"ε {budget.show(left.epsilon)} and δ {budget.show(left.delta)} of the privacy "
            f"budget of {dataset.name} remains. Lower ε or δ, or ask a privacy officer."
        )


def spend(release_request: ReleaseRequest, model: PrivacyModel) -> BudgetEntry | None:
    """The round's spend: made now (it commits before the sample is drawn), or the one this
    round already made; None when the model spends nothing."""
    needed = amount(model)
    if needed is None:
        return None
    earlier = budget.spend_of_round(release_request, release_request.round)
    if earlier is not None:
        return earlier
    return budget.spend(
        release_request.dataset,
        needed[0],
        needed[1],
        release_request.requested_by,
        {
            "round": release_request.round,
            "request": release_request.pk,
            "model": model.describe_criteria(),
        },
        release_request=release_request,
    )
