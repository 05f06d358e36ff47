from django import template

from releases.models import Role

register = template.Library()


@register.filter
def get_item(mapping: dict, key: str):
    """Look up ``key`` in a dict from a template (a column name may hold a dash)."""
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


@register.filter
def index(sequence, position: int):
    """The item at ``position`` of a list, or an empty list."""
    try:
        return sequence[int(position)]
    except (IndexError, TypeError, ValueError):
        return []


REVIEW_VERBS = {"approve": "approved", "changes": "requested changes on", "reject": "rejected"}


@register.filter
def review_verb(decision: str) -> str:
    return REVIEW_VERBS.get(decision, "reviewed")


@register.filter
def duration(value) -> str:
    """A timedelta in words: "15 minutes", "2 hours"."""
    seconds = int(value.total_seconds()) if value is not None else 0
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


@register.filter
def role_label(role: str) -> str:
    """A column role's label ("" reads as no role yet)."""
    try:
        return Role(role).label if role else "No role yet (withheld)"
    except ValueError:
        return role
