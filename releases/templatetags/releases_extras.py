from django import template

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
