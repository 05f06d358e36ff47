"""Writes about signing in: locking a user name and releasing it, and a single sign-on (the
user, their provider-given roles), each with its audit rows in the same transaction."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from releases.accounts import throttle
from releases.core import audit, roles
from releases.models import AuditEvent, Membership, Project, SsoIdentity, UsernameLock

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


@dataclass(frozen=True)
class SsoClaims:
    """What the identity provider says of a person at a sign-in."""

    issuer: str
    subject: str
    username: str
    email: str
    groups: frozenset[str]


def _free_username(wanted: str) -> str:
    """``wanted`` when nobody has it, else ``wanted-2``, ``wanted-3`` ...: a provider's name
    never takes over a local account of the same name."""
    users = get_user_model().objects
    name, n = wanted, 1
    while users.filter(username=name).exists():
        n += 1
        name = f"{wanted}-{n}"
    return name


def _roles_from_groups(groups: frozenset[str]) -> dict[str, set[str]]:
    """{project slug: roles} the groups give, by OIDC_GROUP_ROLES."""
    wanted: dict[str, set[str]] = {}
    for group, slug, role in settings.OIDC_GROUP_ROLES:
        if group in groups:
            wanted.setdefault(slug, set()).add(role)
    return wanted


def _sync_memberships(user, groups: frozenset[str]) -> None:
    """Set the user's provider-given roles to what the groups say now; the roles granted in the
    app (source ``local``) are left alone, and a role held locally is not given twice."""
    wanted = _roles_from_groups(groups)
    projects = {p.slug: p for p in Project.objects.filter(slug__in=wanted)}
    for slug in sorted(set(wanted) - set(projects)):
        logger.warning("OIDC_GROUP_ROLES names the project %r, which does not exist", slug)
    held = list(Membership.objects.select_for_update().filter(user=user).select_related("project"))
    touched = {m.project_id for m in held if m.source == Membership.Source.IDP} | {
        p.pk for p in projects.values()
    }
    before = {pid: sorted(m.role for m in held if m.project_id == pid) for pid in touched}
    wanted_pairs = {(projects[s].pk, r) for s, rs in wanted.items() if s in projects for r in rs}
    gone = [
        m.pk
        for m in held
        if m.source == Membership.Source.IDP and (m.project_id, m.role) not in wanted_pairs
    ]
    present = {(m.project_id, m.role) for m in held if m.pk not in gone}
    Membership.objects.filter(pk__in=gone).delete()
    Membership.objects.bulk_create(
        [
            Membership(project_id=pid, user=user, role=role, source=Membership.Source.IDP)
            for pid, role in sorted(wanted_pairs - present)
        ]
    )
    after_rows = Membership.objects.filter(user=user, project_id__in=touched)
    after: dict[int, list[str]] = {pid: [] for pid in touched}
    for pid, role in after_rows.order_by("role").values_list("project_id", "role"):
        after[pid].append(role)
    slugs = dict(Project.objects.filter(pk__in=touched).values_list("pk", "slug"))
    for pid in sorted(touched):
        if before[pid] != after[pid]:
            audit.record(
                AuditEvent.Action.MEMBERSHIP,
                user,
                project_id=pid,
                project=slugs[pid],
                member=user.username,
                roles_before=before[pid],
                roles_after=after[pid],
                source=Membership.Source.IDP,
            )
    roles.forget(user)


def sign_in_by_sso(claims: SsoClaims):
    """The user the provider vouches for (created at their first sign-in, found by ``sub`` after
    that), their provider-given roles set from the claims, and the sign-in audited; all in one
    transaction. None when the account is deactivated."""
    users = get_user_model().objects
    with transaction.atomic():
        identity = (
            SsoIdentity.objects.select_for_update()
            .select_related("user")
            .filter(issuer=claims.issuer, subject=claims.subject)
            .first()
        )
        created = identity is None
        if identity is None:
            user = users.create_user(_free_username(claims.username), email=claims.email)
            user.set_unusable_password()
            user.save(update_fields=["password"])
            SsoIdentity.objects.create(user=user, issuer=claims.issuer, subject=claims.subject)
        else:
            user = identity.user
            if not user.is_active:
                return None
            if claims.email and user.email != claims.email:
                user.email = claims.email
                user.save(update_fields=["email"])
        audit.record(
            AuditEvent.Action.LOGIN_SSO,
            user,
            username=user.username,
            subject=claims.subject,
            issuer=claims.issuer,
            created=created,
            groups=sorted(claims.groups),
        )
        _sync_memberships(user, claims.groups)
    return user
