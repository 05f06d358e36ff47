"""Reviewing release requests: the checks, the votes, who sees which vote, and the queue.

A round is decided by independent reviews. Each review is bound to the SHA-256 of the extract
it saw; an approval counts only while the extract is still those bytes. One "reject" ends the
request; one "request changes" hands it back to the requester; ``REQUIRED_APPROVALS``
approvals from different officers approve it. Nobody reviews their own request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.core.paginator import Page, Paginator
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from ..models import AuditEvent, EquivalenceClass, ReleaseRequest, Review
from . import InvalidInput, audit, dispatch, roles, storage

logger = logging.getLogger(__name__)

State = ReleaseRequest.State
Decision = Review.Decision
CLASSES_PER_PAGE = 25

#: The review state machine: which decision moves a request from which state.
#: An approval below the required count leaves the request ready for review.
TRANSITIONS: dict[tuple[str, str], str] = {
    (State.READY, Decision.APPROVE): State.APPROVED,
    (State.READY, Decision.CHANGES): State.CHANGES_REQUESTED,
    (State.READY, Decision.REJECT): State.REJECTED,
}


def required_approvals() -> int:
    return max(1, int(getattr(settings, "REQUIRED_APPROVALS", 1)))


# --- Checks a result must pass before it can be approved ----------------------------------------


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def checks(release_request: ReleaseRequest) -> list[Check]:
    """What the stored result must satisfy: the requested models and the suppression limit."""
    summary = release_request.summary or {}
    if not summary:
        return [Check("result", False, "There is no result to check.")]
    achieved = summary.get("achieved", {})
    out = [
        Check(
            "k-anonymity",
            (achieved.get("k") or 0) >= release_request.k,
            f"smallest class {achieved.get('k')}, k requested {release_request.k}",
        )
    ]
    allowed = int(release_request.suppression_limit * summary.get("rows_in", 0) + 1e-9)
    out.append(
        Check(
            "suppression limit",
            summary.get("suppressed", 0) <= allowed,
            f"{summary.get('suppressed', 0)} rows suppressed, at most {allowed} allowed",
        )
    )
    if release_request.l_diversity is not None:
        for name, value in (achieved.get("l") or {}).items():
            # None stands for an unbounded entropy l (every class holds one value only once).
            passed = value is None or value + 1e-9 >= release_request.l_diversity
            out.append(
                Check(
                    f"{release_request.l_variant} l-diversity of {name}",
                    passed,
                    f"lowest l {value if value is not None else '∞'}, "
                    f"l requested {release_request.l_diversity:g}",
                )
            )
    if release_request.t_closeness is not None:
        for name, value in (achieved.get("t") or {}).items():
            out.append(
                Check(
                    f"t-closeness of {name}",
                    value <= release_request.t_closeness + 1e-9,
                    f"largest distance {value:.4f}, t requested {release_request.t_closeness:g}",
                )
            )
    failing_classes = release_request.classes.exclude(fails=[]).count()
    out.append(
        Check(
            "every equivalence class",
            failing_classes == 0,
            f"{failing_classes} classes fail a model" if failing_classes else "all pass",
        )
    )
    return out


# --- Votes -----------------------------------------------------------------------------------


def review(user, request_id: int, decision: str, comment: str = "") -> ReleaseRequest:
    """Record one officer's decision on the current round and move the request on."""
    roles.require(user, roles.OFFICERS, "review release requests")
    comment = (comment or "").strip()
    if decision not in Decision.values:
        raise InvalidInput(f"Unknown decision {decision!r}.")
    if decision != Decision.APPROVE and not comment:
        raise InvalidInput("Give a comment when you request changes or reject.")
    try:
        with transaction.atomic():
            # The row lock serialises concurrent decisions on one request.
            try:
                release_request = ReleaseRequest.objects.select_for_update().get(pk=request_id)
            except ReleaseRequest.DoesNotExist:
                raise Http404("No such release request.") from None
            if release_request.requested_by_id == user.pk:
                raise PermissionDenied("Nobody can review a release they requested themselves.")
            if release_request.state != State.READY:
                raise InvalidInput(
                    f"This request is {release_request.get_state_display().lower()}; only a "
                    "request that is ready for review can be decided."
                )
            if release_request.reviews.filter(round=release_request.round, reviewer=user).exists():
                raise InvalidInput("You have already reviewed this round.")
            if decision == Decision.APPROVE:
                failed = [c for c in checks(release_request) if not c.passed]
                if failed:
                    raise InvalidInput(
                        "This result cannot be approved: its checks did not pass ("
                        + "; ".join(f"{c.name}: {c.detail}" for c in failed)
                        + ")."
                    )
                _verify_extract(release_request)
            vote = Review.objects.create(
                request=release_request,
                round=release_request.round,
                reviewer=user,
                decision=decision,
                comment=comment,
                extract_sha256=release_request.extract_sha256,
            )
            new_state = _outcome(release_request, decision)
            if new_state != release_request.state:
                release_request.state = new_state
                release_request.decided_at = timezone.now()
                release_request.save(update_fields=["state", "decided_at"])
            audit.record(
                AuditEvent.Action.REVIEW,
                user,
                request=release_request,
                round=release_request.round,
                decision=decision,
                comment=comment,
                sha256=release_request.extract_sha256,
                outcome=new_state,
            )
            # The e-mail goes out from the worker: a slow mail server never slows the review.
            dispatch.enqueue("releases.notify_requester", vote.pk)
    except IntegrityError:
        # The unique constraint caught a second vote racing in from the same reviewer.
        raise InvalidInput("You have already reviewed this round.") from None
    return release_request


