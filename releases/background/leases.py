"""Leases on running work: a worker proves it is alive by renewing a heartbeat.

A run, a profiling or a reproduction holds a lease while it works. Its claim (a conditional
update) records the attempt and the process holding it (:func:`worker_id`, ``host:pid`` of
the pool process); :class:`Lease` then renews ``heartbeat_at`` from a thread every
``HEARTBEAT_SECONDS``, whatever the work is doing (reading a file, searching, writing).

* A process killed with ``-9`` (the out-of-memory killer, a hard time limit) stops renewing:
  its lease expires after ``LEASE_SECONDS`` and the sweeper (``recovery.sweep``) gives the work
  another attempt or ends it with a reason.
* Renewal is conditional too: it only touches a row still running in this process. When the
  row was cancelled, deleted, or handed to another attempt, renewal finds nothing, the lease
  is *lost*, and the thread stops the work: it raises the caller's exception (``interrupt``)
  in the working thread, as Celery's soft time limit does, so even a phase with no progress
  reports (loading, writing) stops within a heartbeat. Progress reports check the same.

The work stops the lease (:meth:`Lease.stop`) before its final write, which is itself
conditional on the row still being its own: nothing a cancelled or deleted work did is kept.
"""

from __future__ import annotations

import ctypes
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.utils import timezone

logger = logging.getLogger(__name__)


def heartbeat_seconds() -> float:
    return float(getattr(settings, "HEARTBEAT_SECONDS", 10))


def lease_seconds() -> float:
    return float(getattr(settings, "LEASE_SECONDS", 60))


def max_attempts() -> int:
    return max(1, int(getattr(settings, "WORK_MAX_ATTEMPTS", 2)))


def expired_before() -> datetime:
    """Work whose last heartbeat is older than this has lost its worker."""
    return timezone.now() - timedelta(seconds=lease_seconds())


def sweep_seconds() -> float:
    return float(getattr(settings, "SWEEP_SECONDS", 30))


@dataclass(frozen=True)
class Stall:
    """Running work whose lease lapsed: its worker stopped, and the sweeper has not yet come."""

    #: When the sweeper will have handled it at the latest (rounded up to the minute).
    by: datetime
    #: Another attempt follows (False: that was the last one, the work will be failed).
    retried: bool


def stall(row: Any) -> Stall | None:
    """The :class:`Stall` of ``row`` (a run, profiling, reproduction or linkage a worker
    holds), or None while its lease is alive. Reads only: the sweeper does the retrying.

    The sweeper (Celery beat, every ``SWEEP_SECONDS``) takes the work at its first sweep after
    the lease lapsed, so by the lapse plus one sweep interval; when that is past (the sweep is
    late), by one interval from now."""
    now = timezone.now()
    lapsed = row.heartbeat_at + timedelta(seconds=lease_seconds()) if row.heartbeat_at else now
    if lapsed > now:
        return None
    interval = timedelta(seconds=sweep_seconds())
    by = lapsed + interval
    if by <= now:
        by = now + interval
    rounded = by.replace(second=0, microsecond=0)
    if rounded < by:
        rounded += timedelta(minutes=1)
    return Stall(by=rounded, retried=row.attempts < max_attempts())


