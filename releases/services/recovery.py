"""Every piece of work reaches a final state by itself: the sweeper.

Work is a release run, a profiling, a reproduction and a decision e-mail. Two things can
leave it hanging, and :func:`sweep` (Celery beat, every ``SWEEP_SECONDS``, and at every worker
start) resolves both:

* **A dead worker** (killed with ``-9`` by the out-of-memory killer, a hard time limit, a
  machine restarted). Running work holds a lease (``services.leases``); a lease not renewed for
  ``LEASE_SECONDS`` has lost its worker. The work gets another attempt (back to queued or
  pending, sent again through the outbox) while it has had fewer than ``WORK_MAX_ATTEMPTS``,
  and otherwise ends failed with a reason the person can act on. What the lost attempt wrote
  (extract files, temporary folders) is removed.
* **A lost message** (Redis down at the moment of sending, or restarted without its queue).
  Messages wait in the outbox until the broker takes them (``dispatch.deliver_waiting``). Work
  still waiting for a worker ``REDELIVER_SECONDS`` after its message went out is sent again,
  with a backoff (x2 each time, at most x8); repeats are harmless because every task claims its
  work with a conditional update.

Recovery does not depend on beat alone: a page polling one request or dataset resolves that
item the same way (:func:`check_request`, :func:`check_dataset`; one or two single-row queries).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from releases.core import audit
from releases.models import (
    AuditEvent,
    Dataset,
    EquivalenceClass,
    ReleaseRequest,
    Reproduction,
    Review,
)
from releases.services import dispatch, leases, lifecycle, profiling

logger = logging.getLogger(__name__)

State = ReleaseRequest.State
RState = Reproduction.State
RUN_TASK = "releases.run_release"
STATISTICS_TASK = "releases.run_statistics"
PROFILE_TASK = "releases.profile_dataset"
REPRODUCE_TASK = "releases.reproduce_release"
NOTIFY_TASK = "releases.notify_requester"
#: A decision e-mail is sent again for this long (a mail server down for a day is an outage
#: the administrators know of; the decision itself is on the page).
NOTIFY_RETRY_FOR = timedelta(days=1)
#: The most items of each kind one sweep looks at (the rest wait for the next sweep).
SWEEP_BATCH = 200


def _cause(started_at, heartbeat_at) -> str:
    """Why a worker most likely stopped: the hard time limit when it ran that long."""
    hard = float(settings.CELERY_TASK_TIME_LIMIT)
    if started_at and heartbeat_at and (heartbeat_at - started_at).total_seconds() >= hard - 5:
        return f"it ran past the time limit (TASK_TIME_LIMIT, {hard:.0f} s)"
    if started_at and heartbeat_at:
        return "it most likely ran out of memory, or its machine was restarted"
    return (
        "it most likely ran out of memory or past the time limit (TASK_TIME_LIMIT), or its "
        "machine was restarted"
    )


def run_lost_message(attempts: int, cause: str) -> str:
    return (
        f"The worker running this request stopped before it finished, {attempts} "
        f"time{'s' if attempts != 1 else ''} ({cause}). Resubmit the request to run it again, "
        "with fewer quasi-identifiers or shorter hierarchies if it keeps stopping."
    )


def profiling_lost_message(attempts: int, cause: str) -> str:
    return (
        f"The worker reading this file stopped before it finished, {attempts} "
        f"time{'s' if attempts != 1 else ''} ({cause}). Upload the file again, or a smaller "
        "one (fewer rows or columns) if it keeps stopping."
    )


def run_task_of(kind: str) -> str:
    """The task that runs a request of this kind (a row-level extract or DP statistics)."""
    return STATISTICS_TASK if kind == ReleaseRequest.Kind.STATISTICS else RUN_TASK


def _silent() -> Q:
    return Q(heartbeat_at__lt=leases.expired_before()) | Q(heartbeat_at__isnull=True)


# --- Lost workers ---------------------------------------------------------------------------


def recover_run(release_request: ReleaseRequest) -> str:
    """Give a run whose lease expired another attempt, or fail it; "" when it is alive."""
    from releases.services.release import discard_attempt

    lost = ReleaseRequest.objects.filter(
        _silent(),
        pk=release_request.pk,
        state=State.RUNNING,
        attempts=release_request.attempts,
        round=release_request.round,
    )
    retry = release_request.attempts < leases.max_attempts()
    with transaction.atomic():
        if retry:
            done = lost.update(
                state=lifecycle.target(State.RUNNING, "retry_run"),
                progress=0.0,
                stage=(
                    f"Waiting for a worker (attempt {release_request.attempts + 1} of "
                    f"{leases.max_attempts()}: the previous worker stopped)"
                ),
                started_at=None,
                heartbeat_at=None,
            )
        else:
            reason = run_lost_message(
                release_request.attempts,
                _cause(release_request.started_at, release_request.heartbeat_at),
            )
            done = lost.update(
                state=lifecycle.target(State.RUNNING, "fail_run"),
                error=reason,
                stage="Failed",
                finished_at=timezone.now(),
            )
        if not done:
            return ""  # it renewed its lease, finished or was cancelled meanwhile
        EquivalenceClass.objects.filter(request=release_request).delete()
        if retry:
            audit.record(
                AuditEvent.Action.RUN_RETRIED,
                None,
                request=release_request,
                round=release_request.round,
                attempt=release_request.attempts,
                worker=release_request.worker,
            )
            dispatch.enqueue(run_task_of(release_request.kind), release_request.pk)
        else:
            audit.record(
                AuditEvent.Action.RUN_FAILED,
                None,
                request=release_request,
                round=release_request.round,
                attempt=release_request.attempts,
                worker=release_request.worker,
                reason=reason,
            )
    discard_attempt(release_request.pk, release_request.round, release_request.attempts)
    logger.warning(
        "Request %s: worker %s stopped (attempt %s): %s",
        release_request.pk,
        release_request.worker,
        release_request.attempts,
        "retried" if retry else "failed",
    )
    return "retried" if retry else "failed"


def recover_profiling(dataset: Dataset) -> str:
    """Give a profiling whose lease expired another attempt, or refuse the file."""
    still = {"attempts": dataset.attempts, "status": Dataset.Status.PROFILING}
    if dataset.attempts >= leases.max_attempts():
        reason = profiling_lost_message(dataset.attempts, _cause(None, None))
        silent = Dataset.objects.filter(_silent(), pk=dataset.pk, **still).exists()
        if silent and profiling.refuse(dataset, reason, **still, heartbeat_at=dataset.heartbeat_at):
            logger.warning("Dataset %s: worker %s stopped: refused", dataset.pk, dataset.worker)
            return "failed"
        return ""
    with transaction.atomic():
        done = Dataset.objects.filter(_silent(), pk=dataset.pk, **still).update(
            status=Dataset.Status.PENDING,
            progress=0.0,
            stage=(
                f"Waiting for a worker (attempt {dataset.attempts + 1} of "
                f"{leases.max_attempts()}: the previous worker stopped)"
            ),
            heartbeat_at=None,
        )
        if not done:
            return ""
        audit.record(
            AuditEvent.Action.PROFILING_RETRIED,
            None,
            dataset=dataset,
            dataset_name=dataset.name,
            attempt=dataset.attempts,
            worker=dataset.worker,
        )
        dispatch.enqueue(PROFILE_TASK, dataset.pk)
    logger.warning("Dataset %s: worker %s stopped: retried", dataset.pk, dataset.worker)
    return "retried"


def recover_reproduction(reproduction: Reproduction) -> str:
    lost = Reproduction.objects.filter(
        _silent(), pk=reproduction.pk, state=RState.RUNNING, attempts=reproduction.attempts
    )
    with transaction.atomic():
        if reproduction.attempts < leases.max_attempts():
            if not lost.update(state=RState.QUEUED, heartbeat_at=None):
                return ""
            dispatch.enqueue(REPRODUCE_TASK, reproduction.pk)
            return "retried"
        reason = (
            f"The worker re-running this release stopped before it finished, "
            f"{reproduction.attempts} times ({_cause(None, None)}). Ask for another "
            "reproduction to try again."
        )
        if not lost.update(state=RState.FAILED, error=reason, finished_at=timezone.now()):
            return ""
        audit.record(
            AuditEvent.Action.REPRODUCED,
            None,
            request=reproduction.request,
            round=reproduction.round,
            outcome=RState.FAILED,
            files={},
            reason=reason,
        )
        return "failed"


def _tally(outcomes: list[str]) -> dict[str, int]:
    return {
        "retried": outcomes.count("retried"),
        "failed": outcomes.count("failed"),
    }


def recover_lost_work() -> dict[str, dict[str, int]]:
    """Every run, profiling and reproduction whose lease expired."""
    runs = [
        recover_run(r)
        for r in ReleaseRequest.objects.filter(_silent(), state=State.RUNNING)[:SWEEP_BATCH]
    ]
    profilings = [
        recover_profiling(d)
        for d in Dataset.objects.filter(_silent(), status=Dataset.Status.PROFILING)[:SWEEP_BATCH]
    ]
    reproductions = [
        recover_reproduction(r)
        for r in Reproduction.objects.filter(_silent(), state=RState.RUNNING).select_related(
            "request__dataset"
        )[:SWEEP_BATCH]
    ]
    return {
        "runs": _tally(runs),
        "profilings": _tally(profilings),
        "reproductions": _tally(reproductions),
    }


# --- Lost messages --------------------------------------------------------------------------


def redeliver_seconds() -> float:
    return float(getattr(settings, "REDELIVER_SECONDS", 120))


def redeliver(task_name: str, pk: int) -> bool:
    """Send the work again if its last message went out long enough ago (with backoff); a
    message still in the outbox is the outbox's to send."""
    message = dispatch.latest(task_name, pk)
    redelivery = 0
    if message is not None:
        if message.sent_at is None:
            return False
        wait = redeliver_seconds() * 2 ** min(message.redelivery, 3)
        if message.sent_at > timezone.now() - timedelta(seconds=wait):
            return False
        redelivery = message.redelivery + 1
    with transaction.atomic():
        dispatch.enqueue(task_name, pk, redelivery=redelivery)
    logger.info("Sent %s(%s) again (redelivery %s)", task_name, pk, redelivery)
    return True


