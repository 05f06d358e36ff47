"""Writes about signing in: locking a user name and releasing it, each with its audit row in
the same transaction."""

from __future__ import annotations

import logging

from axes.models import AccessAttempt
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from releases.accounts import throttle
from releases.core import audit
from releases.models import AuditEvent, UsernameLock

logger = logging.getLogger(__name__)


def lock_username(username: str, addresses: int) -> UsernameLock | None:
    """Lock ``username`` (failures for it came from ``addresses`` distinct addresses); None when
    it already was."""
    try:
        with transaction.atomic():
            lock = UsernameLock.objects.create(username=username, addresses=addresses)
            audit.record(
                AuditEvent.Action.LOGIN_LOCKED, None, username=username, addresses=addresses
            )
    except IntegrityError:  # locked meanwhile by a concurrent failure
        return None
    logger.warning("User name %r locked: failed sign-ins from %d addresses", username, addresses)
    return lock


def _release(username: str, actor, how: str) -> bool:
    lock = UsernameLock.objects.select_for_update().filter(
        username=username, released_at__isnull=True
    )
    released = lock.update(released_at=timezone.now(), released_by=actor, released_how=how)
    # The failures that locked it are forgotten too, or the next one would lock it again.
    AccessAttempt.objects.filter(username=username).delete()
    if released:
        audit.record(AuditEvent.Action.LOGIN_RELEASED, actor, username=username, how=how)
    return bool(released)


def release_by_administrator(actor, username: str) -> bool:
    """An administrator releases ``username``; False when it was not locked."""
    if not (actor.is_active and actor.is_staff and actor.has_perm("releases.change_usernamelock")):
        raise PermissionDenied("Only an administrator may release a locked user name.")
    with transaction.atomic():
        return _release(username, actor, UsernameLock.Release.ADMINISTRATOR)


def release_by_password_reset(user) -> bool:
    """``user`` set a new password through the e-mailed link: their name is released."""
    with transaction.atomic():
        if throttle.active_lock(user.get_username()) is None:
            return False
        return _release(user.get_username(), user, UsernameLock.Release.PASSWORD_RESET)
