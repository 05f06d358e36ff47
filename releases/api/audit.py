"""The audit trail over the API: a request's activity as its page shows it to the caller (the
whole of it for officers and the requester, a recipient's own part), filterable by date."""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest
from ninja import Query, Router

from releases.api.common import ERRORS, page, user_of
from releases.api.problems import Problem
from releases.api.schemas import EventPage, PageParams
from releases.models import AuditEvent
from releases.requests import rules
from releases.requests import selectors as request_selectors
from releases.review import selectors

router = Router(tags=["audit"])


def event_out(event: AuditEvent) -> dict:
    return {
        "id": event.pk,
        "created_at": event.created_at,
        "actor": event.actor_name,
        "action": event.action,
        "action_label": event.get_action_display(),
        "request_id": event.request_id,
        "dataset_id": event.dataset_id,
        "detail": event.detail,
    }


@router.get("/requests/{request_id}/audit", response={200: EventPage, ERRORS: Problem})
def request_audit(
    request: HttpRequest,
    request_id: int,
    params: Query[PageParams],
    since: datetime | None = None,
    until: datetime | None = None,
):
    """The request's activity, newest first; ``since`` and ``until`` bound it by date."""
    user = user_of(request)
    release_request = request_selectors.get_request_for(user, request_id)
    if rules.can_see_original(user, release_request):
        events = selectors.timeline_events(user, release_request)
    else:
        events = selectors.recipient_events(user, release_request)
    if since is not None:
        events = events.filter(created_at__gte=since)
    if until is not None:
        events = events.filter(created_at__lte=until)
    return page(events, params, event_out)
