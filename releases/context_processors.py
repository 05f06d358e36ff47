from functools import partial
from typing import Any

from releases.core import roles as role_checks
from releases.events import selectors as events
from releases.review import selectors


def roles(request) -> dict:
    """The user's roles, for the navigation, and how many requests wait for this officer's review."""
    user = request.user
    if not user.is_authenticated:
        return {}
    context: dict[str, Any] = {
        "is_steward": role_checks.is_steward(user),
        "is_officer": role_checks.is_officer(user),
        "is_recipient": role_checks.is_recipient(user),
        # Counted only where a page shows the badge (templates call it), not for fragments.
        "notifications_unread": partial(events.unread_count, user),
        "is_any_admin": role_checks.is_any_admin(user),
    }
    if context["is_officer"]:
        context["review_waiting"] = selectors.waiting_count(user)
    return context
