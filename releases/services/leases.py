"""Leases on running work: a worker proves it is alive by renewing a heartbeat.

A run or a profiling holds a lease while it works: :func:`hold` starts a thread that writes
``heartbeat_at`` every ``HEARTBEAT_SECONDS``, whatever the work is doing (reading a file,
searching, writing), and stops it when the work ends. A process killed with ``-9`` (the
out-of-memory killer) stops renewing, so its lease expires after ``LEASE_SECONDS``; the
sweeper (``recovery.sweep``) then gives the work another attempt or ends it with a reason.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection, models
from django.utils import timezone

logger = logging.getLogger(__name__)


def heartbeat_seconds() -> float:
    return float(getattr(settings, "HEARTBEAT_SECONDS", 10))


def lease_seconds() -> float:
    return float(getattr(settings, "LEASE_SECONDS", 60))


def expired_before() -> timezone.datetime:
    """Work whose last heartbeat is older than this has lost its worker."""
    return timezone.now() - timedelta(seconds=lease_seconds())


def renew(model: type[models.Model], pk: int) -> None:
    model.objects.filter(pk=pk).update(heartbeat_at=timezone.now())


@contextlib.contextmanager
def hold(model: type[models.Model], pk: int) -> Iterator[None]:
    """Renew the lease of ``model`` row ``pk`` from a background thread while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(heartbeat_seconds()):
                try:
                    renew(model, pk)
                except Exception:  # a busy database must not end the work: try next time
                    logger.warning("Could not renew the lease of %s %s", model.__name__, pk)
        finally:
            connection.close()  # this thread's own connection

    renew(model, pk)
    thread = threading.Thread(target=beat, name=f"lease-{model.__name__}-{pk}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=heartbeat_seconds() + 5)
        close_old_connections()