def redeliver_waiting_work() -> int:
    """Work still waiting for a worker long after its message went out: send it again."""
    queued = ReleaseRequest.objects.filter(state=State.QUEUED).order_by("pk")
    waiting = [
        *((run_task_of(kind), pk) for pk, kind in queued.values_list("pk", "kind")[:SWEEP_BATCH]),
        *((PROFILE_TASK, pk) for pk in _pks(Dataset.objects.filter(status=Dataset.Status.PENDING))),
        *((REPRODUCE_TASK, pk) for pk in _pks(Reproduction.objects.filter(state=RState.QUEUED))),
        *(
            (NOTIFY_TASK, pk)
            for pk in _pks(
                Review.objects.filter(
                    notified_at__isnull=True, created_at__gte=timezone.now() - NOTIFY_RETRY_FOR
                )
            )
        ),
    ]
    return sum(redeliver(task, pk) for task, pk in waiting)


def _pks(queryset) -> list[int]:
    return list(queryset.order_by("pk").values_list("pk", flat=True)[:SWEEP_BATCH])


# --- One item, for the page polling it ------------------------------------------------------


def check_request(release_request: ReleaseRequest) -> bool:
    """Resolve this request's expired lease or lost message now; True when it changed."""
    if release_request.state == State.RUNNING:
        silent = release_request.heartbeat_at is None or (
            release_request.heartbeat_at < leases.expired_before()
        )
        return bool(silent and recover_run(release_request))
    if release_request.state == State.QUEUED:
        return redeliver(run_task_of(release_request.kind), release_request.pk)
    return False


