"""Highest prosecutor re-identification risk: every class has at least ARX's size threshold
for the risk."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..arrays import BoolArray
from .base import Check, Classes, Criterion, DataContext, ParamSpec

__all__ = ["HighestRisk", "size_threshold"]


def size_threshold(risk: float) -> int:
    """ARX's ``ParameterTranslation.getSizeThreshold``: the class size that keeps the highest
    re-identification risk at ``risk``, allowing 1 % rounding."""
    if risk <= 0:
        return 2**31 - 1
    size = 1.0 / risk
    floor = math.floor(size)
    if (1.0 / floor) - (1.0 / size) >= 0.01 * risk:
        floor += 1
    return int(floor)


class HighestRisk(Criterion):
    """Highest prosecutor re-identification risk at most a threshold: every class has at least
    ARX's size threshold (:func:`size_threshold`) records. ARX offers it as k-anonymity with
    that k, and with average risk as ``AverageReidentificationRisk(average, highest, 0)``;
    combined here with :class:`.average_risk.AverageRisk` it gives the same releases."""

    name = "highest-risk"
    label = "highest re-identification risk"
    summary = "No record's prosecutor re-identification risk (1 / its class size) exceeds r."
    params = (
        ParamSpec(
            "risk",
            "float",
            "highest risk",
            "Largest re-identification risk allowed for any record, e.g. 0.1 for 10 %.",
            symbol="highest risk",
            minimum=0,
            maximum=1,
            minimum_exclusive=True,
            flag="--highest-risk",
            metavar="R",
        ),
    )
    risk: float

    @property
    def size(self) -> int:
        return size_threshold(float(self.risk))

    def describe(self) -> str:
        return f"highest re-identification risk at most {self.risk:g}"

    def min_class_size(self, data: DataContext) -> int:
        return self.size

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        return classes.sizes < self.size

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        return np.equal(classes.sizes, self.size)

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        smallest = int(classes.sizes.min()) if len(classes.sizes) else 0
        return {"highest_risk": 1.0 / smallest if smallest else 0.0, "smallest_class": smallest}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        value = float(achieved.get("highest_risk") or 0.0)
        effective = 1.0 / self.size
        detail = f"highest risk {value:.2%} (smallest class {achieved.get('smallest_class')})"
        detail += f", at most {self.risk:.2%} requested"
        if abs(effective - self.risk) > 1e-12:
            detail += f" (classes of at least {self.size}: {effective:.2%})"
        return [Check("highest re-identification risk", value <= effective + 1e-12, detail)]
