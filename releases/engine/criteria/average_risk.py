"""Average prosecutor re-identification risk (ARX's ``AverageReidentificationRisk``), a
dataset criterion: the smallest classes are suppressed until it holds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..arrays import IntArray
from .base import Check, Classes, Criterion, DataContext, ParamSpec

__all__ = ["AverageRisk"]


class AverageRisk(Criterion):
    """Average prosecutor re-identification risk at most a threshold (ARX's
    ``AverageReidentificationRisk``): ``classes / records <= r`` over the released classes
    (1 / average class size), enforced by suppressing the smallest classes."""

    name = "average-risk"
    label = "average re-identification risk"
    summary = (
        "The average prosecutor re-identification risk (classes / records) is at most r; the "
        "smallest classes are suppressed until it is."
    )
    params = (
        ParamSpec(
            "risk",
            "float",
            "average risk",
            "Largest average re-identification risk, e.g. 0.05 for 5 %.",
            symbol="average risk",
            minimum=0,
            maximum=1,
            minimum_exclusive=True,
            flag="--average-risk",
            metavar="R",
        ),
    )
    scope = "dataset"
    risk: float

    def describe(self) -> str:
        return f"average re-identification risk at most {self.risk:g}"

    def fulfilled(self, sizes: IntArray, data: DataContext) -> bool:
        n = int(sizes.sum())
        return n == 0 or len(sizes) / n <= self.risk + 1e-12

    def class_budget(self, n: int) -> int | None:
        return int(math.floor(self.risk * n + 1e-9))

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        n = int(classes.sizes.sum())
        return {"average_risk": len(classes.sizes) / n if n else 0.0}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        value = float(achieved.get("average_risk") or 0.0)
        return [
            Check(
                "average re-identification risk",
                value <= self.risk + 1e-12,
                f"average risk {value:.2%}, at most {self.risk:.2%} requested",
            )
        ]
