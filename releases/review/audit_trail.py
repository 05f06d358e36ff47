"""The audit trail for the privacy officers and auditors: every event of the log in a date range
(and of one dataset, if asked), a page at a time, and its export as CSV or JSON, streamed a
batch at a time, with each event's chain hashes so that an auditor can check the chain
(``manage.py verify_audit`` does it on the database)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

import pandas as pd
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.utils import timezone

from releases.core import audit, roles
from releases.engine.export import neutralise_formulas
from releases.models import AuditEvent

#: Events per page of the trail.
PER_PAGE = 50
#: Events read per query of an export (its memory does not grow with the log).
EXPORT_BATCH = 2000
#: The columns of an export, in order.
COLUMNS = (
    "id",
    "created_at",
    "actor",
    "action",
    "action_label",
    "dataset",
    "request",
    "detail",
    "prev_hash",
    "hash",
)


@dataclass(frozen=True)
class TrailFilter:
    """Which events: from ``since`` to ``until`` (whole days, in the site's time zone) and of
    one dataset (its number, kept even once the dataset is deleted)."""

    since: date | None = None
    until: date | None = None
    dataset: int | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "dataset": self.dataset,
        }


def can_see_trail(user) -> bool:
    return bool(user and user.is_authenticated and roles.is_officer(user))


def check_see_trail(user) -> None:
    if not can_see_trail(user):
        raise PermissionDenied("Only privacy officers see and export the audit trail.")


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def events(chosen: TrailFilter) -> QuerySet[AuditEvent]:
    found = AuditEvent.objects.select_related("actor")
    if chosen.since:
        found = found.filter(created_at__gte=_start_of(chosen.since))
    if chosen.until:
        found = found.filter(created_at__lt=_start_of(chosen.until + timedelta(days=1)))
    if chosen.dataset is not None:
        found = found.filter(dataset_ref=chosen.dataset)
    return found


def trail_page(user, chosen: TrailFilter, page_number=None) -> Page:
    """One page of the trail, newest first."""
    check_see_trail(user)
    paginator = Paginator(events(chosen).order_by("-id"), PER_PAGE)
    return paginator.get_page(page_number)


def _row(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": event.pk,
        "created_at": event.created_at.isoformat(),
        "actor": event.actor_name,
        "action": event.action,
        "action_label": event.get_action_display(),
        "dataset": event.dataset_ref,
        "request": event.request_ref,
        "detail": event.detail,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }


def _batches(chosen: TrailFilter) -> Iterator[list[dict[str, Any]]]:
    for batch in audit.in_batches(events(chosen), EXPORT_BATCH):
        yield [_row(e) for e in batch]


def csv_chunks(chosen: TrailFilter) -> Iterator[bytes]:
    """The export as CSV (UTF-8, a header line; the detail as JSON text), cells that a
    spreadsheet would run as formulas neutralised."""
    yield (",".join(COLUMNS) + "\n").encode("utf-8")
    for batch in _batches(chosen):
        frame = pd.DataFrame(
            [
                {
                    **row,
                    "detail": json.dumps(row["detail"], ensure_ascii=False, sort_keys=True),
                }
                for row in batch
            ],
            columns=list(COLUMNS),
        ).astype(str)
        buffer = io.StringIO()
        neutralise_formulas(frame).to_csv(buffer, index=False, header=False, lineterminator="\n")
        yield buffer.getvalue().encode("utf-8")


def json_chunks(chosen: TrailFilter) -> Iterator[bytes]:
    """The export as one JSON document: the filter and the events, oldest first."""
    yield (f'{{"filter": {json.dumps(chosen.describe())}, "events": [').encode()
    first = True
    for batch in _batches(chosen):
        for row in batch:
            yield (("" if first else ",") + "\n" + json.dumps(row, ensure_ascii=False)).encode()
            first = False
    yield b"\n]}\n"
