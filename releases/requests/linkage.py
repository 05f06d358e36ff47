"""The linkage attack before approval, a worker's job: the request's attacker file linked to
the round's extract (``engine.linkage.link``) on every column name the two share.

Generalized columns (the quasi-identifiers) match by containment: through their hierarchy at
the released level (at any level after Mondrian's local recoding) or the released interval; a
suppressed value matches anything; columns released unchanged match by equality. The extract is
read back from the round's stored file, so what is linked is exactly what a recipient gets.

Never run in a web request: attaching a file (``requests.attacker``) or finishing a run queues
it; it holds a lease like every job (``background.jobs``), and a file replaced or a request
deleted meanwhile stops it within a heartbeat.
"""

from __future__ import annotations

import hashlib
import logging

import pandas as pd
from django.db import transaction
from django.utils import timezone

from releases.background import jobs
from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.datasets import originals
from releases.datasets import services as datasets
from releases.engine import EngineError, tabular
from releases.engine.linkage import ColumnRule, LinkageResult, link
from releases.models import AttackerFile, AuditEvent, ReleaseFile, ReleaseRequest
from releases.requests import rules, run
from releases.requests.parameters import ReleaseParameters

logger = logging.getLogger(__name__)

AState = AttackerFile.State


def read_attacker(attacker: AttackerFile) -> pd.DataFrame:
    """The stored attacker file, checked against its SHA-256, read within the upload bounds."""
    with storage.local_path(attacker.path) as path:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(storage.CHUNK_BYTES * 8):
                digest.update(chunk)
        if digest.hexdigest() != attacker.sha256:
            raise InvalidInput("The stored attacker file does not match its recorded SHA-256.")
        frame, _ = tabular.read_path(path, None, attacker.name, originals.read_limits())
    return frame


def read_extract(release_request: ReleaseRequest) -> pd.DataFrame:
    """The round's extract as released (its Parquet file, else its CSV), as strings."""
    files = {
        f.format: f
        for f in ReleaseFile.objects.filter(request=release_request, round=release_request.round)
    }
    stored = files.get(ReleaseFile.Format.PARQUET) or files.get(ReleaseFile.Format.CSV)
    if stored is None:
        raise InvalidInput("This round has no extract to link the attacker file to.")
    with storage.local_path(stored.path) as path:
        frame, _ = tabular.read_path(path, None, path.name)
    return frame


def column_rules(release_request: ReleaseRequest) -> dict[str, ColumnRule]:
    """How each generalized column of the round's extract is matched: its hierarchy (the one
    the run used, stored or built on the same values) at the released level, or at any level
    when the algorithm recoded locally (Mondrian)."""
    snapshot = release_request.config
    automatic = [q["name"] for q in snapshot["quasi_identifiers"] if not q.get("hierarchy_text")]
    # Only the columns whose hierarchy is built from their values are read.
    frame = (
        datasets.load_frame(release_request.dataset, automatic, categorical=True)
        if automatic
        else pd.DataFrame()
    )
    config = run.engine_config(snapshot, ReleaseParameters.of(release_request), frame)
    levels = (release_request.summary or {}).get("levels") or None
    return {
        name: ColumnRule(hierarchy, None if levels is None else levels.get(name))
        for name, hierarchy in config.quasi_identifiers.items()
    }


def link_round(attacker: AttackerFile, release_request: ReleaseRequest) -> LinkageResult:
    """Link ``attacker`` to the extract of the request's current round."""
    return link(
        read_attacker(attacker),
        read_extract(release_request),
        release_request.privacy_model.k,
        column_rules(release_request),
    )


class Linkage(jobs.Job):
    """Link an attacker file to its request's extract; the figures are stored on the file's
    row for the round it linked, and audited."""

    model = AttackerFile
    running = AState.RUNNING
    related = ("request__dataset",)
    refusals = (EngineError, InvalidInput)

    def claimable(self):
        return {"state__in": rules.LINKAGE.sources("start")}

    def claiming(self, now):
        return {
            "state": rules.LINKAGE.target_of("start"),
            "stage": "Reading the attacker file and the extract",
        }

    def soft_limit_message(self) -> str:
        return run.soft_limit_message()

    def memory_message(self) -> str:
        return run.memory_message()

    def internal_error_message(self) -> str:
        return "The linkage stopped because of an internal error (see the worker's log)."

    def log_failure(self) -> None:
        logger.exception("Linkage of attacker file %s failed", self.pk)

    def stopped(self) -> None:
        logger.info("Linkage of attacker file %s stopped: it is no longer this worker's", self.pk)

    def body(self) -> None:
        attacker = self.row
        release_request = attacker.request
        self.linked_round = release_request.round
        self.progress("Linking the attacker file to the extract")
        self.result = link_round(attacker, release_request)
        self.finish(
            state=rules.LINKAGE.target_of("finish"),
            stage="Linked",
            linkage=self.result.as_dict(),
            linked_round=self.linked_round,
            error="",
            finished_at=timezone.now(),
        )

    def finished(self) -> None:
        found = self.result
        audit.record(
            AuditEvent.Action.LINKED,
            None,
            request=self.row.request,
            round=self.linked_round,
            attacker_sha256=self.row.sha256,
            attacker_records=found.attacker_records,
            matched_columns=found.matched_columns,
            matched_one=found.matched_one,
            matched_below_k=found.matched_below_k,
        )

    def fail(self, reason: str) -> None:
        with transaction.atomic():
            failed = AttackerFile.objects.filter(pk=self.pk, **self.ours()).update(
                state=rules.LINKAGE.target_of("fail"),
                stage="Failed",
                error=reason,
                finished_at=timezone.now(),
            )
            if failed:
                audit.record(
                    AuditEvent.Action.LINKED,
                    None,
                    request=self.row.request,
                    round=self.row.request.round,
                    attacker_sha256=self.row.sha256,
                    reason=reason,
                )


def link_attacker_file(attacker_id: int) -> AttackerFile | None:
    """The Celery task's body: see :class:`Linkage`; the file's row as it ends."""
    Linkage(attacker_id).run()
    return AttackerFile.objects.filter(pk=attacker_id).first()
