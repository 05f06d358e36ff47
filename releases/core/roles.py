"""The roles, held per project (``models.Membership``); one user may hold several, in several
projects. Superusers and staff are site administrators: they manage projects and members.

The three role groups of old (``STEWARDS`` ...) remain as names only: the migration to projects
turned each member into a member of the default project with that role; a release may still
name other groups (purpose groups) as its recipients.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser, AnonymousUser
from django.core.exceptions import PermissionDenied

from releases.models import Membership

STEWARDS = "Data stewards"
OFFICERS = "Privacy officers"
RECIPIENTS = "Recipients"
ALL_GROUPS = (STEWARDS, OFFICERS, RECIPIENTS)

STEWARD = Membership.Role.STEWARD
OFFICER = Membership.Role.OFFICER
RECIPIENT = Membership.Role.RECIPIENT
ADMIN = Membership.Role.ADMIN
#: The old group names, as the role they grant in a project.
GROUP_ROLES = {STEWARDS: STEWARD, OFFICERS: OFFICER, RECIPIENTS: RECIPIENT}
_PLURAL: dict[str, str] = {
    STEWARD: "data stewards",
    OFFICER: "privacy officers",
    RECIPIENT: "recipients",
    ADMIN: "project admins",
}

User = AbstractUser | AnonymousUser


def project_roles(user: User) -> dict[int, frozenset[str]]:
    """{project id: the user's roles there}."""
    if not user.is_authenticated:
        return {}
    # Cache on the user object: a page asks several times.
    cached = getattr(user, "_project_roles", None)
    if cached is None:
        found: dict[int, set[str]] = {}
        for project_id, role in Membership.objects.filter(user_id=user.pk).values_list(
            "project_id", "role"
        ):
            found.setdefault(project_id, set()).add(role)
        cached = {pid: frozenset(r) for pid, r in found.items()}
        vars(user)["_project_roles"] = cached
    return cached


def forget(user: User) -> None:
    """Drop the cached roles (after a membership of ``user`` changed)."""
    vars(user).pop("_project_roles", None)


def projects_where(user: User, role: str) -> set[int]:
    """The ids of the projects where ``user`` holds ``role``."""
    return {pid for pid, held in project_roles(user).items() if role in held}


def has_role(user: User | None, role: str, project_id: int | None) -> bool:
    if user is None or project_id is None:
        return False
    return role in project_roles(user).get(project_id, frozenset())


def is_site_admin(user: User | None) -> bool:
    return bool(user is not None and user.is_authenticated and (user.is_superuser or user.is_staff))


def is_project_admin(user: User | None, project_id: int | None) -> bool:
    return is_site_admin(user) or has_role(user, ADMIN, project_id)


def _role(group_or_role: str) -> str:
    return GROUP_ROLES.get(group_or_role, group_or_role)


def holds(user: User, group_or_role: str) -> bool:
    """Holds the role in any project."""
    return bool(projects_where(user, _role(group_or_role)))


def is_steward(user: User) -> bool:
    return holds(user, STEWARD)


def is_officer(user: User) -> bool:
    return holds(user, OFFICER)


def is_recipient(user: User) -> bool:
    return holds(user, RECIPIENT)


def is_any_admin(user: User) -> bool:
    return is_site_admin(user) or holds(user, ADMIN)


def require(user: User, group: str, action: str) -> None:
    """Raise PermissionDenied unless ``user`` holds the role (or the old group's) somewhere."""
    role = _role(group)
    if not holds(user, role):
        raise PermissionDenied(f"Only {_PLURAL[role]} can {action}.")


def require_in(user: User, role: str, project_id: int | None, action: str) -> None:
    """Raise PermissionDenied unless ``user`` holds ``role`` in the project."""
    if not has_role(user, role, project_id):
        raise PermissionDenied(f"Only the project's {_PLURAL[role]} can {action}.")
