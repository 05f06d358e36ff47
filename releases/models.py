"""Data the release workflow keeps: datasets, their column tags, release requests, results.

Models hold data and small invariants; the workflow itself lives in ``releases.services``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    """A column's role in a release."""

    IDENTIFIER = "identifier", "Direct identifier (dropped)"
    QUASI_IDENTIFIER = "quasi", "Quasi-identifier (generalized)"
    SENSITIVE = "sensitive", "Sensitive"
    INSENSITIVE = "insensitive", "Insensitive (kept as is)"


class Dataset(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="datasets")
    name = models.CharField(max_length=255)
    original_filename = models.CharField(max_length=255)
    # Relative to MEDIA_ROOT; never exposed through a URL.
    file_path = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    encoding = models.CharField(max_length=32)
    delimiter = models.CharField(max_length=4)
    row_count = models.PositiveIntegerField()
    preview = models.JSONField(default=list, help_text="The first rows, as lists of strings.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def delimiter_name(self) -> str:
        return {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}.get(self.delimiter, "")


class DatasetColumn(models.Model):
    class HierarchySource(models.TextChoices):
        AUTOMATIC = "auto", "Automatic"
        UPLOADED = "uploaded", "Uploaded (ARX format)"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="columns")
    position = models.PositiveIntegerField()
    name = models.CharField(max_length=255)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.INSENSITIVE)
    hierarchy_source = models.CharField(
        max_length=16, choices=HierarchySource.choices, default=HierarchySource.AUTOMATIC
    )
    hierarchy_filename = models.CharField(max_length=255, blank=True)
    # The uploaded hierarchy in ARX format (validated against the column on upload).
    hierarchy_text = models.TextField(blank=True)
    hierarchy_height = models.PositiveSmallIntegerField(null=True, blank=True)
    distinct_values = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "position"], name="unique_column_position"),
        ]

    def __str__(self) -> str:
        return self.name


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


class AuditEvent(models.Model):
    """An append-only record of who did what, and when."""

    class Action(models.TextChoices):
        UPLOAD = "upload", "Uploaded dataset"
        UPLOAD_REJECTED = "upload_rejected", "Upload rejected"
        TAGGING = "tagging", "Changed tagging"
        REQUEST = "request", "Requested release"
        RUN_START = "run_start", "Run started"
        RUN_END = "run_end", "Run finished"
        RUN_FAILED = "run_failed", "Run failed"
        APPROVE = "approve", "Approved"
        REJECT = "reject", "Rejected"
        DOWNLOAD = "download", "Downloaded extract"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True
    )
    action = models.CharField(max_length=32, choices=Action.choices)
    dataset = models.ForeignKey(
        Dataset, on_delete=models.PROTECT, null=True, blank=True, related_name="events"
    )
    request = models.ForeignKey(
        ReleaseRequest, on_delete=models.PROTECT, null=True, blank=True, related_name="events"
    )
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ValueError("Audit events are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("Audit events are append-only.")

    @property
    def actor_name(self) -> str:
        return self.actor.get_username() if self.actor else "worker"
