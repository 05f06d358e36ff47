"""Handing work to the Celery workers.

Every task is enqueued through :func:`enqueue`, inside the transaction that made the work
necessary: the message goes out only once that transaction has committed, so a worker never
picks up a row that does not exist yet, and a rolled-back request sends nothing.
"""

from __future__ import annotations

from django.db import transaction


def enqueue(task_name: str, *args: int) -> None:
    """Send the task ``task_name`` (a name from ``releases.tasks``) with ``args`` on commit."""
    transaction.on_commit(lambda: send(task_name, *args))


def send(task_name: str, *args: int) -> None:
    """Send the task now (the caller's transaction, if any, has committed)."""
    from .. import tasks

    tasks.BY_NAME[task_name].delay(*args)
