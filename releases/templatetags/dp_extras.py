"""Filters for the differential privacy pages: ledger amounts and errors at 95 %."""

from __future__ import annotations

from decimal import Decimal

from django import template

from releases.datasets.budget import show

register = template.Library()


@register.filter
def amount(value) -> str:
    """A ledger amount as people write it (0.3, not 0.300000000000); "—" for none."""
    if value is None or value == "":
        return "—"
    if not isinstance(value, Decimal):
        value = Decimal(repr(value) if isinstance(value, float) else str(value))
    return show(value)


@register.filter
def statistic(value) -> str:
    """A noisy value as released: whole numbers as they are, others to 6 significant digits."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return format(number, ".6g")


@register.filter
def error95(value, kind: str = "absolute") -> str:
    """ "± 6.43", or "± 24 rows" for a quantile's rank error."""
    if value is None or value == "":
        return "—"
    number = float(value)
    if kind == "rank":
        return f"± {number:.0f} rows (rank)"
    return f"± {format(number, '.3g') if abs(number) < 100 else format(round(number), ',')}"