def check_dataset(dataset: Dataset) -> bool:
    """Resolve this dataset's expired lease or lost message now; True when it changed."""
    if dataset.status == Dataset.Status.PROFILING:
        silent = dataset.heartbeat_at is None or dataset.heartbeat_at < leases.expired_before()
        return bool(silent and recover_profiling(dataset))
    if dataset.status == Dataset.Status.PENDING:
        return redeliver(PROFILE_TASK, dataset.pk)
    return False


def waiting_for_queue(release_request: ReleaseRequest) -> bool:
    """Is this queued request's message still waiting for the broker (Redis unreachable)?"""
    return release_request.state == State.QUEUED and dispatch.is_waiting(
        run_task_of(release_request.kind), release_request.pk
    )


def dataset_waiting_for_queue(dataset: Dataset) -> bool:
    return dataset.status == Dataset.Status.PENDING and dispatch.is_waiting(
        PROFILE_TASK, dataset.pk
    )


# --- Temporary folders of dead worker processes ---------------------------------------------


_work_root: Path | None = None


def work_dirs_root() -> Path:
    """Where worker processes keep their temporary folders (fixed at the first call: a worker
    process then points its own temporary folder inside it)."""
    global _work_root
    if _work_root is None:
        base = settings.FILE_UPLOAD_TEMP_DIR or tempfile.gettempdir()
        _work_root = Path(base) / "anonymizer-work"
    return _work_root


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def use_process_work_dir() -> Path:
    """Give this worker process a temporary folder of its own (``anonymizer-work/<pid>``)
    and remove those of processes that died: a process killed with ``-9`` leaves its files."""
    root = work_dirs_root()
    own = root / str(os.getpid())
    own.mkdir(parents=True, exist_ok=True)
    remove_dead_work_dirs()
    return own


def remove_dead_work_dirs() -> int:
    root = work_dirs_root()
    removed = 0
    try:
        entries = list(root.iterdir())
    except FileNotFoundError:
        return 0
    for entry in entries:
        if entry.name.isdigit() and int(entry.name) != os.getpid() and not _alive(int(entry.name)):
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


# --- The sweep ------------------------------------------------------------------------------


def sweep() -> dict:
    """The periodic sweep (Celery beat, and every worker start): send what the broker missed,
    retry or end what died, send again what was lost, expire releases past their date."""
    from releases.services.sharing import expire_due

    sent, waiting = dispatch.deliver_waiting()
    lost = recover_lost_work()
    redelivered = redeliver_waiting_work()
    # Approved releases past their expiry date: already refused, now also marked expired.
    expired = expire_due()
    removed_dirs = remove_dead_work_dirs()
    return {
        "sent": sent,
        "waiting": waiting,
        **lost,
        "redelivered": redelivered,
        "expired_releases": expired,
        "removed_work_dirs": removed_dirs,
    }
