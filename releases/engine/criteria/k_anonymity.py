"""k-anonymity: every equivalence class holds at least k records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..arrays import BoolArray
from .base import Check, Classes, Criterion, DataContext, ParamSpec

__all__ = ["KAnonymity"]


class KAnonymity(Criterion):
    name = "k-anonymity"
    label = "k-anonymity"
    summary = "Every equivalence class holds at least k records."
    params = (
        ParamSpec(
            "k",
            "int",
            "k",
            "Smallest number of records that share their quasi-identifiers.",
            symbol="k",
            minimum=1,
            flag="--k",
            metavar="N",
        ),
    )
    k: int

    def describe(self) -> str:
        return f"k={self.k}"

    def min_class_size(self, data: DataContext) -> int:
        return int(self.k)

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        return classes.sizes < self.k

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        return np.equal(classes.sizes, self.k)

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        return {"k": int(classes.sizes.min()) if len(classes.sizes) else 0}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        value = achieved.get("k") or 0
        return [
            Check("k-anonymity", value >= self.k, f"smallest class {value}, k requested {self.k}")
        ]
