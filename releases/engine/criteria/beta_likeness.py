"""β-likeness (Cao & Karras 2012), basic and enhanced, as ARX defines it."""

from __future__ import annotations

import math
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

__all__ = ["BetaLikeness"]


class BetaLikeness(Criterion):
    """β-likeness (Cao & Karras 2012) as ARX defines it (``BasicBLikeness``,
    ``EnhancedBLikeness``): for every class and every sensitive value ``s`` present in it, with
    ``p = p(s | table)`` (all input rows) and ``q = p(s | class)``,

        basic:     (q - p) / p  <=  β
        enhanced:  (q - p) / p  <=  min(β, -ln p)

    pycanon's ``basic_beta_likeness`` is the same maximum (over the table it is given);
    its ``enhanced_beta_likeness`` returns ``min(max gain, -ln p_min)``, which is not ARX's
    per-value test: a release that is enhanced β-like in ARX's sense has pycanon's value
    at most β, not the converse.
    """

    name = "beta-likeness"
    label = "β-likeness"
    summary = (
        "In every class, no sensitive value is more than (1 + β) times as frequent as in the "
        "whole table (enhanced: also at most (1 - ln p) times, for a value of share p)."
    )
    params = (
        ParamSpec(
            "beta",
            "float",
            "β",
            "Largest relative gain (share in the class − share in the table) / share in the "
            "table of any sensitive value.",
            symbol="β",
            minimum=0,
            minimum_exclusive=True,
            flag="--beta",
            metavar="B",
        ),
        ParamSpec(
            "variant",
            "choice",
            "β-likeness variant",
            choices=(("basic", "basic"), ("enhanced", "enhanced")),
            default="basic",
            flag="--beta-variant",
        ),
    )
    needs_sensitive = True
    beta: float
    variant: str

    def describe(self) -> str:
        return f"{self.variant} {self.beta:g}-likeness"

    def monotone(self, with_suppression: bool) -> bool:
        return not with_suppression  # ARX: monotone with generalization only

    def _caps(self, q: FloatArray) -> FloatArray:
        if self.variant == "enhanced":
            with np.errstate(divide="ignore"):
                caps: FloatArray = np.minimum(self.beta, -np.log(q))
            return caps
        return np.full(len(q), float(self.beta))

    def min_class_size(self, data: DataContext) -> int:
        sizes = []
        for s in data.sensitive:
            q = data.distribution(s)
            present = q > 0
            sizes.append(smallest_size(q[present] * (1 + self._caps(q[present])), 1.0))
        return max(sizes, default=1)

    def _cells(
        self, sc: SensitiveCounts, data: DataContext, name: str
    ) -> tuple[FloatArray, FloatArray]:
        """Per cell, the value's relative gain and the gain allowed it."""
        q = data.distribution(name)[sc.value]
        gain = (cell_shares(sc) - q) / q
        return gain, self._caps(data.distribution(name))[sc.value]

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for name, sc in per_attribute(classes, data):
            gain, cap = self._cells(sc, data, name)
            bad = gain > cap + EPS
            fails[np.unique(sc.group[bad])] = True
        return fails

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        out = np.zeros(len(classes.sizes), dtype=bool)
        for name, sc in per_attribute(classes, data):
            gain, cap = self._cells(sc, data, name)
            near = (cap > 0) & (gain >= BORDERLINE_SHARE * cap)
            out[np.unique(sc.group[near])] = True
        return out

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, FloatArray]:
        return {
            f"{n}:beta": class_max(self._cells(sc, data, n)[0], sc, empty=-1.0)
            for n, sc in per_attribute(classes, data)
        }

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return [(f"{s}:beta", f"largest relative gain ({s})") for s in sensitive]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        beta, used = {}, {}
        for name, sc in per_attribute(classes, data):
            gain, cap = self._cells(sc, data, name)
            beta[name] = float(gain.max()) if len(gain) else 0.0
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(cap > 0, gain / cap, np.where(gain > EPS, np.inf, 0.0))
            worst = float(share.max()) if len(share) else 0.0
            used[name] = worst if math.isfinite(worst) else None
        return {"beta": beta, "share_of_allowed_gain": used}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        lines = []
        used = achieved.get("share_of_allowed_gain") or {}
        for name, value in (achieved.get("beta") or {}).items():
            share = used.get(name)
            passed = share is not None and share <= 1 + EPS
            detail = f"largest relative gain {value:.4f}, β requested {self.beta:g}"
            if self.variant == "enhanced":
                shown = "∞" if share is None else f"{share:.0%}"
                detail += f"; {shown} of the allowed gain min(β, −ln p) used"
            lines.append(Check(f"{self.variant} β-likeness of {name}", passed, detail))
        return lines
