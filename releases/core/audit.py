"""The audit log: who did what, and when. Events are only ever appended, each chained to the
one before it by its hash (``models.audit.event_digest``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from releases.models import AuditEvent, Dataset, ReleaseRequest
from releases.models.audit import event_digest

#: PostgreSQL's advisory lock that puts appends in one line (any fixed number would do).
_CHAIN_LOCK = 0x61756474


def _lock_chain() -> None:
    """Appends one at a time: each must see the previous one's hash. SQLite's transactions
    already hold the write lock from their start (``transaction_mode`` IMMEDIATE)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK])


def record(
    action: str,
    actor=None,
    *,
    dataset: Dataset | None = None,
    request: ReleaseRequest | None = None,
    **detail: Any,
) -> AuditEvent:
    if request is not None and dataset is None:
        dataset = request.dataset
    with transaction.atomic():
        _lock_chain()
        prev = AuditEvent.objects.order_by("-id").values_list("hash", flat=True).first() or ""
        created_at = timezone.now()
        dataset_ref = dataset.pk if dataset is not None else None
        request_ref = request.pk if request is not None else None
        actor_id = actor.pk if actor is not None else None
        return AuditEvent.objects.create(
            action=action,
            actor=actor,
            dataset=dataset,
            request=request,
            detail=detail,
            created_at=created_at,
            dataset_ref=dataset_ref,
            request_ref=request_ref,
            prev_hash=prev,
            hash=event_digest(prev, created_at, actor_id, action, dataset_ref, request_ref, detail),
        )


@dataclass(frozen=True)
class BrokenLink:
    """Where the chain breaks: the event, and what is wrong with it."""

    event_id: int
    problem: str


def in_batches(events: QuerySet[AuditEvent], batch: int) -> Iterator[list[AuditEvent]]:
    """``events`` in the log's order, ``batch`` at a time (by id, so memory stays bounded
    however long the log is)."""
    last = 0
    while True:
        rows = list(events.filter(id__gt=last).order_by("id")[:batch])
        if not rows:
            return
        yield rows
        last = rows[-1].pk


def verify_chain(batch: int = 5000) -> tuple[int, BrokenLink | None]:
    """Walk the log in order, a batch at a time (bounded memory): the number of events checked
    and the first broken link, or None."""
    checked = 0
    prev = ""
    prev_id: int | None = None
    for rows in in_batches(AuditEvent.objects.all(), batch):
        for event in rows:
            if event.prev_hash != prev:
                where = "the first event" if prev_id is None else f"event #{prev_id}"
                return checked, BrokenLink(
                    event.pk,
                    f"event #{event.pk} does not follow {where}: an event between them was "
                    "deleted or inserted, or the earlier one was changed",
                )
            expected = event_digest(
                event.prev_hash,
                event.created_at,
                event.actor_id,
                event.action,
                event.dataset_ref,
                event.request_ref,
                event.detail,
            )
            if event.hash != expected:
                return checked, BrokenLink(
                    event.pk, f"event #{event.pk} was changed after it was written"
                )
            checked += 1
            prev, prev_id = event.hash, event.pk
    return checked, None


def events_for_request(release_request: ReleaseRequest) -> QuerySet[AuditEvent]:
    """The request's own events and its dataset's upload and tagging before it was made."""
    return (
        AuditEvent.objects.filter(
            Q(request=release_request)
            | Q(
                dataset=release_request.dataset_id,
                request__isnull=True,
                created_at__lte=release_request.created_at,
            )
        )
        .select_related("actor")
        .order_by("created_at", "id")
    )
