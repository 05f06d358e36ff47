"""Every piece of work reaches a final state by itself: the sweeper.

Work is what the features hand to the workers (a release run, a profiling, a reproduction, a
decision e-mail). Two things can leave it hanging, and :func:`sweep` (Celery beat, every
``SWEEP_SECONDS``, and at every worker start) resolves both:

* **A dead worker** (killed with ``-9`` by the out-of-memory killer, a hard time limit, a
  machine restarted). Running work holds a lease (``background.leases``); a lease not renewed
  for ``LEASE_SECONDS`` has lost its worker. The work gets another attempt (back to queued or
  pending, sent again through the outbox) while it has had fewer than ``WORK_MAX_ATTEMPTS``,
  and otherwise ends failed with a reason the person can act on. What the lost attempt wrote
  (extract files, temporary folders) is removed.
* **A lost message** (Redis down at the moment of sending, or restarted without its queue).
  Messages wait in the outbox until the broker takes them (``outbox.deliver_waiting``). Work
  still waiting for a worker ``REDELIVER_SECONDS`` after its message went out is sent again,
  with a backoff (x2 each time, at most x8); repeats are harmless because every task claims its
  work with a conditional update.

The sweeper knows no feature: each feature registers its kinds of work (:func:`register`: the
rows a worker holds, how to retry or fail one whose lease expired, the work waiting for a
worker) and what else a sweep does for it (:func:`register_periodic`), from
``ReleasesConfig.ready``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from releases.background import leases, outbox

logger = logging.getLogger(__name__)

#: The most items of each kind one sweep looks at (the rest wait for the next sweep).
SWEEP_BATCH = 200


@dataclass(frozen=True)
class Work:
    """A kind of background work, as a feature registers it with the sweeper."""

    #: Its name in the sweep's report ("runs", "profilings", ...).
    name: str
    model: type[models.Model]
    #: The fields of a row a worker holds (e.g. ``{"state": "running"}``).
    running: dict[str, Any]
    #: Retry or fail one row whose lease expired: "retried", "failed", or "" (it was alive).
    recover: Callable[[Any], str]
    #: Relations the recovery reads (``select_related``).
    related: tuple[str, ...] = ()


@dataclass(frozen=True)
class Periodic:
    """Something else a sweep does for a feature (expiring releases past their date)."""

    #: Its name in the sweep's report.
    name: str
    run: Callable[[], Any]


_work: list[Work] = []
_waiting: list[Callable[[], Iterable[tuple[str, int]]]] = []
_periodic: list[Periodic] = []


def register(work: Work, waiting: Callable[[], Iterable[tuple[str, int]]] | None = None) -> None:
    """Look after ``work``; ``waiting`` lists (task name, id) of the work still waiting for a
    worker, which is sent again when its message went out long ago."""
    if all(w.name != work.name for w in _work):
        _work.append(work)
    if waiting is not None:
        register_waiting(waiting)


def register_waiting(waiting: Callable[[], Iterable[tuple[str, int]]]) -> None:
    """(task name, id) of work waiting for a worker (a message that may have been lost)."""
    if waiting not in _waiting:
        _waiting.append(waiting)


def register_periodic(periodic: Periodic) -> None:
    if all(p.name != periodic.name for p in _periodic):
        _periodic.append(periodic)


def cause(started_at, heartbeat_at) -> str:
    """Why a worker most likely stopped: the hard time limit when it ran that long."""
    hard = float(settings.CELERY_TASK_TIME_LIMIT)
    if started_at and heartbeat_at and (heartbeat_at - started_at).total_seconds() >= hard - 5:
        return f"it ran past the time limit (TASK_TIME_LIMIT, {hard:.0f} s)"
    if started_at and heartbeat_at:
        return (
            "it most likely ran out of memory, lost its database connection, or its machine "
            "was restarted"
        )
    return (
        "it most likely ran out of memory or past the time limit (TASK_TIME_LIMIT), lost its "
        "database connection, or its machine was restarted"
    )


def silent() -> Q:
    """Rows whose lease expired (or was never renewed)."""
    return Q(heartbeat_at__lt=leases.expired_before()) | Q(heartbeat_at__isnull=True)


def retry_stage(attempts: int) -> str:
    """The stage of work given another attempt after its worker stopped."""
    return (
        f"Waiting for a worker (attempt {attempts + 1} of {leases.max_attempts()}: the previous "
        "worker stopped)"
    )


# --- Lost workers ---------------------------------------------------------------------------


def _tally(outcomes: list[str]) -> dict[str, int]:
    return {
        "retried": outcomes.count("retried"),
        "failed": outcomes.count("failed"),
    }


def recover_lost_work() -> dict[str, dict[str, int]]:
    """Every registered piece of work whose lease expired."""
    out = {}
    for work in _work:
        rows = work.model._default_manager.filter(silent(), **work.running)
        if work.related:
            rows = rows.select_related(*work.related)
        out[work.name] = _tally([work.recover(row) for row in rows[:SWEEP_BATCH]])
    return out


# --- Lost messages --------------------------------------------------------------------------


def redeliver_seconds() -> float:
    return float(getattr(settings, "REDELIVER_SECONDS", 120))


def redeliver(task_name: str, pk: int) -> bool:
    """Send the work again if its last message went out long enough ago (with backoff); a
    message still in the outbox is the outbox's to send."""
    message = outbox.latest(task_name, pk)
    redelivery = 0
    if message is not None:
        if message.sent_at is None:
            return False
        wait = redeliver_seconds() * 2 ** min(message.redelivery, 3)
        if message.sent_at > timezone.now() - timedelta(seconds=wait):
            return False
        redelivery = message.redelivery + 1
    with transaction.atomic():
        outbox.enqueue(task_name, pk, redelivery=redelivery)
    logger.info("Sent %s(%s) again (redelivery %s)", task_name, pk, redelivery)
    return True


def redeliver_waiting_work() -> int:
    """Work still waiting for a worker long after its message went out: send it again."""
    waiting = [item for listed in _waiting for item in listed()]
    return sum(redeliver(task, pk) for task, pk in waiting)


def pks(queryset) -> list[int]:
    """The first ids of ``queryset`` a sweep looks at."""
    return list(queryset.order_by("pk").values_list("pk", flat=True)[:SWEEP_BATCH])


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
    retry or end what died, send again what was lost, then what the features do periodically
    (expire releases past their date)."""
    sent, waiting = outbox.deliver_waiting()
    lost = recover_lost_work()
    redelivered = redeliver_waiting_work()
    periodic = {p.name: p.run() for p in _periodic}
    removed_dirs = remove_dead_work_dirs()
    return {
        "sent": sent,
        "waiting": waiting,
        **lost,
        "redelivered": redelivered,
        **periodic,
        "removed_work_dirs": removed_dirs,
    }
