"""l-diversity (Machanavajjhala et al. 2007) in its three variants, as ARX defines them:
distinct, entropy and recursive (c,l)-diversity of every sensitive attribute in each class."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..arrays import BoolArray, FloatArray
from ..errors import EngineError
from ..privacy import SensitiveCounts, distinct_l, entropy_l, recursive_cl, recursive_l_value
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

__all__ = ["LDiversity"]


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "∞"
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


class LDiversity(Criterion):
    name = "l-diversity"
    label = "l-diversity"
    summary = (
        "Each class holds well-represented values of every sensitive attribute: distinct (l "
        "different values), entropy (entropy of at least log l) or recursive (c,l) (the most "
        "frequent value rarer than c times the l-th and rarer ones together)."
    )
    params = (
        ParamSpec(
            "l",
            "float",
            "l",
            "How many well-represented sensitive values each class holds.",
            symbol="l",
            minimum=1,
            flag="--l",
            metavar="N",
        ),
        ParamSpec(
            "variant",
            "choice",
            "l-diversity variant",
            choices=(
                ("distinct", "distinct"),
                ("entropy", "entropy"),
                ("recursive", "recursive (c,l)"),
            ),
            default="distinct",
            flag="--l-variant",
        ),
        ParamSpec(
            "c",
            "float",
            "c",
            "c of recursive (c,l)-diversity.",
            symbol="c",
            minimum=0,
            minimum_exclusive=True,
            required=False,
            flag="--c",
            metavar="C",
        ),
    )
    needs_sensitive = True
    l: float  # noqa: E741 - the field's own name
    variant: str
    c: float | None

    def validate(self) -> None:
        super().validate()
        if self.variant != "entropy" and int(self.l) != self.l:
            raise EngineError(f"l must be a whole number of at least 1, not {self.l!r}.")
        if self.variant == "recursive" and (self.c is None or self.c <= 0):
            raise EngineError("Recursive (c,l)-diversity needs a positive c.")

    def describe(self) -> str:
        if self.variant == "recursive":
            return f"recursive ({self.c:g},{self.l:g})-diversity"
        return f"{self.variant} {self.l:g}-diversity"

    def monotone(self, with_suppression: bool) -> bool:
        # Distinct l-diversity is monotone like k. Entropy l-diversity only without suppression
        # (entropy is concave); recursive (c,l)-diversity is not relied upon.
        if self.variant == "distinct":
            return True
        return not with_suppression and self.variant == "entropy"

    def implied(self, data: DataContext) -> list[Criterion]:
        if self.variant == "distinct":
            return [self]
        # Every entropy / recursive l-diverse class holds at least ceil(l) distinct values.
        return [LDiversity(l=float(math.ceil(self.l - EPS)), variant="distinct")]

    def min_class_size(self, data: DataContext) -> int:
        return int(math.ceil(self.l - EPS))

    def _values(self, sc: SensitiveCounts) -> FloatArray:
        if self.variant == "entropy":
            return entropy_l(sc)
        if self.variant == "recursive":
            return recursive_l_value(sc, float(self.c or 0))
        return distinct_l(sc)

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for _, sc in per_attribute(classes, data):
            if self.variant == "distinct":
                fails |= distinct_l(sc) < self.l - EPS
            elif self.variant == "entropy":
                fails |= entropy_l(sc) < self.l * (1 - EPS)
            else:
                fails |= ~recursive_cl(sc, float(self.c or 0), int(self.l))
        return fails

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        out = np.zeros(len(classes.sizes), dtype=bool)
        for _, sc in per_attribute(classes, data):
            values = self._values(sc)
            if self.variant == "entropy":
                out |= values * BORDERLINE_SHARE <= self.l
            else:  # distinct and recursive l are whole numbers
                out |= np.abs(values - self.l) < EPS
        return out

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, FloatArray]:
        if self.variant != "recursive":
            return {}  # distinct and entropy l are in every classes table
        return {f"{n}:recursive_l": self._values(sc) for n, sc in per_attribute(classes, data)}

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        if self.variant != "recursive":
            return []
        return [(f"{s}:recursive_l", f"recursive l for c={self.c:g} ({s})") for s in sensitive]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        out = {}
        for name, sc in per_attribute(classes, data):
            values = self._values(sc)
            out[name] = float(values.min()) if len(values) else 0.0
        return {"l": out}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        lines = []
        for name, value in (achieved.get("l") or {}).items():
            passed = value is None or value + EPS >= self.l
            what = (
                "recursive (c,l)-diversity"
                if self.variant == "recursive"
                else (f"{self.variant} l-diversity")
            )
            lines.append(
                Check(
                    f"{what} of {name}",
                    passed,
                    f"lowest l {_number(value)}, l requested {self.l:g}"
                    + (f" (c={self.c:g})" if self.variant == "recursive" else ""),
                )
            )
        return lines
