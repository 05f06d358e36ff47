"""The release report: one dictionary, shown as a page (printable to PDF) and downloaded as JSON.

One builder for every kind of release: the parts every release has (the release's facts, the
files and their SHA-256, approvals, terms, reviews) are made here, and the request's kind
(``requests.kinds``) supplies its own sections and compliance checklist (an extract's columns,
privacy models, suppression, utility and risk; a statistics release's methods note and
budget).

Two audiences. Recipients get facts about the release only. Officers and the requesting
steward also get what was computed on the original (the kind says what), the checks, every
review with its comment, the recipients and who accepted the terms.
"""

from __future__ import annotations

from django.utils import timezone

from releases.models import ReleaseRequest
from releases.requests import kinds, package, rules
from releases.requests.kinds import RECIPIENT, REVIEWER, iso
from releases.requests.selectors import (
    current_approvals,
    filename_stem,
    recipient_names,
    round_files,
)

REPORT_VERSION = 2


def audience_of(user, release_request: ReleaseRequest) -> str:
    return REVIEWER if rules.can_see_original(user, release_request) else RECIPIENT


def _release(release_request: ReleaseRequest) -> dict:
    released = release_request.state in ReleaseRequest.RELEASED_STATES
    return {
        "id": release_request.pk,
        "round": release_request.round,
        "state": release_request.effective_state,
        "state_label": release_request.effective_state_label,
        "requested_by": release_request.requested_by.get_username(),
        "submitted_at": iso(release_request.submitted_at),
        "approved_at": iso(release_request.decided_at) if released else None,
        "expires_at": iso(release_request.expires_at),
        "revoked": {
            "at": iso(release_request.revoked_at),
            "by": release_request.revoked_by.get_username() if release_request.revoked_by else None,
            "reason": release_request.revocation_reason,
        }
        if release_request.revoked_at
        else None,
    }


def build(release_request: ReleaseRequest, audience: str) -> dict:
    """The report of the request's current round for ``audience`` (RECIPIENT or REVIEWER)."""
    kind = kinds.of(release_request)
    files = round_files(release_request)
    approvals = list(current_approvals(release_request))
    stem = filename_stem(release_request)
    listed = [
        {
            "format": f.format,
            "filename": f"{stem}{package.SUFFIXES[f.format]}",
            "sha256": f.sha256,
            "size_bytes": f.size_bytes,
        }
        for f in files
    ]
    report: dict = {
        "report_version": REPORT_VERSION,
        **kind.report_header(),
        "generated_at": timezone.now().isoformat(),
        "audience": audience,
        "release": _release(release_request),
        **kind.report_body(release_request, audience, listed),
        "approvals": [
            {"by": r.reviewer.get_username(), "at": iso(r.created_at)} for r in approvals
        ],
        "terms": {
            "text": release_request.terms,
            "sha256": release_request.terms_sha256,
        },
        "compliance": kind.compliance(release_request, files, approvals),
    }
    if audience == REVIEWER:
        kind.add_reviewer_detail(report, release_request)
        report["checks"] = [
            {"name": c.name, "passed": c.passed, "detail": c.detail}
            # A report travels: what only officers see on the page stays there.
            for c in (kind.checks_for(None, release_request) if release_request.summary else [])
        ]
        report["reviews"] = [
            {
                "round": r.round,
                "by": r.reviewer.get_username(),
                "decision": r.decision,
                "comment": r.comment,
                "package_sha256": r.package_sha256,
                "at": iso(r.created_at),
                **(
                    {"accepted_checks": list(r.accepted_checks), "justification": r.justification}
                    if r.justification
                    else {}
                ),
            }
            for r in release_request.reviews.select_related("reviewer").order_by(
                "round", "created_at", "id"
            )
            if r.round < release_request.round
            or release_request.state != ReleaseRequest.State.READY
        ]
        report["recipients"] = recipient_names(release_request)
        report["terms"]["accepted_by"] = [
            {"user": a.user.get_username(), "at": iso(a.accepted_at)}
            for a in release_request.terms_acceptances.select_related("user").filter(
                terms_sha256=release_request.terms_sha256
            )
        ]
        report.update(kind.reviewer_tail(release_request))
    return report


__all__ = ["RECIPIENT", "REVIEWER", "audience_of", "build"]
