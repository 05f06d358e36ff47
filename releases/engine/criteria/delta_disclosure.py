"""δ-disclosure privacy (Brickell & Shmatikov 2008), as ARX defines it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..arrays import BoolArray, FloatArray
from ..privacy import SensitiveCounts, cell_shares, class_max, smallest_size
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

__all__ = ["DeltaDisclosure"]


class DeltaDisclosure(Criterion):
    """δ-disclosure privacy (Brickell & Shmatikov 2008) as ARX defines it
    (``DDisclosurePrivacy``): for every class and every sensitive value ``s`` present in it,

        | log2( p(s | class) / p(s | table) ) |  <  δ

    with ``p(s | table)`` the share of ``s`` among all input rows. ARX takes the logarithm to
    base 2 and looks only at values present in the class; the original paper (and pycanon's
    ``delta_disclosure``) use the natural logarithm, and pycanon measures ``p(s | table)`` on
    the table it is given (the release), so pycanon's δ equals ours times ln 2 when no row is
    suppressed.
    """

    name = "delta-disclosure"
    label = "δ-disclosure privacy"
    summary = (
        "In every class, the share of each sensitive value differs from its share in the "
        "whole table by less than a factor 2^δ (either way)."
    )
    params = (
        ParamSpec(
            "delta",
            "float",
            "δ",
            "Bound on |log2(share in the class / share in the table)| of every sensitive "
            "value present in a class.",
            symbol="δ",
            minimum=0,
            minimum_exclusive=True,
            flag="--delta-disclosure",
            metavar="D",
        ),
    )
    needs_sensitive = True
    delta: float

    def describe(self) -> str:
        return f"{self.delta:g}-disclosure privacy"

    def monotone(self, with_suppression: bool) -> bool:
        return False  # ARX: neither with suppression nor with generalization

    def min_class_size(self, data: DataContext) -> int:
        # Present values have shares below 2^δ q_s and sum to 1: the s largest q must sum to
        # more than 2^-δ.
        sizes = [smallest_size(data.distribution(s), 2.0 ** (-self.delta)) for s in data.sensitive]
        return max(sizes, default=1)

    def _measure(self, sc: SensitiveCounts, data: DataContext, name: str) -> FloatArray:
        q = data.distribution(name)
        with np.errstate(divide="ignore"):
            cells = np.abs(np.log2(cell_shares(sc) / q[sc.value]))
        return class_max(cells, sc)

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for name, sc in per_attribute(classes, data):
            fails |= self._measure(sc, data, name) >= self.delta - EPS
        return fails

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        out = np.zeros(len(classes.sizes), dtype=bool)
        for name, sc in per_attribute(classes, data):
            out |= self._measure(sc, data, name) >= BORDERLINE_SHARE * self.delta
        return out

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, FloatArray]:
        return {f"{n}:delta": self._measure(sc, data, n) for n, sc in per_attribute(classes, data)}

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return [(f"{s}:delta", f"δ ({s})") for s in sensitive]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        out = {}
        for name, sc in per_attribute(classes, data):
            m = self._measure(sc, data, name)
            out[name] = float(m.max()) if len(m) else 0.0
        return {"delta": out}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        return [
            Check(
                f"δ-disclosure privacy of {name}",
                value < self.delta - EPS,
                f"largest |log2(class share / table share)| {value:.4f}, "
                f"δ requested {self.delta:g}",
            )
            for name, value in (achieved.get("delta") or {}).items()
        ]
