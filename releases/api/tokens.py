"""Personal access tokens: made (shown once), listed, revoked, and checked on each API call.

A token is ``anon_<prefix>_<secret>``. Only the prefix (to find it, and to show it in lists)
and the SHA-256 of the whole token are stored; a token is compared by its hash in constant
time. Making and revoking one write audit rows, and so does a refused use of a known token
(expired, revoked, a wrong secret, or a write with a read-only token).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from releases.core import audit
from releases.core.errors import InvalidInput
from releases.models import ApiToken, AuditEvent

PREFIX = "anon_"
PREFIX_CHARS = 10
#: How often ``last_used_at`` is written at most (a busy pipeline would write it on each call).
LAST_USED_EVERY = timedelta(minutes=1)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _new_prefix() -> str:
    return secrets.token_hex(PREFIX_CHARS // 2)


def expiry_problem(days: int | None) -> str:
    """Why ``days`` cannot be a token's lifetime, or ""."""
    if days is None:
        return ""
    if days < 1:
        return "A token lasts at least one day."
    if days > settings.API_TOKEN_MAX_DAYS:
        return f"A token lasts at most {settings.API_TOKEN_MAX_DAYS} days (API_TOKEN_MAX_DAYS)."
    return ""


@dataclass(frozen=True)
class NewToken:
    """A token just made: the row, and the token itself (shown once, never stored)."""

    row: ApiToken
    token: str


def create_token(
    user, name: str, scope: str = ApiToken.Scope.READ, expires_days: int | None = None
) -> NewToken:
    """Make a token for ``user`` (audited); the token is in the result, and nowhere else."""
    name = (name or "").strip()
    if not name:
        raise InvalidInput("Give the token a name (what it is for).")
    if len(name) > 100:
        raise InvalidInput("A token's name is at most 100 characters.")
    if scope not in ApiToken.Scope.values:
        raise InvalidInput("A token's scope is read or write.")
    problem = expiry_problem(expires_days)
    if problem:
        raise InvalidInput(problem)
    days = expires_days if expires_days is not None else settings.API_TOKEN_DAYS
    days = min(days, settings.API_TOKEN_MAX_DAYS)
    prefix = _new_prefix()
    while ApiToken.objects.filter(prefix=prefix).exists():
        prefix = _new_prefix()
    token = f"{PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        row = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=prefix,
            token_sha256=_digest(token),
            scope=scope,
            expires_at=timezone.now() + timedelta(days=days),
        )
        audit.record(
            AuditEvent.Action.TOKEN_CREATED,
            user,
            token=prefix,
            name=name,
            scope=scope,
            expires_at=row.expires_at.isoformat(),
        )
    return NewToken(row, token)


def tokens_for(user) -> QuerySet[ApiToken]:
    """A person's own tokens, newest first (revoked and expired ones included)."""
    return ApiToken.objects.filter(user=user.pk).order_by("-created_at", "-id")


def revoke_token(user, token_id: int) -> ApiToken:
    """Revoke one of ``user``'s tokens at once (audited); another person's is out of reach."""
    with transaction.atomic():
        row = ApiToken.objects.select_for_update().filter(pk=token_id, user=user.pk).first()
        if row is None:
            raise Http404("No such token.")
        if row.revoked_at is not None:
            raise InvalidInput("This token is already revoked.")
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
        audit.record(AuditEvent.Action.TOKEN_REVOKED, user, token=row.prefix, name=row.name)
    return row


class TokenRefused(Exception):
    """The token cannot be used; the message says why (for the 401 answer)."""


def _refuse(row: ApiToken, reason: str, **detail) -> TokenRefused:
    audit.record(
        AuditEvent.Action.TOKEN_REFUSED, row.user, token=row.prefix, reason=reason, **detail
    )
    return TokenRefused(reason)


def authenticate(token: str) -> ApiToken:
    """The active token ``token`` is, or ``TokenRefused``. Refusals of a known token (expired,
    revoked, wrong secret) are audited; an unknown one is not (it names nobody)."""
    invalid = "The API token is not valid."
    if not token.startswith(PREFIX):
        raise TokenRefused(invalid)
    prefix, _, secret = token[len(PREFIX) :].partition("_")
    if not prefix or not secret:
        raise TokenRefused(invalid)
    row = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if row is None:
        raise TokenRefused(invalid)
    if not hmac.compare_digest(row.token_sha256, _digest(token)):
        raise _refuse(row, invalid)
    if row.revoked_at is not None:
        raise _refuse(row, "The API token was revoked.")
    if row.is_expired:
        raise _refuse(row, "The API token has expired.")
    if not row.user.is_active:
        raise _refuse(row, "The API token's account is disabled.")
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    return row


def refuse_write(row: ApiToken, method: str, path: str) -> None:
    """A read-only token used to write: audited; the caller answers 403."""
    audit.record(
        AuditEvent.Action.TOKEN_REFUSED,
        row.user,
        token=row.prefix,
        reason="read-only token",
        method=method,
        path=path,
    )