def worker_id() -> str:
    """This process, as operators (and the fault tests) find it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def pid_of(worker: str) -> int | None:
    """The process id in a :func:`worker_id` (None when it is not one)."""
    try:
        return int(worker.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in the thread ``thread_id`` at its next Python instruction (None:
    take back one not yet raised)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception else None
    )


class Lease:
    """Renew the lease of ``model`` row ``pk`` while the block runs.

    ``still_ours``: the row's fields while the work is this process's (e.g. ``state=RUNNING,
    worker=worker_id()``); renewal updates only such a row. ``interrupt``: the exception raised
    in the working thread once the lease is lost (None: only :attr:`lost` is set).
    """

    def __init__(
        self,
        model: type[models.Model],
        pk: int,
        interrupt: type[BaseException] | None = None,
        **still_ours: Any,
    ) -> None:
        self.model = model
        self.pk = pk
        self.interrupt = interrupt
        self.still_ours = still_ours
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._done = False
        self._interrupted = False
        self._owner = threading.get_ident()
        self._thread: threading.Thread | None = None

    def renew(self) -> bool:
        """Write a heartbeat; False when the row is no longer this work's."""
        return bool(
            self.model._default_manager.filter(pk=self.pk, **self.still_ours).update(
                heartbeat_at=timezone.now()
            )
        )

    def _beat(self) -> None:
        try:
            while not self._stop.wait(heartbeat_seconds()):
                try:
                    ours = self.renew()
                except Exception:  # a busy database must not end the work: try next time
                    logger.warning(
                        "Could not renew the lease of %s %s", self.model.__name__, self.pk
                    )
                    continue
                if not ours:
                    self._lose()
                    return
        finally:
            connection.close()  # this thread's own connection

    def _lose(self) -> None:
        logger.info("%s %s is no longer this worker's: stopping", self.model.__name__, self.pk)
        self.lost.set()
        with self._lock:
            if self.interrupt is not None and not self._done:
                self._interrupted = True
                _raise_in(self._owner, self.interrupt)

    def __enter__(self) -> Lease:
        if connection.in_atomic_block:
            # Called inside the caller's transaction (eager tasks in tests): another connection
            # could not write the row before it commits. The progress reports still check.
            return self
        self._thread = threading.Thread(
            target=self._beat, name=f"lease-{self.model.__name__}-{self.pk}", daemon=True
        )
        self._thread.start()
        return self

    def _finish(self) -> bool:
        """Stop renewing; True when the lease was lost and the work was (or was about to be)
        interrupted. A pending exception not yet raised in the working thread is taken back."""
        with self._lock:
            already = self._done
            self._done = True
            interrupted = self._interrupted
            if interrupted:
                _raise_in(self._owner, None)
        if not already:
            self._stop.set()
            if self._thread is not None:
                self._thread.join(timeout=heartbeat_seconds() + 5)
        return interrupted

    def stop(self) -> None:
        """Stop renewing, before the final write. Raises ``interrupt`` if the lease was lost,
        whether or not its exception had reached the working thread yet."""
        if self._finish() and self.interrupt is not None:
            raise self.interrupt()

    def __exit__(self, exc_type, exc, tb) -> None:
        interrupted = self._finish()
        if interrupted and exc_type is None and self.interrupt is not None:
            raise self.interrupt()


# --- Fault injection for the tests ------------------------------------------------------------

_paused: set[tuple[str, str]] = set()


def _pause_matching(stage: str, work: str) -> str:
    setting = getattr(settings, "WORK_PAUSE_AT", "")
    if not setting:
        return ""
    lowered = stage.lower()
    for wanted in setting.split(","):
        if wanted and wanted.lower() in lowered and (wanted, work) not in _paused:
            return wanted
    return ""


def pause_wanted(stage: str, work: str) -> bool:
    """Would :func:`pause_point` pause here (so the stage must be reported first)?"""
    return bool(_pause_matching(stage, work))


def pause_point(stage: str, work: str) -> None:
    """Test-only: with ``WORK_PAUSE_AT`` naming parts of stages (comma-separated: "Loading,
    lattice,Recording"), the work pauses at each for ``WORK_PAUSE_SECONDS``, once per piece of
    ``work`` and process, so a fault test can kill or cancel it in that phase. Off (no pause,
    no cost) unless set."""
    wanted = _pause_matching(stage, work)
    if not wanted:
        return
    _paused.add((wanted, work))
    logger.warning("WORK_PAUSE_AT: pausing %s at %r", work, stage)
    deadline = time.monotonic() + float(getattr(settings, "WORK_PAUSE_SECONDS", 5))
    while time.monotonic() < deadline:
        time.sleep(0.05)  # short sleeps: a lost lease's exception is raised between them
