"""The audit trail for the privacy officers, project admins and auditors: the events of their
projects in a date range (and of one project or dataset, if asked), a page at a time, and its export as CSV or JSON, streamed a
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
from django.db.models import Q, QuerySet
from django.utils import timezone

from releases.core import audit, roles
from releases.core.errors import InvalidInput
from releases.engine.export import neutralise_formulas
from releases.models import AuditEvent, Project

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
    """Which events: from ``since`` to ``until`` (whole days, in the site's time zone), of one
    dataset (its number, kept even once the dataset is deleted) and of one project (its short
    name)."""

    since: date | None = None
    until: date | None = None
    dataset: int | None = None
    project: str | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "dataset": self.dataset,
            "project": self.project,
        }


def trail_projects(user) -> set[int] | None:
    """The projects whose events ``user`` sees: those where they are an officer or an admin;
    None (every event, also those of no project) for a site administrator."""
    if roles.is_site_admin(user):
        return None
    return roles.projects_where(user, roles.OFFICER) | roles.projects_where(user, roles.ADMIN)


def can_see_trail(user) -> bool:
    if not (user and user.is_authenticated):
        return False
    return roles.is_site_admin(user) or bool(trail_projects(user))


def check_see_trail(user) -> None:
    if not can_see_trail(user):
        raise PermissionDenied(
            "Only privacy officers and project admins see and export the audit trail."
        )


def _of_projects(ids) -> Q:
    """Events about a dataset of these projects, or about the projects themselves."""
    return Q(dataset__project__in=ids) | Q(detail__project_id__in=list(ids))


def scoped(user, chosen: TrailFilter) -> QuerySet[AuditEvent]:
    """The chosen events among those ``user`` may see; an unknown project is refused."""
    check_see_trail(user)
    found = events(chosen)
    if chosen.project:
        project = Project.objects.filter(slug=chosen.project).first()
        if project is None:
            raise InvalidInput(f"No such project: {chosen.project}.")
        found = found.filter(_of_projects([project.pk]))
    allowed = trail_projects(user)
    if allowed is not None:
        found = found.filter(_of_projects(allowed))
    return found


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
    paginator = Paginator(scoped(user, chosen).order_by("-id"), PER_PAGE)
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


def _batches(found: QuerySet[AuditEvent]) -> Iterator[list[dict[str, Any]]]:
    for batch in audit.in_batches(found, EXPORT_BATCH):
        yield [_row(e) for e in batch]


def csv_chunks(found: QuerySet[AuditEvent]) -> Iterator[bytes]:
    """The export as CSV (UTF-8, a header line; the detail as JSON text), cells that a
    spreadsheet would run as formulas neutralised."""
    yield (",".join(COLUMNS) + "\n").encode("utf-8")
    for batch in _batches(found):
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


def json_chunks(chosen: TrailFilter, found: QuerySet[AuditEvent]) -> Iterator[bytes]:
    """The export as one JSON document: the filter and the events, oldest first."""
    yield (f'{{"filter": {json.dumps(chosen.describe())}, "events": [').encode()
    first = True
    for batch in _batches(found):
        for row in batch:
            yield (("" if first else ",") + "\n" + json.dumps(row, ensure_ascii=False)).encode()
            first = False
    yield b"\n]}\n"
