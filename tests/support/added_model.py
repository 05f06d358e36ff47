"""A privacy model written outside the engine, as a new module of ``releases.engine.criteria``
would be: α-deassociation, the α of (α,k)-anonymity (Wong et al. 2006): in every class, no
sensitive value holds more than a share α of the rows.

The tests add it to ``REGISTRY`` (and to nothing else) to show that the search, the command
line, the stored JSON, the request form, the classes table and the review follow the registry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from releases.engine.criteria import REGISTRY
from releases.engine.criteria.base import (
    EPS,
    Check,
    Classes,
    Criterion,
    DataContext,
    ParamSpec,
    per_attribute,
)
from releases.engine.privacy import cell_shares, class_max


class AlphaDeassociation(Criterion):
    name = "alpha-deassociation"
    label = "α-deassociation"
    summary = "In every class, no sensitive value holds more than a share α of the rows."
    params = (
        ParamSpec(
            "alpha",
            "float",
            "α",
            "Largest share of a class that one sensitive value may hold.",
            symbol="α",
            minimum=0,
            maximum=1,
            minimum_exclusive=True,
            flag="--alpha",
            metavar="A",
        ),
    )
    needs_sensitive = True
    alpha: float

    def describe(self) -> str:
        return f"{self.alpha:g}-deassociation"

    def monotone(self, with_suppression: bool) -> bool:
        # A merged class's shares are averages of its parts': monotone without suppression.
        return not with_suppression

    def min_class_size(self, data: DataContext) -> int:
        # A class of s rows has a value holding at least 1/s of it.
        return math.ceil(1 / self.alpha - EPS)

    def _largest(self, classes: Classes, data: DataContext) -> dict[str, np.ndarray]:
        return {n: class_max(cell_shares(sc), sc) for n, sc in per_attribute(classes, data)}

    def class_fails(self, classes: Classes, data: DataContext) -> np.ndarray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for largest in self._largest(classes, data).values():
            fails |= largest > self.alpha + EPS
        return fails

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, np.ndarray]:
        return {f"{n}:alpha": largest for n, largest in self._largest(classes, data).items()}

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return [(f"{s}:alpha", f"largest value share ({s})") for s in sensitive]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        largest = self._largest(classes, data)
        return {"alpha": {n: float(v.max()) if len(v) else 0.0 for n, v in largest.items()}}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        return [
            Check(
                f"α-deassociation of {name}",
                value <= self.alpha + EPS,
                f"largest value share {value:.4f}, α requested {self.alpha:g}",
            )
            for name, value in (achieved.get("alpha") or {}).items()
        ]


def register(monkeypatch: pytest.MonkeyPatch) -> None:
    """α-deassociation in ``REGISTRY`` for one test: one entry, as its line in the registry
    module would add."""
    monkeypatch.setitem(REGISTRY, AlphaDeassociation.name, AlphaDeassociation)
