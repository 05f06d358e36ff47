"""Release requests and the equivalence classes of their extracts."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .datasets import Dataset


class ReleaseRequest(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        READY = "ready", "Ready for review"
        FAILED = "failed", "Failed"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    #: States in which nothing will change any more without a person acting.
    FINAL_STATES = frozenset({State.READY, State.FAILED, State.APPROVED, State.REJECTED})

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="release_requests"
    )
    k = models.PositiveIntegerField()
    suppression_limit = models.FloatField(help_text="Share of rows (0 to 1) that may be removed.")
    # The column roles and hierarchies as they were when the request was made.
    config = models.JSONField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    progress = models.FloatField(default=0.0)
    stage = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    extract_path = models.CharField(max_length=500, blank=True)
    extract_sha256 = models.CharField(max_length=64, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="decisions",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Release request #{self.pk} of {self.dataset}"

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("releases:request_detail", args=[self.pk])

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    @property
    def suppression_percent(self) -> float:
        return self.suppression_limit * 100

    @property
    def progress_percent(self) -> int:
        return round(self.progress * 100)


class EquivalenceClass(models.Model):
    """One equivalence class of an extract: its quasi-identifier values and size."""

    request = models.ForeignKey(ReleaseRequest, on_delete=models.CASCADE, related_name="classes")
    values = models.JSONField()
    size = models.PositiveIntegerField()

    class Meta:
        ordering = ["size", "id"]
        indexes = [models.Index(fields=["request", "size"])]

    def __str__(self) -> str:
        return f"{self.size} rows: {self.values}"
