"""The release package: the files reviewers approve, recipients' acceptance of the terms, and
re-runs that check a release is reproducible."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .requests import ReleaseRequest


class ReleaseFile(models.Model):
    """One downloadable file of a round (an extract's, or a statistics release's tables),
    written by the worker before review."""

    class Format(models.TextChoices):
        CSV = "csv", "CSV"
        XLSX = "xlsx", "Excel (.xlsx)"
        PARQUET = "parquet", "Parquet"
        #: A statistics release's tables and methods, beside its CSV.
        JSON = "json", "JSON"

    #: The order the page lists them in (and an extract's formats, written in this order).
    ORDER = (Format.CSV, Format.XLSX, Format.PARQUET)
    #: Every format a round's files may have: a statistics release's are CSV and JSON.
    LISTED = (*ORDER, Format.JSON)
    CONTENT_TYPES: dict[str, str] = {
        Format.JSON: "application/json; charset=utf-8",
        Format.CSV: "text/csv; charset=utf-8",
        Format.XLSX: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        Format.PARQUET: "application/vnd.apache.parquet",
    }

    request = models.ForeignKey(ReleaseRequest, on_delete=models.CASCADE, related_name="files")
    round = models.PositiveIntegerField()
    format = models.CharField(max_length=8, choices=Format.choices)
    # Relative to the private storage; never exposed through a URL.
    path = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["round", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "round", "format"], name="one_file_per_format_and_round"
            )
        ]

    def __str__(self) -> str:
        return f"{self.format} of request #{self.request_id} round {self.round}"

    @property
    def content_type(self) -> str:
        return self.CONTENT_TYPES[self.format]


class TermsAcceptance(models.Model):
    """A user accepted a release's terms of use (exactly the text whose SHA-256 is kept)."""

    request = models.ForeignKey(
        ReleaseRequest, on_delete=models.CASCADE, related_name="terms_acceptances"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="terms_acceptances"
    )
    terms_sha256 = models.CharField(max_length=64)
    accepted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["accepted_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "user", "terms_sha256"], name="one_acceptance_per_terms"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} accepted the terms of #{self.request_id}"


class Reproduction(models.Model):
    """An officer's re-run of a release from its stored input, compared byte for byte."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        IDENTICAL = "identical", "Identical"
        DIFFERENT = "different", "Different"
        FAILED = "failed", "Failed"

    FINAL_STATES = frozenset({State.IDENTICAL, State.DIFFERENT, State.FAILED})

    request = models.ForeignKey(
        ReleaseRequest, on_delete=models.CASCADE, related_name="reproductions"
    )
    round = models.PositiveIntegerField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    #: Per format: {"expected": sha256, "got": sha256}.
    outcome = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: The lease of the worker re-running it (see background.leases), and its attempts.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Reproduction of #{self.request_id} round {self.round}: {self.state}"

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES
