"""The three roles, as Django groups; one user may hold several."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser, AnonymousUser
from django.core.exceptions import PermissionDenied

STEWARDS = "Data stewards"
OFFICERS = "Privacy officers"
RECIPIENTS = "Recipients"
ALL_GROUPS = (STEWARDS, OFFICERS, RECIPIENTS)

User = AbstractUser | AnonymousUser


def group_names(user: User) -> set[str]:
    if not user.is_authenticated:
        return set()
    # Cache on the user object: a page asks several times.
    cached = getattr(user, "_role_names", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        vars(user)["_role_names"] = cached
    return cached


def is_steward(user: User) -> bool:
    return STEWARDS in group_names(user)


def is_officer(user: User) -> bool:
    return OFFICERS in group_names(user)


def is_recipient(user: User) -> bool:
    return RECIPIENTS in group_names(user)


def require(user: User, group: str, action: str) -> None:
    """Raise PermissionDenied unless ``user`` is in ``group``."""
    if group not in group_names(user):
        raise PermissionDenied(f"Only {group.lower()} can {action}.")
