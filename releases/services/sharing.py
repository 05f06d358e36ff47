"""Who receives a release and for how long: recipients named at approval, acceptance of the
terms of use, revocation and expiry. Each change is audited in the same transaction.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.utils import timezone

from releases.core import audit
from releases.core.errors import InvalidInput
from releases.models import AuditEvent, ReleaseRequest, TermsAcceptance
from releases.services import lifecycle
from releases.services.release import locked


@dataclass(frozen=True)
class Additions:
    """What an approving officer adds: recipients, groups, and an expiry date."""

    recipients: list = field(default_factory=list)
    recipient_groups: list = field(default_factory=list)
    expires_at: datetime.date | None = None

    def __bool__(self) -> bool:
        return bool(self.recipients or self.recipient_groups or self.expires_at)


def add(user, release_request: ReleaseRequest, additions: Additions) -> None:
    """Name more recipients (never fewer) and set the expiry date; audited. Called by the
    review service inside its transaction, once the approval is allowed."""
    from releases.services.release import Sharing, validate_sharing

    if not additions:
        return
    validate_sharing(
        Sharing(
            recipients=additions.recipients,
            recipient_groups=additions.recipient_groups,
            expires_at=additions.expires_at,
        )
    )
    release_request.recipients.add(*additions.recipients)
    release_request.recipient_groups.add(*additions.recipient_groups)
    if additions.expires_at is not None:
        release_request.expires_at = additions.expires_at
        release_request.save(update_fields=["expires_at"])
    audit.record(
        AuditEvent.Action.RECIPIENTS,
        user,
        request=release_request,
        added_recipients=[u.get_username() for u in additions.recipients],
        added_groups=[g.name for g in additions.recipient_groups],
        expires_at=additions.expires_at.isoformat() if additions.expires_at else None,
    )


def accept_terms(user, request_id: int) -> TermsAcceptance:
    """Record that ``user`` accepts the release's terms (exactly this text, by its SHA-256)."""
    try:
        with transaction.atomic():
            release_request = locked(request_id)
            lifecycle.check_accept_terms(user, release_request)
            acceptance = TermsAcceptance.objects.create(
                request=release_request, user=user, terms_sha256=release_request.terms_sha256
            )
            audit.record(
                AuditEvent.Action.TERMS_ACCEPTED,
                user,
                request=release_request,
                terms_sha256=release_request.terms_sha256,
            )
    except IntegrityError:
        raise InvalidInput("You have accepted these terms.") from None
    return acceptance


def revoke(user, request_id: int, reason: str) -> ReleaseRequest:
    """Withdraw an approved release at once: nobody can download it any more."""
    reason = (reason or "").strip()
    with transaction.atomic():
        release_request = locked(request_id)
        transition = lifecycle.check_revoke(user, release_request)
        if not reason:
            raise InvalidInput("Give the reason for revoking this release.")
        release_request.state = transition.target
        release_request.revoked_at = timezone.now()
        release_request.revoked_by = user
        release_request.revocation_reason = reason
        release_request.save(
            update_fields=["state", "revoked_at", "revoked_by", "revocation_reason"]
        )
        audit.record(
            AuditEvent.Action.REVOKE,
            user,
            request=release_request,
            round=release_request.round,
            reason=reason,
        )
    return release_request


def expire_due() -> int:
    """Write the expired state of approved releases whose expiry date has passed (pages and
    downloads already treat them as expired); returns how many."""
    expired = 0
    due = ReleaseRequest.objects.filter(
        state__in=lifecycle.sources("expire"), expires_at__lt=timezone.localdate()
    ).values_list("pk", flat=True)
    for request_id in due:
        with transaction.atomic():
            release_request = locked(request_id)
            if lifecycle.refusal("expire", None, release_request) is not None:
                continue
            release_request.state = lifecycle.target(release_request.state, "expire")
            release_request.save(update_fields=["state"])
            audit.record(
                AuditEvent.Action.EXPIRE,
                None,
                request=release_request,
                round=release_request.round,
                expires_at=release_request.expires_at.isoformat(),
            )
            expired += 1
    return expired
