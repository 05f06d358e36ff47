"""Messages to the Celery workers, written in the same transaction as the work they start."""

from __future__ import annotations

from django.db import models


class OutboxMessage(models.Model):
    """One task to send to the broker; sent after commit, and again by the sweeper if the
    broker was unreachable. Tasks claim their work conditionally, so a repeat is harmless."""

    task_name = models.CharField(max_length=64)
    args = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    #: A sender holds the message until then, so two senders do not both send it.
    claimed_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    #: The work it starts ("task:arg,..."): the sweeper finds the latest message of a piece
    #: of work still waiting, to send it again (see background.recovery).
    work_key = models.CharField(max_length=100, blank=True)
    #: How many times this work was sent again before this message (its backoff).
    redelivery = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["sent_at", "id"], name="outbox_pending"),
            models.Index(fields=["work_key", "id"], name="outbox_work"),
        ]

    def __str__(self) -> str:
        state = "sent" if self.sent_at else "waiting"
        return f"{self.task_name}{tuple(self.args)} ({state})"

    @staticmethod
    def key_of(task_name: str, *args: int) -> str:
        return f"{task_name}:{','.join(str(a) for a in args)}"[:100]
