"""Reviewing release requests: the votes, the decision e-mails, and the release report's checks
before it is shown or downloaded.

A round is decided by independent reviews. Each review is bound to the package digest (the
SHA-256 over every downloadable file) it saw; an approval counts only while the package is
still those bytes, and approving re-reads every file to check it. One "reject" ends the
request; one "request changes" hands it back to the requester; ``REQUIRED_APPROVALS``
approvals from different officers approve it. Who may vote, and when, is the lifecycle's
(``requests.rules``); nobody reviews their own request.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from releases.background import outbox
from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.engine import Check
from releases.events import emit
from releases.events.selectors import delivery_of
from releases.models import (
    AuditEvent,
    Notification,
    NotificationPreference,
    ReleaseRequest,
    Review,
)
from releases.requests import downloads, kinds, package, rules
from releases.requests import services as requests
from releases.requests.selectors import filename_stem, get_request_for, round_files
from releases.review import audit_trail, report
from releases.review.rules import required_approvals

logger = logging.getLogger(__name__)

State = ReleaseRequest.State
Decision = Review.Decision


IMMEDIATELY = NotificationPreference.Delivery.IMMEDIATELY
DECIDED = Notification.Kind.REQUEST_DECIDED

#: The task that e-mails the requester a decision.
NOTIFY_TASK = "releases.notify_requester"


def checks(release_request: ReleaseRequest) -> list[Check]:
    """What the round's stored result must satisfy before it can be approved (its kind's)."""
    return kinds.of(release_request).checks(release_request)


# --- Votes -----------------------------------------------------------------------------------


def review(
    user,
    request_id: int,
    decision: str,
    comment: str = "",
    additions: requests.Additions | None = None,
    justification: str = "",
) -> ReleaseRequest:
    """Record one officer's decision on the current round and move the request on.

    An approving officer may name more recipients and set an expiry date (``additions``). A
    failing check the request's kind lets an officer accept (the cross-release check) blocks
    the approval unless ``justification`` says in writing why it is accepted."""
    comment = (comment or "").strip()
    justification = (justification or "").strip()
    if decision not in Decision.values:
        raise InvalidInput(f"Unknown decision {decision!r}.")
    action = rules.DECISION_ACTIONS[decision]
    try:
        with transaction.atomic():
            # The row lock serialises concurrent decisions on one request.
            try:
                release_request = (
                    ReleaseRequest.objects.select_for_update()
                    .select_related("dataset")
                    .get(pk=request_id)
                )
            except ReleaseRequest.DoesNotExist:
                raise Http404("No such release request.") from None
            rules.check(action, user, release_request)
            if decision != Decision.APPROVE and not comment:
                raise InvalidInput("Give a comment when you request changes or reject.")
            accepted: list[Check] = []
            if decision == Decision.APPROVE:
                accepted = rules.checks_to_accept(release_request)
                if accepted and not justification:
                    raise InvalidInput(
                        "This result fails "
                        + "; ".join(f"{c.name}: {c.detail}" for c in accepted)
                        + ". Approve it only with a written justification of why you accept it."
                    )
                verify_package(release_request)
                if additions is not None:
                    requests.add(user, release_request, additions)
            vote = Review.objects.create(
                request=release_request,
                round=release_request.round,
                reviewer=user,
                decision=decision,
                comment=comment,
                extract_sha256=release_request.extract_sha256,
                package_sha256=release_request.package_sha256,
                accepted_checks=[c.name for c in accepted],
                justification=justification if accepted else "",
            )
            new_state = _outcome(release_request, decision, action)
            if new_state != release_request.state:
                was = release_request.state
                release_request.state = new_state
                release_request.decided_at = timezone.now()
                release_request.save(update_fields=["state", "decided_at"])
                if new_state == State.APPROVED and release_request.expires_at is None:
                    _default_expiry(release_request)
                if new_state == State.APPROVED:
                    kinds.of(release_request).on_approved(release_request, user)
                emit.transition(release_request, was, new_state)
            audit.record(
                AuditEvent.Action.REVIEW,
                user,
                request=release_request,
                round=release_request.round,
                decision=decision,
                comment=comment,
                sha256=release_request.extract_sha256,
                package_sha256=release_request.package_sha256,
                outcome=new_state,
                **_acceptance(accepted, justification),
            )
            # The e-mail goes out from the worker: a slow mail server never slows the review.
            outbox.enqueue(NOTIFY_TASK, vote.pk)
    except IntegrityError:
        # Only the one-vote-per-round constraint means "already reviewed": a second vote racing
        # in from the same reviewer. Any other integrity error is a fault and is raised.
        if _voted_on_current_round(user, request_id):
            raise InvalidInput("You have already reviewed this round.") from None
        raise
    return release_request


def _acceptance(accepted: list[Check], justification: str) -> dict[str, Any]:
    """What the audit row of an approval records of the failing checks it accepted."""
    if not accepted:
        return {}
    return {
        "accepted_checks": {c.name: c.detail for c in accepted},
        "justification": justification,
    }


def _voted_on_current_round(user, request_id: int) -> bool:
    current = ReleaseRequest.objects.filter(pk=request_id).values_list("round", flat=True).first()
    return (
        current is not None
        and Review.objects.filter(request_id=request_id, round=current, reviewer=user).exists()
    )


def verify_package(release_request: ReleaseRequest) -> None:
    """Every file of the round is stored and is still the bytes its SHA-256 names, and the
    package digest is theirs (``InvalidInput`` otherwise)."""
    files = list(release_request.files.filter(round=release_request.round))
    if not files:
        raise InvalidInput("This round has no stored files to approve.")
    for stored in files:
        if not storage.exists(stored.path):
            raise InvalidInput(f"The stored {stored.get_format_display()} file is missing.")
        if storage.sha256_of(stored.path) != stored.sha256:
            raise InvalidInput(
                f"The stored {stored.get_format_display()} file no longer matches the reviewed "
                "bytes."
            )
    digest = package.package_digest({f.format: f.sha256 for f in files})
    if digest != release_request.package_sha256:
        raise InvalidInput("The stored files no longer match the reviewed package.")


def _default_expiry(release_request: ReleaseRequest) -> None:
    """A release approved with no expiry date expires after its project's default days."""
    days = release_request.dataset.project.default_expiry_days
    if days:
        release_request.expires_at = timezone.localdate() + datetime.timedelta(days=days)
        release_request.save(update_fields=["expires_at"])


