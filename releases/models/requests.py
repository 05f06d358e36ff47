"""Release requests, their review rounds, reviews, and the equivalence classes of extracts."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.urls import reverse
from django.utils import timezone

from ..engine import PrivacyModel
from .datasets import Dataset


class ShuffleScheme(models.TextChoices):
    """The released rows' order from a seed (``engine.shuffle``)."""

    #: A keyed hash of (seed, input row): computed batch by batch, in bounded memory.
    KEYED = "keyed-hash", "Keyed hash of the seed and the input row"
    #: numpy's permutation of all rows (runs made before the keyed order).
    PERMUTATION = "permutation", "Permutation drawn from the seed"


class ReleaseRequest(models.Model):
    """A steward's request to release a dataset: a row-level extract under a privacy model, or
    differentially private statistics (``kind``), reviewed and shared the same way.

    The fields describe the current round: a resubmission after "changes requested" archives
    the round in :class:`ReleaseRound` and runs again with the new parameters.
    """

    class Kind(models.TextChoices):
        EXTRACT = "extract", "Row-level extract"
        STATISTICS = "statistics", "Differentially private statistics"

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        READY = "ready", "Ready for review"
        CHANGES_REQUESTED = "changes", "Changes requested"
        FAILED = "failed", "Failed"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        REVOKED = "revoked", "Revoked"
        EXPIRED = "expired", "Expired"
        CANCELLED = "cancelled", "Cancelled"

    class Algorithm(models.TextChoices):
        OPTIMAL = "optimal", "Optimal full-domain generalization"
        MONDRIAN = "mondrian", "Mondrian (multidimensional local recoding)"
        HEURISTIC = "heuristic", "Search within a time limit (for many quasi-identifiers)"

    #: States in which nothing changes without a person acting (the page stops polling).
    SETTLED_STATES = frozenset(
        {
            State.READY,
            State.CHANGES_REQUESTED,
            State.FAILED,
            State.APPROVED,
            State.REJECTED,
            State.REVOKED,
            State.EXPIRED,
            State.CANCELLED,
        }
    )
    #: States of a release that was approved: its named recipients see it (and why it ended).
    RELEASED_STATES = frozenset({State.APPROVED, State.REVOKED, State.EXPIRED})

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="release_requests"
    )
    round = models.PositiveIntegerField(default=1)
    #: How the current round is made: ``{"model": PrivacyModel.to_spec(), "algorithm":
    #: "optimal" | "mondrian", "levels": {quasi-identifier: level} | None}``. The privacy
    #: models, their parameters and the suppression limit are the engine's
    #: (``releases.engine.criteria``); fixed levels re-run a candidate of an earlier round.
    parameters = models.JSONField(default=dict)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.EXTRACT)
    #: A statistics release's queries of the current round (``engine.dp`` query dicts).
    queries = models.JSONField(default=list, blank=True)
    # The column roles and hierarchies as they were when the round was submitted.
    config = models.JSONField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    progress = models.FloatField(default=0.0)
    stage = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    #: Last sign of life from the worker running it (its lease: see background.leases).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    #: Runs of this round started; the sweeper retries a lost one up to WORK_MAX_ATTEMPTS.
    attempts = models.PositiveSmallIntegerField(default=0)
    #: The process holding the lease ("host:pid"), for operators.
    worker = models.CharField(max_length=200, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    extract_path = models.CharField(max_length=500, blank=True)
    extract_sha256 = models.CharField(max_length=64, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    #: Seed of the round's shuffle of released rows: a re-run with it writes the same bytes.
    shuffle_seed = models.BigIntegerField(null=True, blank=True)
    #: How the seed orders the rows (``engine.shuffle``): rounds run before the keyed order
    #: existed keep numpy's permutation, so that their reproduction writes the same bytes.
    shuffle_scheme = models.CharField(
        max_length=20, choices=ShuffleScheme.choices, default=ShuffleScheme.KEYED
    )
    #: SHA-256 over the round's files ("format:sha256" lines, sorted): what reviewers approve.
    package_sha256 = models.CharField(max_length=64, blank=True)
    # Who receives the release: named users, and members of named groups.
    recipients = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="named_releases"
    )
    recipient_groups = models.ManyToManyField(Group, blank=True, related_name="named_releases")
    #: The data sharing agreement a recipient accepts before the first download.
    terms = models.TextField(blank=True)
    #: Last day the release can be downloaded (inclusive); empty: no expiry.
    expires_at = models.DateField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="revoked_releases",
    )
    revocation_reason = models.TextField(blank=True)
    #: Why this statistics release breaks the rules on the columns and labels a release may
    #: publish, as found when they were introduced (migration 0016): an open request went back
    #: to its steward with it; an approved one is listed for the officers to revoke.
    recheck_reason = models.TextField(blank=True)
    rechecked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Release request #{self.pk} of {self.dataset}"

    def get_absolute_url(self) -> str:
        return reverse("releases:request_detail", args=[self.pk])

    @property
    def is_statistics(self) -> bool:
        return self.kind == self.Kind.STATISTICS

    @property
    def statistics_epsilon(self) -> Decimal:
        """The ε a statistics release's queries spend (the exact decimal sum)."""
        return sum((Decimal(repr(float(q["epsilon"]))) for q in self.queries), Decimal(0))

    @property
    def description(self) -> str:
        """What is released, for lists: an extract's privacy model, or the statistics."""
        if self.is_statistics:
            count = len(self.queries)
            epsilon = format(self.statistics_epsilon.normalize(), "f")
            return f"DP statistics: {count} quer{'y' if count == 1 else 'ies'}, ε {epsilon}"
        return self.model_description

    @property
    def is_past_expiry(self) -> bool:
        """The expiry date has passed (whether or not the state says so yet)."""
        return self.expires_at is not None and timezone.localdate() > self.expires_at

    @property
    def effective_state(self) -> str:
        """The state, with an approval whose expiry date has passed read as expired."""
        if self.state == self.State.APPROVED and self.is_past_expiry:
            return self.State.EXPIRED
        return self.state

    @property
    def effective_state_label(self) -> str:
        return self.State(self.effective_state).label

    @property
    def terms_sha256(self) -> str:
        return hashlib.sha256(self.terms.encode("utf-8")).hexdigest()

    @property
    def is_settled(self) -> bool:
        return self.state in self.SETTLED_STATES

    @property
    def privacy_model(self) -> PrivacyModel:
        """The round's privacy models and suppression limit, read by the engine."""
        return PrivacyModel.from_spec(self.parameters.get("model") or {})

    @property
    def algorithm(self) -> str:
        return self.parameters.get("algorithm") or self.Algorithm.OPTIMAL

    def get_algorithm_display(self) -> str:
        return self.Algorithm(self.algorithm).label

    @property
    def fixed_levels(self) -> dict[str, int] | None:
        """Generalization levels the round applies instead of the optimum (a candidate)."""
        return self.parameters.get("levels") or None

    @property
    def suppression_limit(self) -> float:
        return float((self.parameters.get("model") or {}).get("suppression_limit") or 0.0)

    @property
    def suppression_percent(self) -> float:
        return self.suppression_limit * 100

    @property
    def progress_percent(self) -> int:
        return round(self.progress * 100)

    @property
    def model_description(self) -> str:
        """The privacy model in the field's notation, e.g. "k=5, distinct 2-diversity, at most
        5% of rows suppressed" (the engine's words), and the levels when they are fixed."""
        text = self.privacy_model.describe()
        if self.fixed_levels:
            levels = ", ".join(f"{q}={v}" for q, v in self.fixed_levels.items())
            text += f"; levels fixed at {levels}"
        return text


