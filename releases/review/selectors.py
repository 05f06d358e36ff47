"""Reads for the review: the officers' queue, the votes a user may see (blind voting), a
request's activity, and the pages of a request (the officers' and requester's workspace, the
recipient's page). Nothing here changes state."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from releases.core import audit, roles
from releases.models import AuditEvent, ReleaseRequest, Review
from releases.requests import kinds, package, rules
from releases.requests.selectors import (
    candidates,
    current_approvals,
    latest_reproduction,
    quasi_identifier_levels,
    recipient_names,
    round_descriptions,
    round_files,
    size_chart,
    smallest_class_allowed,
    stalled,
    status_flags,
    terms_acceptance,
)
from releases.review import report
from releases.review.rules import required_approvals

State = ReleaseRequest.State
Decision = Review.Decision


# --- The review queue ----------------------------------------------------------------------------


QUEUE_FILTERS = {
    "ready": Q(state=State.READY),
    "changes": Q(state=State.CHANGES_REQUESTED),
    "running": Q(state__in=[State.QUEUED, State.RUNNING]),
    "approved": Q(state=State.APPROVED),
    "rejected": Q(state=State.REJECTED),
    "revoked": Q(state=State.REVOKED),
    "expired": Q(state=State.EXPIRED),
    "failed": Q(state__in=[State.FAILED, State.CANCELLED]),
    "all": Q(),
}


def review_queue(user, state: str = "ready") -> QuerySet[Any]:
    """Requests for officers, oldest first, with the officer's own vote on the current round."""
    roles.require(user, roles.OFFICERS, "review release requests")
    condition = QUEUE_FILTERS.get(state, QUEUE_FILTERS["ready"]) & Q(
        dataset__project__in=roles.projects_where(user, roles.OFFICER)
    )
    mine = Review.objects.filter(request=OuterRef("pk"), round=OuterRef("round"), reviewer=user)
    return (
        ReleaseRequest.objects.filter(condition)
        .select_related("dataset", "requested_by")
        .annotate(voted=Exists(mine), rounds_count=Count("rounds", distinct=True))
        .order_by("submitted_at", "id")
    )


def listed_for_revocation(user) -> list[ReleaseRequest]:
    """Approved statistics releases that the re-check at upgrade found breaking the rules on
    the columns and labels a release may publish, for the officers to revoke."""
    roles.require(user, roles.OFFICERS, "review release requests")
    return list(
        ReleaseRequest.objects.filter(
            state=State.APPROVED, dataset__project__in=roles.projects_where(user, roles.OFFICER)
        )
        .exclude(recheck_reason="")
        .select_related("dataset", "requested_by")
        .order_by("rechecked_at", "id")
    )


def waiting_count(user) -> int:
    """Requests ready for review that this officer can still vote on."""
    return review_queue(user, "ready").exclude(requested_by=user).filter(voted=False).count()


# --- Votes a user may see --------------------------------------------------------------------


def votes_hidden_from(user, release_request: ReleaseRequest) -> bool:
    """Blind voting: while a round is open, an officer sees others' votes only after voting."""
    if release_request.state != State.READY:
        return False
    return not release_request.reviews.filter(
        round=release_request.round, reviewer_id=user.pk
    ).exists()


def reviews_for(user, release_request: ReleaseRequest) -> list[Review]:
    reviews = list(release_request.reviews.select_related("reviewer"))
    if votes_hidden_from(user, release_request):
        reviews = [r for r in reviews if r.round != release_request.round]
    return reviews


def approvals_so_far(release_request: ReleaseRequest) -> int:
    """Approvals of this round that count: those of exactly the package now stored."""
    return current_approvals(release_request).count()


# --- A request's activity --------------------------------------------------------------------


#: Events shown per page of a request's activity (newest first).
EVENTS_PER_PAGE = 25


def timeline_events(user, release_request: ReleaseRequest) -> QuerySet[AuditEvent]:
    """The request's activity, newest first, without the open round's votes for a user who may
    not see them (filtered by the database: a release can have thousands of downloads)."""
    events = audit.events_for_request(release_request).order_by("-created_at", "-id")
    if votes_hidden_from(user, release_request):
        events = events.exclude(
            action=AuditEvent.Action.REVIEW, detail__round=release_request.round
        )
    return events


