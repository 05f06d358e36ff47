"""An attacker file attached to a release request: identified external records (a voter list,
a population register) that a worker links to the request's extract before approval."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .requests import ReleaseRequest


class AttackerFile(models.Model):
    """One identified file per request, held like an original: stored privately, never shown
    or offered for download, deleted (row and file) with its request and when replaced.

    The linkage of the request's extract is a background job on this row (``state``, whose
    table is ``requests.rules.LINKAGE``); its figures (``linkage``) are those of round
    ``linked_round``."""

    class State(models.TextChoices):
        #: No extract to link to yet (the round is queued, running, or ended without one).
        WAITING = "waiting", "Waiting for the extract"
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Linking"
        DONE = "done", "Linked"
        FAILED = "failed", "Failed"

    request = models.OneToOneField(
        ReleaseRequest, on_delete=models.CASCADE, related_name="attacker_file"
    )
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    #: The uploaded file's name (shown to officers and the requester only).
    name = models.CharField(max_length=255)
    # Relative to the private storage; never exposed through a URL.
    path = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    file_format = models.CharField(max_length=16)
    rows = models.PositiveIntegerField()
    #: The file's column names, in its order.
    columns = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.WAITING)
    stage = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    #: ``engine.linkage.LinkageResult.as_dict()`` of round ``linked_round``.
    linkage = models.JSONField(default=dict, blank=True)
    linked_round = models.PositiveIntegerField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: The lease of the worker linking it (see background.leases), and its attempts.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return f"Attacker file of request #{self.request_id}"
