"""Handing work to the Celery workers through a transactional outbox.

:func:`enqueue` writes an :class:`~releases.models.OutboxMessage` in the caller's transaction,
so the message exists exactly when the work it starts does. Once the transaction commits, the
message is sent at once; if the broker cannot be reached (Redis down or restarting), the
request still succeeds and the sweeper (``recovery.sweep``, run by Celery beat) sends it when
the broker is back. Nothing committed is lost, and no web request fails because of the broker.

Tasks are named, never imported: a message holds the task's name (``releases.run_release``),
and sending looks the task up in Celery's registry, which Celery's autodiscovery fills from
each feature's ``tasks`` module. Sending twice is harmless: every task claims its work with a
conditional update and does nothing when the work is no longer waiting.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import current_app
from celery.app.task import Task
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from releases.models import OutboxMessage

logger = logging.getLogger(__name__)

#: How long a sender holds a message it is sending before another may try.
CLAIM_SECONDS = 30


_discovered = False


def registered() -> dict[str, Task]:
    """Celery's tasks by name, once Celery's autodiscovery has imported every installed app's
    ``tasks`` module (a web process imports none of them by itself)."""
    global _discovered
    if not _discovered:
        current_app.autodiscover_tasks(force=True)
        _discovered = True
    return current_app.tasks


def enqueue(task_name: str, *args: int, redelivery: int = 0) -> OutboxMessage:
    """Record the task ``task_name`` (a Celery task's name) and send it on commit.

    ``redelivery``: how many times this work was already sent again (the sweeper's backoff)."""
    if task_name not in registered():
        raise ValueError(f"Unknown task {task_name!r}.")
    message = OutboxMessage.objects.create(
        task_name=task_name,
        args=list(args),
        work_key=OutboxMessage.key_of(task_name, *args),
        redelivery=redelivery,
    )
    transaction.on_commit(lambda: deliver(message.pk))
    return message


def latest(task_name: str, *args: int) -> OutboxMessage | None:
    """The last message written for this piece of work."""
    return (
        OutboxMessage.objects.filter(work_key=OutboxMessage.key_of(task_name, *args))
        .order_by("-id")
        .first()
    )


def is_waiting(task_name: str, *args: int) -> bool:
    """Did the broker refuse the last message for this work, which still waits to be sent?"""
    message = latest(task_name, *args)
    return message is not None and message.sent_at is None and message.attempts > 0


def deliver(message_id: int) -> bool:
    """Send one waiting message now; False when it was not sent (taken, sent or broker down)."""
    now = timezone.now()
    claimed = OutboxMessage.objects.filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=now),
        pk=message_id,
        sent_at__isnull=True,
    ).update(claimed_until=now + timedelta(seconds=CLAIM_SECONDS))
    if not claimed:
        return False
    message = OutboxMessage.objects.get(pk=message_id)
    try:
        send(message.task_name, *message.args)
    except Exception as exc:  # the broker's errors vary with the transport: never fail the caller
        logger.warning(
            "Could not send %s%s to the broker: %s", message.task_name, message.args, exc
        )
        OutboxMessage.objects.filter(pk=message_id).update(
            attempts=message.attempts + 1, last_error=str(exc)[:500], claimed_until=None
        )
        return False
    OutboxMessage.objects.filter(pk=message_id).update(
        sent_at=timezone.now(), attempts=message.attempts + 1, last_error=""
    )
    return True


def deliver_waiting(limit: int = 500) -> tuple[int, int]:
    """Send messages still waiting (oldest first); stops at the first broker failure.

    Returns (sent, still waiting)."""
    sent = 0
    for message_id in OutboxMessage.objects.filter(sent_at__isnull=True).values_list(
        "pk", flat=True
    )[:limit]:
        if deliver(message_id):
            sent += 1
        elif not OutboxMessage.objects.filter(pk=message_id, sent_at__isnull=False).exists():
            message = OutboxMessage.objects.filter(pk=message_id).first()
            if message is not None and message.last_error:
                break  # the broker is down: the next sweep tries again
    return sent, waiting_count()


def waiting_count() -> int:
    return OutboxMessage.objects.filter(sent_at__isnull=True).count()


def send(task_name: str, *args: int) -> None:
    """Send the task now, to the broker (or run it at once with eager Celery)."""
    registered()[task_name].delay(*args)


def purge_sent(older_than: timedelta) -> int:
    """Delete sent messages older than ``older_than``: they are only kept for inspection
    (Celery beat runs it daily with ``OUTBOX_RETENTION_DAYS``)."""
    deleted, _ = OutboxMessage.objects.filter(sent_at__lt=timezone.now() - older_than).delete()
    return deleted
