"""A dataset's differential privacy budget and the append-only ledger of what spent it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from .datasets import Dataset
from .requests import ReleaseRequest

#: ε is kept to 12 decimal places: spends are rounded up to it, budgets down, so rounding
#: can never let a release through that the exact numbers would refuse.
EPSILON_PLACES = 12
#: δ is a small probability (1e-6 to 1e-12 in practice): 20 decimal places.
DELTA_PLACES = 20
EPSILON_FIELD: dict[str, Any] = {"max_digits": EPSILON_PLACES + 6, "decimal_places": EPSILON_PLACES}
DELTA_FIELD: dict[str, Any] = {"max_digits": DELTA_PLACES + 1, "decimal_places": DELTA_PLACES}


class PrivacyBudget(models.Model):
    """The total ε and δ that differentially private releases of a dataset may spend.

    Set by a privacy officer (``datasets.budget.set_budget``); what was spent lives in the
    ledger (:class:`BudgetEntry`), never here. Spending locks this row.
    """

    dataset = models.OneToOneField(Dataset, on_delete=models.CASCADE, related_name="privacy_budget")
    epsilon_total = models.DecimalField(**EPSILON_FIELD)
    delta_total = models.DecimalField(**DELTA_FIELD, default=Decimal(0))
    #: None: set from the project's default ε when the dataset was uploaded.
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True, blank=True
    )
    set_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(epsilon_total__gte=0), name="budget_epsilon_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(delta_total__gte=0) & Q(delta_total__lt=1),
                name="budget_delta_a_probability",
            ),
        ]

    def __str__(self) -> str:
        return f"ε {self.epsilon_total.normalize()}, δ {self.delta_total.normalize()}"


class BudgetEntry(models.Model):
    """One line of a dataset's privacy ledger: a budget set, a DP release's spend, or a
    row-level extract released outside the DP budget. Append-only, like the audit log."""

    class Kind(models.TextChoices):
        BUDGET_SET = "budget_set", "Budget set"
        DP_SPEND = "dp_spend", "Differentially private release"
        ROW_LEVEL = "row_level_release", "Row-level extract (outside the DP budget)"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # SET_NULL: the ledger of a deleted dataset stays readable; dataset_name keeps its name.
    dataset = models.ForeignKey(
        Dataset, on_delete=models.SET_NULL, null=True, blank=True, related_name="budget_entries"
    )
    dataset_name = models.CharField(max_length=255)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    #: A spend's ε and δ; a budget_set entry's new totals; null for a row-level extract.
    epsilon = models.DecimalField(**EPSILON_FIELD, null=True, blank=True)
    delta = models.DecimalField(**DELTA_FIELD, null=True, blank=True)
    #: What remained once this entry was written (spends and budget changes, under the lock).
    epsilon_remaining = models.DecimalField(**EPSILON_FIELD, null=True, blank=True)
    delta_remaining = models.DecimalField(**DELTA_FIELD, null=True, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    #: The statistics release that spent it (the request's id, kept should the link be cut).
    statistics_release_id = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    #: The request an entry records: the statistics release that spent, or the row-level
    #: extract released outside the DP budget.
    release_request = models.ForeignKey(
        ReleaseRequest,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="budget_entries",
    )
    #: The queries (kind, description, ε each) of a spend, or what a row-level release was.
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "budget entries"
        constraints = [
            models.CheckConstraint(
                condition=~Q(kind="row_level_release") | Q(epsilon__isnull=True),
                name="budget_entry_row_level_outside_dp",
            ),
            models.CheckConstraint(
                condition=Q(kind="row_level_release")
                | Q(epsilon__isnull=False, epsilon__gte=0, delta__isnull=False, delta__gte=0),
                name="budget_entry_amounts_given",
            ),
        ]

    def __str__(self) -> str:
        amount = f" ε {self.epsilon.normalize()}" if self.epsilon is not None else ""
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.kind}{amount}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ValueError("Privacy ledger entries are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("Privacy ledger entries are append-only.")

    @property
    def actor_name(self) -> str:
        return self.actor.get_username() if self.actor else "worker"

    @property
    def outside_budget(self) -> bool:
        return self.kind == self.Kind.ROW_LEVEL
