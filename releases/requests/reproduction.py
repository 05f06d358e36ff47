"""Reproducing a release: re-run it from the stored input with the stored configuration,
hierarchies and seed, and compare every file's SHA-256 with the approved package.

An officer asks for it (``request_reproduction``); a worker runs it (``reproduce``). The new
files are written to a temporary folder and thrown away: only their hashes are kept.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.http import Http404
from django.utils import timezone

from releases.background import leases, outbox
from releases.core import audit
from releases.core.errors import InvalidInput
from releases.engine import EngineError
from releases.models import AuditEvent, ReleaseRequest, Reproduction
from releases.requests import package, rules, run
from releases.requests.parameters import ReleaseParameters

logger = logging.getLogger(__name__)

RState = Reproduction.State
#: The task that re-runs a round.
REPRODUCE_TASK = "releases.reproduce_release"


def request_reproduction(user, request_id: int) -> Reproduction:
    """Queue a re-run of the request's current round (officers)."""
    with transaction.atomic():
        try:
            release_request = (
                ReleaseRequest.objects.select_for_update()
                .select_related("dataset")
                .get(pk=request_id)
            )
        except ReleaseRequest.DoesNotExist:
            raise Http404("No such release request.") from None
        rules.check_reproduce(user, release_request)
        reproduction = Reproduction.objects.create(
            request=release_request, round=release_request.round, requested_by=user
        )
        audit.record(
            AuditEvent.Action.REPRODUCE,
            user,
            request=release_request,
            round=release_request.round,
        )
        outbox.enqueue(REPRODUCE_TASK, reproduction.pk)
    return reproduction


class ReproductionStopped(Exception):
    """The reproduction is no longer this process's (its request was deleted, or it was given
    to another attempt)."""


def _finish(reproduction: Reproduction, state: str, outcome: dict, error: str = "") -> None:
    with transaction.atomic():
        finished = Reproduction.objects.filter(
            pk=reproduction.pk, state=RState.RUNNING, worker=reproduction.worker
        ).update(state=state, outcome=outcome, error=error, finished_at=timezone.now())
        if not finished:
            return
        audit.record(
            AuditEvent.Action.REPRODUCED,
            None,
            request=reproduction.request,
            round=reproduction.round,
            outcome=state,
            files=outcome,
            reason=error,
        )


def reproduce(reproduction_id: int) -> Reproduction | None:
    """Re-run the round and compare; the outcome is stored on the reproduction and audited."""
    claimed = Reproduction.objects.filter(pk=reproduction_id, state=RState.QUEUED).update(
        state=RState.RUNNING,
        heartbeat_at=timezone.now(),
        attempts=F("attempts") + 1,
        worker=leases.worker_id(),
    )
    reproduction = (
        Reproduction.objects.select_related("request__dataset").filter(pk=reproduction_id).first()
    )
    if not claimed or reproduction is None:
        return reproduction
    release_request = reproduction.request
    if release_request.round != reproduction.round:
        _finish(reproduction, RState.FAILED, {}, "The request moved on to another round.")
        return reproduction
    expected = {f.format: f.sha256 for f in release_request.files.filter(round=reproduction.round)}
    lease = leases.Lease(
        Reproduction,
        reproduction.pk,
        interrupt=ReproductionStopped,
        state=RState.RUNNING,
        worker=reproduction.worker,
    )
    try:
        with lease:
            got = _rerun(release_request)
            lease.stop()
    except ReproductionStopped:
        logger.info("Reproduction %s stopped: it is no longer this worker's", reproduction_id)
    except (EngineError, InvalidInput) as exc:
        _finish(reproduction, RState.FAILED, {}, str(exc))
    except SoftTimeLimitExceeded:
        _finish(reproduction, RState.FAILED, {}, run.soft_limit_message())
    except MemoryError:
        _finish(reproduction, RState.FAILED, {}, run.memory_message())
    except Exception:
        logger.exception("Reproduction %s failed", reproduction_id)
        _finish(
            reproduction,
            RState.FAILED,
            {},
            "The re-run stopped because of an internal error (see the worker's log).",
        )
    else:
        outcome = {
            fmt: {"expected": expected.get(fmt, ""), "got": got.get(fmt, "")}
            for fmt in sorted(set(expected) | set(got))
        }
        identical = bool(expected) and all(o["expected"] == o["got"] for o in outcome.values())
        _finish(reproduction, RState.IDENTICAL if identical else RState.DIFFERENT, outcome)
    return Reproduction.objects.filter(pk=reproduction_id).first()


def _rerun(release_request: ReleaseRequest) -> dict[str, str]:
    """The SHA-256 of each file a re-run of the round writes (in a temporary folder)."""
    frame, _ = run.load_released(release_request.dataset, release_request.config)
    built = run.build_release(
        frame,
        release_request.config,
        ReleaseParameters.of(release_request),
        release_request.shuffle_seed,
    )
    with tempfile.TemporaryDirectory(dir=settings.FILE_UPLOAD_TEMP_DIR) as folder:
        written = package.write_package(built.data, Path(folder))
        return {fmt: file.sha256 for fmt, file in written.items()}