class ReleaseRound(models.Model):
    """An earlier round of a request, kept visible after the requester resubmitted.

    ``parameters`` holds the round's :attr:`ReleaseRequest.parameters` with its configuration,
    seed and files."""

    request = models.ForeignKey(ReleaseRequest, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField()
    parameters = models.JSONField()
    outcome = models.CharField(max_length=16, choices=ReleaseRequest.State.choices)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    extract_sha256 = models.CharField(max_length=64, blank=True)
    submitted_at = models.DateTimeField()
    closed_at = models.DateTimeField(auto_now_add=True)
    #: The requester's answer given when resubmitting.
    response = models.TextField(blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [
            models.UniqueConstraint(fields=["request", "number"], name="unique_round_number")
        ]

    def __str__(self) -> str:
        return f"Round {self.number} of request #{self.request_id}"


class Review(models.Model):
    """One privacy officer's decision on one round, bound to the exact bytes reviewed."""

    class Decision(models.TextChoices):
        APPROVE = "approve", "Approved"
        CHANGES = "changes", "Requested changes"
        REJECT = "reject", "Rejected"

    request = models.ForeignKey(ReleaseRequest, on_delete=models.CASCADE, related_name="reviews")
    round = models.PositiveIntegerField()
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviews"
    )
    decision = models.CharField(max_length=16, choices=Decision.choices)
    comment = models.TextField(blank=True)
    extract_sha256 = models.CharField(max_length=64)
    #: The package (every downloadable file) the reviewer saw; an approval counts for it only.
    package_sha256 = models.CharField(max_length=64, blank=True)
    #: Failing checks an approving officer accepted (by name; the cross-release check), and
    #: why: written with the vote, shown in the report and the audit log.
    accepted_checks = models.JSONField(default=list, blank=True)
    justification = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: When the decision e-mail went out (or was found to have nobody to go to): sent once.
    notified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["round", "created_at", "id"]
        constraints = [
            # One vote per reviewer per round: two clicks or two tabs cannot vote twice.
            models.UniqueConstraint(
                fields=["request", "round", "reviewer"], name="one_review_per_round"
            )
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} {self.decision} round {self.round} of #{self.request_id}"


class EquivalenceClass(models.Model):
    """One equivalence class of an extract: its quasi-identifier values, size and checks."""

    request = models.ForeignKey(ReleaseRequest, on_delete=models.CASCADE, related_name="classes")
    values = models.JSONField()
    size = models.PositiveIntegerField()
    risk = models.FloatField(default=0.0, help_text="Prosecutor risk, 1 / size.")
    #: Per sensitive attribute: {"values": {value: count}, "distinct_l", "entropy_l", "t"}.
    sensitive = models.JSONField(default=dict, blank=True)
    #: Models the class fails, and models it only just passes (at the threshold).
    fails = models.JSONField(default=list, blank=True)
    borderline = models.JSONField(default=list, blank=True)
    #: Fails a model or only just passes one: stored so the table sorts on it by index (a
    #: JSON emptiness test on 100,000 classes would be computed on every page).
    flagged = models.BooleanField(default=False)
    #: The quasi-identifiers' values as JSON pairs, ``[["name", "value"], ...]`` (see
    #: :meth:`search_key`): the table's filter finds a value with a case-sensitive substring
    #: test (INSTR / STRPOS) on it instead of extracting a JSON key from 100,000 classes.
    search = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["size", "id"]
        # The classes table's orders, each read by index within one request's classes.
        indexes = [
            models.Index(fields=["request", "size", "id"], name="class_request_size"),
            models.Index(fields=["request", "-risk", "id"], name="class_request_risk"),
            models.Index(fields=["request", "-flagged", "size", "id"], name="class_request_flag"),
        ]

    def __str__(self) -> str:
        return f"{self.size} rows: {self.values}"

    @property
    def flag(self) -> str:
        return "fails" if self.fails else ("borderline" if self.borderline else "")

    @staticmethod
    def search_key(attribute: str, value: str) -> str:
        """One quasi-identifier's value as it appears in :attr:`search`: a JSON pair. A quote
        inside a value is escaped, so ``["`` only ever starts a pair and ``"]`` ends one: the
        key matches that pair exactly, never a part of another value."""
        return json.dumps([attribute, value], ensure_ascii=False)

    @staticmethod
    def search_text(values: dict) -> str:
        return json.dumps([[str(k), str(v)] for k, v in values.items()], ensure_ascii=False)
