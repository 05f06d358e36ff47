"""The privacy budget and its ledger: who sets it, what spends it, and what it refuses.

Concurrent spending on PostgreSQL is in tests/test_budget_concurrency.py.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from releases.core.errors import InvalidInput
from releases.datasets import budget
from releases.datasets import services as dataset_service
from releases.engine import dp as D
from releases.models import AuditEvent, BudgetEntry, Dataset, PrivacyBudget, ReleaseRequest
from tests.support import members

Kind = BudgetEntry.Kind


@pytest.fixture
def dataset(steward):
    return Dataset.objects.create(
        owner=steward,
        project=members.default_project(),
        name="people",
        original_filename="people.csv",
        file_path="",
        sha256="0" * 64,
        size_bytes=1,
        status=Dataset.Status.READY,
    )


@pytest.fixture
def funded(dataset, officer):
    budget.set_budget(officer, dataset, "1.0", "0")
    return dataset


def entries(dataset, kind=None):
    found = BudgetEntry.objects.filter(dataset=dataset)
    return list(found.filter(kind=kind) if kind else found)


# --- Setting the budget --------------------------------------------------------------------


def test_an_officer_sets_the_budget_with_a_ledger_line_and_an_audit_event(dataset, officer):
    result = budget.set_budget(officer, dataset, 2.5, "1e-6")
    assert (result.epsilon_total, result.delta_total) == (Decimal("2.5"), Decimal("0.000001"))
    assert result.set_by == officer
    [line] = entries(dataset)
    assert (line.kind, line.epsilon, line.epsilon_remaining) == (
        Kind.BUDGET_SET,
        Decimal("2.5"),
        Decimal("2.5"),
    )
    event = AuditEvent.objects.get(action=AuditEvent.Action.BUDGET_SET)
    assert (event.actor, event.dataset, event.detail["epsilon"]) == (officer, dataset, "2.5")
    assert budget.remaining(dataset) == budget.Remaining(Decimal("2.5"), Decimal("0.000001"))


def test_only_an_officer_who_does_not_own_the_dataset_sets_its_budget(
    dataset, steward, recipient, steward_officer
):
    for user in (steward, recipient):
        with pytest.raises(PermissionDenied, match="privacy officers"):
            budget.set_budget(user, dataset, 1)
    own = Dataset.objects.create(
        owner=steward_officer,
        project=dataset.project,
        name="mine",
        original_filename="m.csv",
        sha256="",
        size_bytes=1,
    )
    with pytest.raises(PermissionDenied, match="another privacy officer"):
        budget.set_budget(steward_officer, own, 1)
    assert not PrivacyBudget.objects.exists()
    assert not BudgetEntry.objects.exists()


@pytest.mark.parametrize(
    ("epsilon", "delta", "message"),
    [
        ("abc", 0, "ε must be a number"),
        ("nan", 0, "finite"),
        (-1, 0, "between 0 and"),
        (1, 1, "δ is a probability"),
        (1, -0.1, "δ is a probability"),
        (1, "x", "δ must be a number"),
    ],
)
def test_a_budget_must_be_sensible(dataset, officer, epsilon, delta, message):
    with pytest.raises(InvalidInput, match=message):
        budget.set_budget(officer, dataset, epsilon, delta)
    assert budget.remaining(dataset) is None


def test_the_budget_can_rise_but_never_below_what_was_spent(funded, officer, steward):
    budget.spend(funded, "0.7", 0, steward)
    with pytest.raises(InvalidInput, match=r"already spent ε 0\.7"):
        budget.set_budget(officer, funded, "0.5")
    assert budget.remaining(funded).epsilon == Decimal("0.3")
    budget.set_budget(officer, funded, "0.7")  # down to exactly what was spent
    assert budget.remaining(funded).epsilon == 0
    budget.set_budget(officer, funded, "3")
    assert budget.remaining(funded).epsilon == Decimal("2.3")
    changes = entries(funded, Kind.BUDGET_SET)
    assert [c.epsilon for c in changes] == [Decimal(1), Decimal("0.7"), Decimal(3)]
    assert changes[-1].detail["previous"] == {"epsilon": "0.7", "delta": "0"}


# --- Spending ------------------------------------------------------------------------------


def test_a_spend_that_fits_is_recorded_with_what_remains(funded, steward):
    entry = budget.spend(funded, 0.4, 0, steward, {"queries": ["count"]}, statistics_release_id=7)
    assert (entry.kind, entry.epsilon, entry.epsilon_remaining) == (
        Kind.DP_SPEND,
        Decimal("0.4"),
        Decimal("0.6"),
    )
    assert (entry.actor, entry.statistics_release_id, entry.detail) == (
        steward,
        7,
        {"queries": ["count"]},
    )
    assert budget.remaining(funded).epsilon == Decimal("0.6")
    event = AuditEvent.objects.get(action=AuditEvent.Action.BUDGET_SPEND)
    assert (event.actor, event.detail["epsilon"], event.detail["remaining"]) == (
        steward,
        "0.4",
        "0.6",
    )


def test_a_spend_that_does_not_fit_is_refused_naming_what_remains(funded, steward):
    budget.spend(funded, "0.7", 0, steward)
    with pytest.raises(InvalidInput) as refused:
        budget.spend(funded, "0.5", 0, steward)
    assert "needs ε 0.5" in str(refused.value)
    assert "only ε 0.3" in str(refused.value)
    assert "ε 1 in total" in str(refused.value)
    # Nothing was written: the ledger and the audit log hold the first spend only.
    assert len(entries(funded, Kind.DP_SPEND)) == 1
    assert AuditEvent.objects.filter(action=AuditEvent.Action.BUDGET_SPEND).count() == 1
    assert budget.remaining(funded).epsilon == Decimal("0.3")


def test_spends_add_up_exactly(funded, steward):
    # Ten spends of 0.1 fit a budget of 1 exactly (in floats they would sum to 0.9999999999999999
    # and an eleventh 1e-16 could squeeze in).
    for _ in range(10):
        budget.spend(funded, 0.1, 0, steward)
    assert budget.remaining(funded).epsilon == 0
    with pytest.raises(InvalidInput, match="only ε 0 of"):
        budget.spend(funded, "1e-15", 0, steward)  # rounded up to 1e-12, the smallest spend


def test_a_spend_needs_a_budget_and_a_positive_epsilon(dataset, funded, steward):
    other = Dataset.objects.create(
        owner=steward,
        project=dataset.project,
        name="unfunded",
        original_filename="u.csv",
        sha256="",
        size_bytes=1,
    )
    with pytest.raises(InvalidInput, match="No privacy budget is set for unfunded"):
        budget.spend(other, 0.1, 0, steward)
    with pytest.raises(InvalidInput, match="above 0"):
        budget.spend(funded, 0, 0, steward)
    with pytest.raises(InvalidInput, match="ε must be a number"):
        budget.spend(funded, "lots", 0, steward)


def test_delta_is_budgeted_too(dataset, officer, steward):
    budget.set_budget(officer, dataset, 5, "1e-6")
    budget.spend(dataset, 1, "6e-7", steward)
    with pytest.raises(InvalidInput, match=r"δ 0\.0000004 "):
        budget.spend(dataset, 1, "6e-7", steward)
    assert budget.remaining(dataset) == budget.Remaining(Decimal(4), Decimal("4e-7"))


def test_only_the_datasets_steward_spends_its_budget(funded, other_steward, officer, recipient):
    for user in (other_steward, officer, recipient, None):
        with pytest.raises(PermissionDenied, match="dataset's steward"):
            budget.spend(funded, 0.1, 0, user)
    assert not entries(funded, Kind.DP_SPEND)


def test_a_release_spends_what_the_engine_says_it_costs(funded, steward):
    queries = [D.Count(epsilon=0.25), D.Sum(column="x", lower=0, upper=1, epsilon=0.35)]
    plans = D.preview(queries)  # the preview spends nothing
    assert budget.remaining(funded).epsilon == 1
    entry = budget.spend(
        funded,
        D.requested_epsilon(queries),
        D.requested_delta(queries),
        steward,
        {"queries": [p.description for p in plans]},
    )
    assert entry.epsilon == Decimal("0.6")
    assert entry.detail["queries"] == ["Number of rows", "Sum of x (values clamped to [0, 1])"]


# --- The ledger -------------------------------------------------------------------------------


def test_ledger_entries_are_append_only(funded, steward):
    entry = budget.spend(funded, 0.2, 0, steward)
    entry.epsilon = Decimal(0)
    with pytest.raises(ValueError, match="append-only"):
        entry.save()
    with pytest.raises(ValueError, match="append-only"):
        entry.delete()
    assert BudgetEntry.objects.get(pk=entry.pk).epsilon == Decimal("0.2")


def test_the_database_refuses_a_spend_without_an_amount(funded, steward):
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetEntry.objects.create(dataset=funded, dataset_name="x", kind=Kind.DP_SPEND)
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetEntry.objects.create(
            dataset=funded, dataset_name="x", kind=Kind.ROW_LEVEL, epsilon=Decimal(1)
        )


def test_a_row_level_extract_is_recorded_outside_the_budget(funded, steward, officer):
    request = ReleaseRequest.objects.create(
        dataset=funded,
        requested_by=steward,
        parameters={"model": {"criteria": [{"model": "k-anonymity", "k": 5}]}},
        config={},
    )
    entry = budget.record_row_level_release(
        funded, officer, release_request=request, detail={"model": "5-anonymity"}
    )
    assert (entry.kind, entry.epsilon, entry.outside_budget) == (Kind.ROW_LEVEL, None, True)
    assert budget.record_row_level_release(funded, officer, release_request=request) == entry
    assert budget.remaining(funded).epsilon == 1  # it spends nothing from the DP budget


def test_ledger_for_gives_each_line_and_the_totals(funded, officer, steward):
    budget.spend(funded, "0.25", 0, steward)
    budget.record_row_level_release(funded, officer)
    budget.set_budget(officer, funded, 2)
    budget.spend(funded, "0.5", 0, steward)
    ledger = budget.ledger_for(funded)
    assert [line.entry.kind for line in ledger.lines] == [
        Kind.BUDGET_SET,
        Kind.DP_SPEND,
        Kind.ROW_LEVEL,
        Kind.BUDGET_SET,
        Kind.DP_SPEND,
    ]
    assert [budget.show(line.epsilon_remaining) for line in ledger.lines] == [
        "1",
        "0.75",
        "0.75",
        "1.75",
        "1.25",
    ]
    assert [line.entry.actor_name for line in ledger.lines] == [
        "officer",
        "steward",
        "officer",
        "officer",
        "steward",
    ]
    assert (ledger.epsilon_spent, ledger.epsilon_remaining) == (Decimal("0.75"), Decimal("1.25"))
    assert (ledger.dp_releases, ledger.row_level_releases) == (2, 1)
    assert ledger.budget.epsilon_total == 2


def test_ledger_for_a_dataset_without_budget(dataset):
    ledger = budget.ledger_for(dataset)
    assert (ledger.budget, ledger.lines, ledger.epsilon_remaining) == (None, [], None)


def test_the_ledger_outlives_its_dataset(funded, steward):
    """A dataset nothing was spent on can go; its ledger lines stay, naming it."""
    dataset_service.delete_dataset(steward, funded)
    kept = list(BudgetEntry.objects.order_by("id"))
    assert [(e.kind, e.dataset_id, e.dataset_name) for e in kept] == [
        (Kind.BUDGET_SET, None, "people"),
    ]
    assert not PrivacyBudget.objects.exists()


def test_a_dataset_whose_budget_was_spent_cannot_be_deleted(funded, steward):
    """A new upload would start from a fresh budget: once spent, the dataset stays."""
    budget.spend(funded, 0.5, 0, steward)
    with pytest.raises(InvalidInput, match=r"privacy budget.*cannot be deleted"):
        dataset_service.delete_dataset(steward, funded)
    assert Dataset.objects.filter(pk=funded.pk).exists()
    assert len(entries(funded, Kind.DP_SPEND)) == 1
