"""The append-only audit log, a hash chain: each event stores the SHA-256 of its content and
of the event before it, so that an event edited, deleted or inserted in the database breaks the
chain at that point (``manage.py verify_audit``)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from .datasets import Dataset
from .requests import ReleaseRequest


class AuditEvent(models.Model):
    """An append-only record of who did what, and when."""

    class Action(models.TextChoices):
        UPLOAD = "upload", "Uploaded dataset"
        UPLOAD_REJECTED = "upload_rejected", "Upload rejected"
        REGISTERED = "registered", "Dataset registered"
        TAGGING = "tagging", "Changed tagging"
        REQUEST = "request", "Requested release"
        RUN_START = "run_start", "Run started"
        RUN_END = "run_end", "Run finished"
        RUN_FAILED = "run_failed", "Run failed"
        RUN_RETRIED = "run_retried", "Run queued again after its worker stopped"
        PROFILING_RETRIED = "profiling_retried", "Profiling queued again after its worker stopped"
        RESUBMIT = "resubmit", "Resubmitted"
        REVIEW = "review", "Reviewed"
        DOWNLOAD = "download", "Downloaded extract"
        PROFILED = "profiled", "Profiled dataset"
        DELETE = "delete", "Deleted dataset"
        BUDGET_SET = "budget_set", "Set privacy budget"
        BUDGET_SPEND = "budget_spend", "Spent privacy budget"
        CANCEL = "cancel", "Cancelled"
        RUN_CANCELLED = "run_cancelled", "Run stopped after cancellation"
        RECIPIENTS = "recipients", "Named recipients"
        TERMS_ACCEPTED = "terms_accepted", "Accepted the terms of use"
        DOWNLOAD_REFUSED = "download_refused", "Download refused"
        REVOKE = "revoke", "Revoked"
        EXPIRE = "expire", "Expired"
        REPRODUCE = "reproduce", "Asked for a reproduction"
        REPRODUCED = "reproduced", "Reproduced"
        RECHECK = "recheck", "Found breaking the statistics rules"
        ATTACKER_FILE = "attacker_file", "Attached an attacker file"
        LINKED = "linked", "Linked the attacker file to the extract"
        TOKEN_CREATED = "token_created", "Created an API token"
        TOKEN_REVOKED = "token_revoked", "Revoked an API token"
        TOKEN_REFUSED = "token_refused", "Refused an API token"
        LOGIN_LOCKED = "login_locked", "Locked a user name after failed sign-ins"
        LOGIN_RELEASED = "login_released", "Released a locked user name"
        AUDIT_EXPORT = "audit_export", "Exported the audit trail"
        RECIPE_SAVED = "recipe_saved", "Saved a recipe"
        RECIPE_APPLIED = "recipe_applied", "Applied a recipe"
        WEBHOOK_CREATED = "webhook_created", "Registered a webhook"
        WEBHOOK_CHANGED = "webhook_changed", "Changed a webhook"
        WEBHOOK_DELETED = "webhook_deleted", "Removed a webhook"
        PROJECT_CREATED = "project_created", "Created a project"
        PROJECT_SETTINGS = "project_settings", "Changed a project's settings"
        MEMBERSHIP = "membership", "Changed a project's members"
        DATASET_MOVED = "dataset_moved", "Moved a dataset to another project"
        LOGIN_SSO = "login_sso", "Signed in with single sign-on"

    # Set before the event is written, so that its hash covers it.
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True
    )
    action = models.CharField(max_length=32, choices=Action.choices)
    # SET_NULL: the events of a deleted dataset (or of its deleted, never-approved requests)
    # stay in the log; their detail keeps the dataset's name.
    dataset = models.ForeignKey(
        Dataset, on_delete=models.SET_NULL, null=True, blank=True, related_name="events"
    )
    request = models.ForeignKey(
        ReleaseRequest, on_delete=models.SET_NULL, null=True, blank=True, related_name="events"
    )
    detail = models.JSONField(default=dict, blank=True)
    # The dataset and request the event was about, as they were: the links above become NULL
    # when those are deleted, and the hash covers these instead.
    dataset_ref = models.PositiveIntegerField(null=True, blank=True)
    request_ref = models.PositiveIntegerField(null=True, blank=True)
    #: The previous event's ``hash`` ("" for the first), and the SHA-256 of this event's content
    #: with it (:func:`event_digest`).
    prev_hash = models.CharField(max_length=64, blank=True, default="")
    hash = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["created_at", "id"]
        # A request's activity, a page at a time, newest first.
        indexes = [models.Index(fields=["request", "created_at", "id"], name="event_request_time")]

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


def event_digest(
    prev_hash: str,
    created_at: dt.datetime,
    actor_id: int | None,
    action: str,
    dataset_ref: int | None,
    request_ref: int | None,
    detail: Any,
) -> str:
    """The SHA-256 of an event's content and its predecessor's hash, over a canonical JSON text
    (keys sorted, the detail as the database gives it back, the time in UTC to the
    microsecond)."""
    content = {
        "prev": prev_hash,
        "at": created_at.astimezone(dt.UTC).isoformat(timespec="microseconds"),
        "actor": actor_id,
        "action": action,
        "dataset": dataset_ref,
        "request": request_ref,
        # Through JSON once: what the database stores and returns (tuples become lists).
        "detail": json.loads(json.dumps(detail)),
    }
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
