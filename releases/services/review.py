"""Reviewing release requests: the checks, the votes, and the decision e-mails.

A round is decided by independent reviews. Each review is bound to the package digest (the
SHA-256 over every downloadable file) it saw; an approval counts only while the package is
still those bytes, and approving re-reads every file to check it. One "reject" ends the
request; one "request changes" hands it back to the requester; ``REQUIRED_APPROVALS``
approvals from different officers approve it. Who may vote, and when, is the lifecycle's
(``services.lifecycle``); nobody reviews their own request.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.engine import Check
from releases.engine import checks as criteria_checks
from releases.models import AuditEvent, ReleaseRequest, Review, Role
from releases.services import budget, dispatch, lifecycle, package, sharing

logger = logging.getLogger(__name__)

State = ReleaseRequest.State
Decision = Review.Decision
#: A column released unchanged on which more than this share of rows is unique looks
#: identifying: the check fails and the release cannot be approved.
UNCHANGED_UNIQUE_ROWS_LIMIT = 0.5


def required_approvals() -> int:
    return max(1, int(getattr(settings, "REQUIRED_APPROVALS", 1)))


# --- Checks a result must pass before it can be approved ----------------------------------------


def checks(release_request: ReleaseRequest) -> list[Check]:
    """What the stored result must satisfy to be approved: each privacy model's check lines
    and the suppression limit (the engine's, from the stored figures), then the app's own:
    the model run is the one requested, the columns released unchanged, every equivalence
    class, the package's files."""
    if release_request.kind == ReleaseRequest.Kind.STATISTICS:
        from releases.services.statistics import checks as statistics_checks

        return statistics_checks(release_request)
    summary = release_request.summary or {}
    if not summary:
        return [Check("result", False, "There is no result to check.")]
    out = [_as_requested(release_request, summary)]
    if "models" in summary:
        out.extend(criteria_checks(summary))
    else:
        out.append(
            Check(
                "privacy models",
                False,
                "this result was stored without its models' figures; resubmit it",
            )
        )
    out.append(unchanged_check(summary))
    # Counted by the run as it stored the classes; results from before that are counted here
    # (a JSON test on every class: slow at 100,000 classes).
    failing_classes = summary.get("failing_classes")
    if failing_classes is None:
        failing_classes = release_request.classes.exclude(fails=[]).count()
    out.append(
        Check(
            "every equivalence class",
            failing_classes == 0,
            f"{failing_classes} classes fail a model" if failing_classes else "all pass",
        )
    )
    out.append(files_check(release_request))
    return out


def _as_requested(release_request: ReleaseRequest, summary: dict) -> Check:
    """The figures are those of the model the round asked for (not of another one)."""
    requested = (release_request.parameters or {}).get("model") or {}
    ran = summary.get("privacy_model") or {}
    if "models" in summary and ran != requested:
        return Check(
            "privacy model as requested",
            False,
            f"the result was computed for {summary.get('description') or 'another model'}, "
            f"not for {release_request.model_description}",
        )
    return Check("privacy model as requested", True, release_request.model_description)


def files_check(release_request: ReleaseRequest) -> Check:
    """The round's files are recorded and the package digest is theirs (approving re-reads
    every file's bytes as well: :func:`verify_package`)."""
    files = list(release_request.files.filter(round=release_request.round))
    if not files:
        return Check("package files", False, "no file is stored for this round")
    digest = package.package_digest({f.format: f.sha256 for f in files})
    if digest != release_request.package_sha256:
        return Check("package files", False, "the files do not match the package digest")
    names = ", ".join(f.get_format_display() for f in files)
    return Check("package files", True, f"{names}; package digest matches")


def unchanged_check(summary: dict) -> Check:
    """Columns released with their values unchanged must not look identifying."""
    unchanged = summary.get("unchanged")
    if unchanged is None:
        return Check(
            "columns released unchanged",
            False,
            "not measured for this round; resubmit it to measure them",
        )
    problems = []
    for column in unchanged:
        if column["unique_row_share"] > UNCHANGED_UNIQUE_ROWS_LIMIT:
            problems.append(
                f"{column['name']}: {column['unique_row_share']:.0%} of rows are unique on it "
                f"alone (at most {UNCHANGED_UNIQUE_ROWS_LIMIT:.0%})"
            )
        if column["suggested_role"] == Role.IDENTIFIER and not column.get("justification"):
            problems.append(f"{column['name']}: looks like a direct identifier, not justified")
    if problems:
        return Check("columns released unchanged", False, "; ".join(problems))
    if not unchanged:
        return Check("columns released unchanged", True, "no column is released unchanged")
    names = ", ".join(c["name"] for c in unchanged)
    return Check("columns released unchanged", True, f"{names}: none looks identifying")


# --- Votes -----------------------------------------------------------------------------------


def review(
    user,
    request_id: int,
    decision: str,
    comment: str = "",
    additions: sharing.Additions | None = None,
) -> ReleaseRequest:
    """Record one officer's decision on the current round and move the request on.

    An approving officer may name more recipients and set an expiry date (``additions``)."""
    comment = (comment or "").strip()
    if decision not in Decision.values:
        raise InvalidInput(f"Unknown decision {decision!r}.")
    action = lifecycle.DECISION_ACTIONS[decision]
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
            transition = lifecycle.check(action, user, release_request)
            if decision != Decision.APPROVE and not comment:
                raise InvalidInput("Give a comment when you request changes or reject.")
            if decision == Decision.APPROVE:
                verify_package(release_request)
                if additions is not None:
                    sharing.add(user, release_request, additions)
            vote = Review.objects.create(
                request=release_request,
                round=release_request.round,
                reviewer=user,
                decision=decision,
                comment=comment,
                extract_sha256=release_request.extract_sha256,
                package_sha256=release_request.package_sha256,
            )
            new_state = _outcome(release_request, decision, transition)
            if new_state != release_request.state:
                release_request.state = new_state
                release_request.decided_at = timezone.now()
                release_request.save(update_fields=["state", "decided_at"])
                if new_state == State.APPROVED:
                    _record_in_ledger(release_request, user)
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
            )
            # The e-mail goes out from the worker: a slow mail server never slows the review.
            dispatch.enqueue("releases.notify_requester", vote.pk)
    except IntegrityError:
        # Only the one-vote-per-round constraint means "already reviewed": a second vote racing
        # in from the same reviewer. Any other integrity error is a fault and is raised.
        if _voted_on_current_round(user, request_id):
            raise InvalidInput("You have already reviewed this round.") from None
        raise
    return release_request


def _record_in_ledger(release_request: ReleaseRequest, officer) -> None:
    """An approved extract goes in its dataset's privacy ledger, outside the DP budget, so the
    officers see row-level and differentially private releases of the dataset together."""
    if release_request.kind != ReleaseRequest.Kind.EXTRACT:
        return  # a statistics release is in the ledger already: its spend
    budget.record_row_level_release(
        release_request.dataset,
        release_request.requested_by,
        release_request=release_request,
        detail={
            "round": release_request.round,
            "model": release_request.model_description,
            "rows": (release_request.summary or {}).get("rows_out"),
            "approved_by": officer.get_username(),
        },
    )


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


def _outcome(release_request: ReleaseRequest, decision: str, transition) -> str:
    if decision != Decision.APPROVE:
        return transition.target
    # Only approvals of this round, of these exact bytes, count.
    approvals = release_request.reviews.filter(
        round=release_request.round,
        decision=Decision.APPROVE,
        package_sha256=release_request.package_sha256,
    ).count()
    if approvals >= required_approvals():
        return transition.target
    return lifecycle.PARTIAL_APPROVAL_TARGET


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
