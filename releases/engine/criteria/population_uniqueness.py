"""Population uniqueness (ARX's ``PopulationUniqueness``), a dataset criterion: the estimated
share of population uniques at most a threshold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..arrays import IntArray
from ..risk import population_uniques
from .base import Check, Classes, Criterion, DataContext, ParamSpec

__all__ = ["PopulationUniqueness"]


class PopulationUniqueness(Criterion):
    """Estimated share of population uniques at most a threshold (ARX's
    ``PopulationUniqueness``), with one of the estimators of :mod:`.risk` (Dankar's rule
    without the Zayatz fall-back after Pitman, as ARX's model calls it). As in ARX, a release
    passes when its estimate is above 0 and at most the threshold, or when it has no sample
    uniques at all; an estimate that fails counts as 0, so it passes only without sample
    uniques. Not available with Mondrian (ARX does not support it with local recoding)."""

    name = "population-uniqueness"
    label = "population uniqueness"
    summary = (
        "The estimated share of the population that is unique on the quasi-identifiers is at "
        "most u (needs the population size or the sampling fraction)."
    )
    params = (
        ParamSpec(
            "risk",
            "float",
            "population uniques",
            "Largest estimated share of population uniques, e.g. 0.01 for 1 %.",
            symbol="population uniqueness",
            minimum=0,
            maximum=1,
            minimum_exclusive=True,
            flag="--population-uniqueness",
            metavar="U",
        ),
        ParamSpec(
            "estimator",
            "choice",
            "estimator",
            "Pitman, Zayatz, SNB, or Dankar's rule choosing among them.",
            choices=(
                ("dankar", "Dankar's rule"),
                ("pitman", "Pitman"),
                ("zayatz", "Zayatz"),
                ("snb", "SNB"),
            ),
            default="dankar",
            flag="--population-model",
        ),
    )
    scope = "dataset"
    needs_population = True
    local_recoding = False
    risk: float
    estimator: str

    def describe(self) -> str:
        names = {"dankar": "Dankar", "pitman": "Pitman", "zayatz": "Zayatz", "snb": "SNB"}
        return f"population uniqueness at most {self.risk:g} ({names[self.estimator]})"

    def monotone(self, with_suppression: bool) -> bool:
        return not with_suppression and self.estimator == "zayatz"

    def _estimate(self, sizes: IntArray, data: DataContext) -> float:
        return population_uniques(sizes, int(data.population_size or 0), self.estimator)

    def fulfilled(self, sizes: IntArray, data: DataContext) -> bool:
        if int(sizes.sum()) == 0:
            return True
        value = self._estimate(sizes, data)
        if 0 < value <= self.risk + 1e-12:
            return True
        return value == 0 and not bool((sizes == 1).any())

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        sizes = classes.sizes
        n = int(sizes.sum())
        return {
            "population_uniques": self._estimate(sizes, data) if n else 0.0,
            "sample_uniques": float(sizes[sizes == 1].sum()) / n if n else 0.0,
            "population_size": int(data.population_size or 0),
        }

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        value = float(achieved.get("population_uniques") or 0.0)
        uniques = float(achieved.get("sample_uniques") or 0.0)
        passed = (0 < value <= self.risk + 1e-12) or (value == 0 and uniques == 0)
        shown = f"{value:.4%}" if value > 0 or uniques == 0 else "no estimate"
        return [
            Check(
                "population uniqueness",
                passed,
                f"estimated population uniques {shown} ({self.estimator}), at most "
                f"{self.risk:.4%} requested; sample uniques {uniques:.2%}",
            )
        ]
