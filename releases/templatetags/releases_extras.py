from django import template

register = template.Library()


@register.filter
def get_item(mapping: dict, key: str):
    """Look up ``key`` in a dict from a template (a column name may hold a dash)."""
    return mapping.get(key, "") if isinstance(mapping, dict) else ""
