"""t-closeness (Li et al. 2007): the Earth Mover's Distance between each class's distribution
of a sensitive attribute and the whole table's is at most t (equal, ordered or hierarchical
ground distance)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..arrays import BoolArray, FloatArray
from ..privacy import min_class_size_for_t, t_distance
from .base import (
    BORDERLINE_SHARE,
    EPS,
    Check,
    Classes,
    Criterion,
    DataContext,
    ParamSpec,
    per_attribute,
)

__all__ = ["TCloseness"]


class TCloseness(Criterion):
    name = "t-closeness"
    label = "t-closeness"
    summary = (
        "The distribution of every sensitive attribute in each class is within Earth Mover's "
        "Distance t of its distribution in the whole table."
    )
    params = (
        ParamSpec(
            "t",
            "float",
            "t",
            "Largest distance allowed between a class's distribution and the table's.",
            symbol="t",
            minimum=0,
            maximum=1,
            flag="--t",
            metavar="T",
        ),
        ParamSpec(
            "distance",
            "choice",
            "t-closeness distance",
            "equal: every value as far from every other; ordered: values in (numeric) order; "
            "hierarchical: along the sensitive attribute's hierarchy.",
            choices=(
                ("equal", "equal distance"),
                ("ordered", "ordered distance"),
                ("hierarchical", "hierarchical distance"),
            ),
            default="equal",
            flag="--t-distance",
        ),
    )
    needs_sensitive = True
    t: float
    distance: str

    def describe(self) -> str:
        return f"{self.t:g}-closeness ({self.distance} distance)"

    def requires_hierarchy(self) -> bool:
        return self.distance == "hierarchical"

    def monotone(self, with_suppression: bool) -> bool:
        return not with_suppression  # EMD is convex in the distribution

    def min_class_size(self, data: DataContext) -> int:
        sizes = [
            min_class_size_for_t(data.t_context(s, self.distance), self.t) for s in data.sensitive
        ]
        return max(sizes, default=1)

    def _distances(self, classes: Classes, data: DataContext) -> Iterator[tuple[str, FloatArray]]:
        for name, sc in per_attribute(classes, data):
            yield name, t_distance(sc, data.t_context(name, self.distance))

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for _, d in self._distances(classes, data):
            fails |= d > self.t + EPS
        return fails

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        out = np.zeros(len(classes.sizes), dtype=bool)
        for _, d in self._distances(classes, data):
            out |= d >= BORDERLINE_SHARE * self.t
        return out

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, FloatArray]:
        return {f"{name}:t": d for name, d in self._distances(classes, data)}

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return [(f"{s}:t", f"t, {self.distance} distance ({s})") for s in sensitive]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        return {
            "t": {n: float(d.max()) if len(d) else 0.0 for n, d in self._distances(classes, data)}
        }

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        return [
            Check(
                f"t-closeness of {name}",
                value <= self.t + EPS,
                f"largest distance {value:.4f}, t requested {self.t:g} ({self.distance})",
            )
            for name, value in (achieved.get("t") or {}).items()
        ]
