"""Hierarchy builders on a column's actual values, with parameters read from a form.

Wraps the engine's ``Hierarchy`` builders (``releases/engine/hierarchy.py``); the chosen
hierarchy is stored materialized on the column in ARX format.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from releases.core.errors import InvalidInput
from releases.engine import Hierarchy, HierarchyError
from releases.models import DatasetColumn
from releases.models.datasets import DateOrder

Source = DatasetColumn.HierarchySource
BUILDERS = [
    (Source.AUTOMATIC, "Automatic"),
    (Source.INTERVALS, "Numeric intervals"),
    (Source.DATES, "Date granularity"),
    (Source.MASKING, "Masking (ZIP codes, IDs)"),
    (Source.CATEGORICAL, "Categorical to *"),
]
PREVIEW_VALUES = 12


def parse_widths(text: str) -> list[float] | None:
    """'5, 10, 20' -> [5.0, 10.0, 20.0]; '' -> None (automatic widths)."""
    parts = [p for p in re.split(r"[\s,;]+", (text or "").strip()) if p]
    if not parts:
        return None
    widths = []
    for part in parts:
        try:
            width = float(part)
        except ValueError:
            raise HierarchyError(f"Interval width {part!r} is not a number.") from None
        if not math.isfinite(width) or width <= 0:
            raise HierarchyError(f"Interval width {part!r} must be a positive number.")
        widths.append(width)
    return widths


def params_from(data, builder: str) -> dict:
    """The builder's parameters from a form's data (a QueryDict or dict); ``InvalidInput``
    says what is wrong with them."""
    if builder == Source.INTERVALS:
        try:
            widths = parse_widths(data.get("widths", ""))
        except HierarchyError as exc:
            raise InvalidInput(str(exc)) from None
        return {"widths": widths} if widths else {}
    if builder == Source.DATES:
        return {"dayfirst": data.get("dayfirst") in ("1", "on", "true", True)}
    return {}


def build(values: Iterable[str], builder: str, params: dict, attribute: str) -> Hierarchy:
    """The hierarchy the builder makes on ``values``; ``HierarchyError`` says what is wrong."""
    values = list(values)
    if builder == Source.INTERVALS:
        return Hierarchy.intervals(values, widths=params.get("widths"), attribute=attribute)
    if builder == Source.DATES:
        return Hierarchy.dates(values, dayfirst=bool(params.get("dayfirst")), attribute=attribute)
    if builder == Source.MASKING:
        return Hierarchy.masking(values, attribute=attribute)
    if builder == Source.CATEGORICAL:
        return Hierarchy.categorical(values, attribute=attribute)
    if builder == Source.AUTOMATIC:
        return Hierarchy.automatic(values, attribute=attribute)
    raise HierarchyError(f"Unknown hierarchy builder {builder!r}.")


def dayfirst_default(column: DatasetColumn) -> bool:
    return column.date_order == DateOrder.DMY


def preview_rows(hierarchy: Hierarchy, limit: int = PREVIEW_VALUES) -> list[list[str]]:
    """Up to ``limit`` rows spread over the values (sorted numerically when they are numbers)."""
    rows = [list(r) for r in hierarchy.rows]

    def key(row: list[str]):
        try:
            return (0, float(row[0]), row[0])
        except ValueError:
            return (1, 0.0, row[0])

    rows.sort(key=key)
    if len(rows) <= limit:
        return rows
    step = (len(rows) - 1) / (limit - 1)
    return [rows[round(i * step)] for i in range(limit)]


def level_counts(hierarchy: Hierarchy) -> list[int]:
    """Distinct labels at each level: how coarse each level is."""
    return [len(set(hierarchy.level(level))) for level in range(hierarchy.height)]