def _verify_extract(release_request: ReleaseRequest) -> None:
    content = storage.read_bytes(release_request.extract_path)
    if storage.sha256_hex(content) != release_request.extract_sha256:
        raise InvalidInput("The stored extract no longer matches the reviewed bytes.")


def _outcome(release_request: ReleaseRequest, decision: str) -> str:
    if decision != Decision.APPROVE:
        return TRANSITIONS[(release_request.state, decision)]
    # Only approvals of this round, of these exact bytes, count.
    approvals = release_request.reviews.filter(
        round=release_request.round,
        decision=Decision.APPROVE,
        extract_sha256=release_request.extract_sha256,
    ).count()
    if approvals >= required_approvals():
        return TRANSITIONS[(release_request.state, decision)]
    return release_request.state


def notify_requester(review_id: int) -> None:
    """E-mail the requester about a decision on their request."""
    vote = Review.objects.select_related("request__requested_by", "reviewer").get(pk=review_id)
    release_request = vote.request
    recipient = release_request.requested_by.email
    if not recipient:
        return
    lines = [
        f"{vote.reviewer.get_username()} {vote.get_decision_display().lower()} round "
        f"{vote.round} of your release request #{release_request.pk} "
        f"({release_request.dataset.name}).",
        f"The request is now: {release_request.get_state_display().lower()}.",
    ]
    if vote.comment:
        lines += ["", "Comment:", vote.comment]
    link = settings.SITE_URL + reverse("releases:request_detail", args=[release_request.pk])
    lines += ["", f"See {link}"]
    try:
        send_mail(
            f"Release request #{release_request.pk}: {vote.get_decision_display().lower()}",
            "\n".join(lines),
            None,
            [recipient],
        )
    except OSError:
        logger.exception("Could not e-mail %s about request %s", recipient, release_request.pk)


# --- Who sees which vote --------------------------------------------------------------------------


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


def timeline_for(user, release_request: ReleaseRequest) -> list[AuditEvent]:
    """The request's activity, without the open round's votes for a user who may not see them."""
    events = list(audit.events_for_request(release_request))
    if votes_hidden_from(user, release_request):
        events = [
            e
            for e in events
            if not (
                e.action == AuditEvent.Action.REVIEW
                and e.detail.get("round") == release_request.round
            )
        ]
    return events


def can_review(user, release_request: ReleaseRequest) -> bool:
    return (
        roles.is_officer(user)
        and release_request.state == State.READY
        and release_request.requested_by_id != user.pk
        and not release_request.reviews.filter(
            round=release_request.round, reviewer_id=user.pk
        ).exists()
    )


def approvals_so_far(release_request: ReleaseRequest) -> int:
    return release_request.reviews.filter(
        round=release_request.round,
        decision=Decision.APPROVE,
        extract_sha256=release_request.extract_sha256,
    ).count()


# --- The queue ---------------------------------------------------------------------------------

QUEUE_FILTERS = {
    "ready": Q(state=State.READY),
    "changes": Q(state=State.CHANGES_REQUESTED),
    "running": Q(state__in=[State.QUEUED, State.RUNNING]),
    "approved": Q(state=State.APPROVED),
    "rejected": Q(state=State.REJECTED),
    "failed": Q(state=State.FAILED),
    "all": Q(),
}


def review_queue(user, state: str = "ready") -> QuerySet[ReleaseRequest]:
    """Requests for officers, oldest first, with the officer's own vote on the current round."""
    roles.require(user, roles.OFFICERS, "review release requests")
    condition = QUEUE_FILTERS.get(state, QUEUE_FILTERS["ready"])
    mine = Review.objects.filter(request=OuterRef("pk"), round=OuterRef("round"), reviewer=user)
    return (
        ReleaseRequest.objects.filter(condition)
        .select_related("dataset", "requested_by")
        .annotate(
            voted=Exists(mine),
            rounds_count=Count("rounds", distinct=True),
        )
        .order_by("submitted_at", "id")
    )


def waiting_count(user) -> int:
    """Requests ready for review that this officer can still vote on."""
    return review_queue(user, "ready").exclude(requested_by=user).filter(voted=False).count()


# --- Equivalence classes for the review page -----------------------------------------------------

CLASS_ORDERINGS = {
    "size": ("size", "id"),
    "-size": ("-size", "id"),
    "risk": ("-risk", "id"),
    "flagged": ("-flagged", "size", "id"),
}


def classes_page(
    release_request: ReleaseRequest,
    page_number,
    order: str = "size",
    attribute: str = "",
    value: str = "",
) -> Page:
    """Equivalence classes sorted and filtered for the table (smallest first by default)."""
    classes: QuerySet[EquivalenceClass] = release_request.classes.all()
    qis = [q["name"] for q in release_request.config.get("quasi_identifiers", [])]
    if attribute in qis and value:
        classes = classes.filter(**{f"values__{attribute}": value})
    if order == "flagged":
        classes = classes.annotate(flagged=Count("id", filter=~Q(fails=[]) | ~Q(borderline=[])))
    ordering = CLASS_ORDERINGS.get(order, CLASS_ORDERINGS["size"])
    return Paginator(classes.order_by(*ordering), CLASSES_PER_PAGE).get_page(page_number)