def timeline_for(user, release_request: ReleaseRequest) -> list[AuditEvent]:
    """The whole activity, oldest first (see :func:`timeline_page` for pages)."""
    return list(reversed(timeline_events(user, release_request)))


def timeline_page(user, release_request: ReleaseRequest, page_number=None) -> Page:
    """One page of the request's activity, newest first."""
    return Paginator(timeline_events(user, release_request), EVENTS_PER_PAGE).get_page(page_number)


def recipient_events(user, release_request: ReleaseRequest) -> QuerySet[AuditEvent]:
    """A recipient's own acceptance and downloads, and the release's approval, revocation and
    expiry (never comments, which may quote the original), newest first."""
    Action = AuditEvent.Action
    return (
        AuditEvent.objects.filter(request=release_request)
        .filter(
            Q(action__in=[Action.REVOKE, Action.EXPIRE])
            | Q(action=Action.REVIEW, detail__decision=Decision.APPROVE)
            | Q(action__in=[Action.TERMS_ACCEPTED, Action.DOWNLOAD], actor_id=user.pk)
        )
        .select_related("actor")
        .order_by("-created_at", "-id")
    )


def activity_page(user, release_request: ReleaseRequest, page_number=None) -> Page:
    """The page of activity ``user`` sees: the whole activity for those who see the original,
    their own part of it for a recipient."""
    if rules.can_see_original(user, release_request):
        return timeline_page(user, release_request, page_number)
    return Paginator(recipient_events(user, release_request), EVENTS_PER_PAGE).get_page(page_number)


# --- A request's pages -----------------------------------------------------------------------


def request_page(user, release_request: ReleaseRequest, events_page=None) -> dict:
    """What the officer's and the requesting steward's page shows (the original included)."""
    summary = release_request.summary or {}
    reproduction = latest_reproduction(release_request)
    buttons = rules.buttons(user, release_request)
    kind = kinds.of(release_request)
    return {
        **kind.page(user, release_request),
        "req": release_request,
        **status_flags(release_request),
        "summary": summary,
        "levels": quasi_identifier_levels(release_request, with_examples=True),
        "checks": kind.checks_for(user, release_request) if summary else [],
        "events": timeline_page(user, release_request, events_page),
        "reviews": reviews_for(user, release_request),
        "votes_hidden": votes_hidden_from(user, release_request),
        # Blind voting: not even how many approved, until this user has voted.
        "approvals": None
        if votes_hidden_from(user, release_request)
        else approvals_so_far(release_request),
        "required_approvals": required_approvals(release_request.dataset.project),
        "rounds": round_descriptions(list(release_request.rounds.all())),
        "candidates": candidates(summary),
        "smallest_class": smallest_class_allowed(release_request),
        "size_chart": size_chart(release_request) if summary else None,
        "buttons": buttons,
        "can_review": rules.can_review(user, release_request),
        "own_request": rules.is_requester(user, release_request),
        "files": round_files(release_request),
        "terms_accepted": terms_acceptance(user, release_request),
        "recipients": recipient_names(release_request),
        "reproduction": reproduction,
        "reproduction_stalled": stalled(reproduction) if reproduction else None,
        "xlsx_refusal": summary.get("xlsx_refusal")
        or (package.xlsx_refusal(summary.get("rows_out", 0)) if summary else ""),
    }


def recipient_page(user, release_request: ReleaseRequest, events_page=None) -> dict:
    """What a named recipient's page shows: facts about the extract only."""
    return {
        "req": release_request,
        "report": report.build(release_request, report.RECIPIENT),
        "buttons": rules.buttons(user, release_request),
        "terms_accepted": terms_acceptance(user, release_request),
        "events": activity_page(user, release_request, events_page),
        "files": round_files(release_request),
        "xlsx_refusal": (release_request.summary or {}).get("xlsx_refusal", ""),
    }