def _outcome(release_request: ReleaseRequest, decision: str, action: str) -> str:
    if decision != Decision.APPROVE:
        return rules.target(release_request.state, action)
    # Only approvals of this round, of these exact bytes, count.
    approvals = release_request.reviews.filter(
        round=release_request.round,
        decision=Decision.APPROVE,
        package_sha256=release_request.package_sha256,
    ).count()
    if approvals >= required_approvals(release_request.dataset.project):
        return rules.target(release_request.state, action)
    return rules.PARTIAL_APPROVAL_TARGET


def notify_requester(review_id: int) -> None:
    """E-mail the requester about a decision on their request, once.

    The claim (``notified_at`` set where it is empty) makes a repeated message a no-op; a
    failed send gives the claim back, and the sweeper sends the message again later."""
    claimed = Review.objects.filter(pk=review_id, notified_at__isnull=True).update(
        notified_at=timezone.now()
    )
    if not claimed:
        return
    vote = Review.objects.select_related("request__requested_by", "reviewer").get(pk=review_id)
    release_request = vote.request
    recipient = release_request.requested_by.email
    if not recipient:
        return
    # This e-mail is the decision's immediate notification: off or in the digest, not here.
    if delivery_of(release_request.requested_by, DECIDED) != IMMEDIATELY:
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
    except Exception:  # the mail server's errors vary: never lose the e-mail for one
        # Not sent: give the claim back so that the e-mail goes out later (recovery.sweep).
        Review.objects.filter(pk=review_id).update(notified_at=None)
        logger.exception("Could not e-mail %s about request %s", recipient, release_request.pk)


# --- The release report ------------------------------------------------------------------------


def verified_report(user, request_id: int) -> tuple[ReleaseRequest, dict]:
    """The release report for ``user``'s audience, once every file has been checked."""
    release_request = get_request_for(user, request_id)
    if not release_request.summary:
        raise Http404("This request has no result yet.")
    files = round_files(release_request)
    if files and not downloads.package_matches(release_request, files):
        downloads.refuse(
            user, release_request, "report", "The files no longer match the approved package.", 409
        )
    for stored in files:
        problem = downloads.problem(stored)
        if problem is not None:
            downloads.refuse(user, release_request, "report", *problem)
    return release_request, report.build(release_request, report.audience_of(user, release_request))


def download_report(user, request_id: int) -> tuple[str, bytes]:
    """(filename, JSON bytes) of the release report; logged."""
    release_request, content = verified_report(user, request_id)
    audit.record(AuditEvent.Action.DOWNLOAD, user, request=release_request, file="report")
    data = json.dumps(content, indent=2, ensure_ascii=False).encode("utf-8")
    return f"{filename_stem(release_request)}-report.json", data


def export_audit_trail(user, chosen, fmt: str):
    """The audit trail as ``fmt`` ("csv" or "json"), for an officer: the export is itself
    audited (who took which part of the log); returns (file name, streamed chunks)."""
    found = audit_trail.scoped(user, chosen)
    if fmt not in ("csv", "json"):
        raise InvalidInput("Export the audit trail as CSV or JSON.")
    with transaction.atomic():
        audit.record(AuditEvent.Action.AUDIT_EXPORT, user, format=fmt, part=chosen.describe())
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    chunks = (
        audit_trail.csv_chunks(found) if fmt == "csv" else audit_trail.json_chunks(chosen, found)
    )
    return f"audit-trail-{stamp}.{fmt}", chunks
