"""A differentially private extract (SafePub) spends ε and δ from its dataset's privacy budget,
the same ledger statistics releases spend from: refused while it does not fit, spent once when
its run starts, and checked on the written extract (every class holds k rows)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from releases.core.errors import InvalidInput
from releases.datasets import budget
from releases.engine import PrivacyModel
from releases.engine.criteria.safepub import SafePub, parameters
from releases.models import BudgetEntry, ReleaseRequest, Role
from releases.requests import checks
from releases.requests import run as release_run
from releases.requests import services as release
from releases.requests.forms import ModelForm
from releases.requests.parameters import ReleaseParameters
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import form_data, tag
from tests.test_services import extract_frame


def safepub(epsilon: float = 1.0, seed: int = 3) -> ReleaseParameters:
    model = PrivacyModel(
        criteria=[SafePub(epsilon=epsilon, delta=1e-5, steps=4, seed=seed)], suppression_limit=1.0
    )
    return ReleaseParameters(model=model)


@pytest.fixture
def dataset(steward):
    dataset = make_dataset(steward, synthetic_csv(rows=1500), "people.csv")
    tag(steward, dataset, {"name": Role.IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    return dataset


def test_the_run_spends_epsilon_once_and_a_second_request_over_budget_is_refused(
    dataset, steward, officer
):
    budget.set_budget(officer, dataset, "1.5", "0.0001")
    release_request = release.request_release(steward, dataset, safepub(1.0))
    assert budget.remaining(dataset).epsilon == Decimal("1.5")  # nothing spent on request

    release_run.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == ReleaseRequest.State.READY, release_request.error
    left = budget.remaining(dataset)
    assert (left.epsilon, left.delta) == (Decimal("0.5"), Decimal("0.0001") - Decimal("0.00001"))
    spends = BudgetEntry.objects.filter(dataset=dataset, kind=BudgetEntry.Kind.DP_SPEND)
    assert [(e.epsilon, e.release_request_id) for e in spends] == [
        (Decimal("1"), release_request.pk)
    ]

    # The written extract: every class of the released quasi-identifier holds k rows.
    k = release_request.summary["safepub"]["k"]
    assert k == SafePub(epsilon=1, delta=1e-5).k == parameters(0.9 - 1e-16, 1e-5)[0]
    extract = extract_frame(release_request)
    assert "name" not in extract.columns
    assert extract.groupby("sex").size().min() >= k
    assert (
        len(extract)
        == release_request.summary["safepub"]["sampled_rows"]
        - (release_request.summary["suppressed"])
    )

    # The review's checks: as requested, SafePub's line (k, ε, δ, the rows sampled), the limit.
    lines = {c.name: c for c in checks.checks(release_request)}
    assert all(c.passed for c in lines.values()), [c for c in lines.values() if not c.passed]
    dp_line = lines["differential privacy (SafePub)"].detail
    assert f"k={k}" in dp_line and "ε=1" in dp_line and "rows sampled" in dp_line

    # Delivered a second time, the round does not spend again.
    assert release_run.dp_budget.spend(release_request, safepub(1.0).model) == spends.get()
    assert budget.remaining(dataset).epsilon == Decimal("0.5")

    with pytest.raises(InvalidInput, match=r"only ε 0\.5"):
        release.request_release(steward, dataset, safepub(1.0, seed=4))
    assert ReleaseRequest.objects.count() == 1
    release.request_release(steward, dataset, safepub(0.5, seed=5))  # what remains still fits


def test_without_a_budget_a_differentially_private_extract_is_refused(dataset, steward):
    with pytest.raises(InvalidInput, match="No privacy budget is set"):
        release.request_release(steward, dataset, safepub())
    assert ReleaseRequest.objects.count() == 0


def test_the_request_form_asks_for_safepub_from_the_registry(db):
    data = form_data(safepub(1.0, seed=9))
    assert data["use__safepub"] == "on" and data["safepub__epsilon"] == "1.0"
    form = ModelForm(data=data)
    assert form.is_valid(), form.errors
    (criterion,) = form.parameters().model.criteria
    assert criterion == SafePub(epsilon=1, delta=1e-5, steps=4, seed=9)

    bad = ModelForm(data={**data, "safepub__search_budget": "1.5"})
    assert not bad.is_valid()
    assert "must be below ε=1" in str(bad.errors)


def test_the_request_form_says_why_it_cannot_derive_k(db):
    data = {**form_data(safepub(1.0)), "safepub__epsilon": "5", "safepub__delta": "0.000001"}
    data.pop("safepub__steps", None)
    form = ModelForm(data=data)
    assert not form.is_valid()
    message = str(form.errors["safepub__epsilon"])
    assert "δ must be at least" in message and "less the search budget: 5 - 0.1" in message
    assert ModelForm(data={**data, "safepub__delta": "0.1"}).is_valid()
