"""δ-presence (Nergiz, Atzori and Clifton 2007; ARX's ``DPresence``): for every class, the share
of its people in the population table who are in the release lies between δmin and δmax.

The release is a research subset of the population table (:class:`..subset.ResearchSubset`);
a class's presence is ``(its rows in the subset) / (its rows in the population)``, the
probability that a person of the population with those quasi-identifiers is in the release.
δmax bounds what an adversary who knows someone is in the population learns about their
presence in the release, δmin what they learn about their absence.

As in ARX, a class outside the bounds can be suppressed (its released rows removed, counted
against the suppression limit), so the model is not monotone with suppression; a class of the
population with no released row has presence 0 and, when δmin is above 0, makes the
transformation invalid: there is nothing to suppress.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..arrays import BoolArray, FloatArray
from ..errors import EngineError
from .base import Check, Classes, Criterion, DataContext, ParamSpec

__all__ = ["DeltaPresence"]

#: A class within this share of the band (δmax - δmin) from a bound only just passes.
BORDERLINE_BAND = 0.1


class PopulationCovered(Criterion):
    """What δ-presence with δmin above 0 implies, monotone even with suppression: every class of
    the population has a released row (a class without one has presence 0 and cannot be
    suppressed). Generalizing merges classes, so a transformation that covers the population
    makes every generalization cover it; the search prunes with it. Not a model of its own
    (not in the registry)."""

    name = "population-covered"
    label = "every class of the population released"
    judges_absent_classes = True

    def describe(self) -> str:
        return self.label

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        if classes.population is None:
            return np.zeros(len(classes.sizes), dtype=bool)
        return np.equal(classes.sizes, 0)


class DeltaPresence(Criterion):
    name = "delta-presence"
    label = "δ-presence"
    summary = (
        "For every class, the share of its people in the population table who are in the "
        "release lies between δmin and δmax (needs a research subset)."
    )
    params = (
        ParamSpec(
            "dmin",
            "float",
            "δmin",
            "Smallest share of a class's people in the population who are in the release, "
            "e.g. 0 (on the command line DMIN,DMAX).",
            symbol="δmin",
            minimum=0,
            maximum=1,
            flag="--delta-presence",
            metavar="DMIN,DMAX",
            pair="dmax",
        ),
        ParamSpec(
            "dmax",
            "float",
            "δmax",
            "Largest share of a class's people in the population who are in the release, e.g. 0.5.",
            symbol="δmax",
            minimum=0,
            maximum=1,
            flag="--delta-presence-max",
            metavar="DMAX",
        ),
    )
    uses_research_subset = "required"
    judges_absent_classes = True
    local_recoding = False
    dmin: float
    dmax: float

    def validate(self) -> None:
        super().validate()
        if self.dmin > self.dmax:
            raise EngineError(f"δmin ({self.dmin:g}) must be at most δmax ({self.dmax:g}).")

    def describe(self) -> str:
        return f"({self.dmin:g}, {self.dmax:g})-presence"

    def monotone(self, with_suppression: bool) -> bool:
        return not with_suppression

    def implied(self, data: DataContext) -> list[Criterion]:
        return [PopulationCovered()] if self.dmin > 0 else []

    def data_problem(self, data: DataContext) -> str | None:
        if data.research_subset:
            return None
        return (
            "δ-presence needs a research subset: the population table with the released rows "
            "marked."
        )

    @staticmethod
    def presence(classes: Classes) -> FloatArray:
        """Per class, released rows / rows in the population (0 for a class without released
        rows; 1 without a research subset, the release being its own population)."""
        sizes = classes.sizes.astype(np.float64)
        if classes.population is None:
            return np.where(sizes > 0, 1.0, 0.0)
        people = classes.population.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(sizes > 0, sizes / np.where(people > 0, people, 1.0), 0.0)

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        # Exact comparisons, as ARX's (a share equal to a bound passes).
        delta = self.presence(classes)
        return (delta < self.dmin) | (delta > self.dmax)

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        delta = self.presence(classes)
        band = BORDERLINE_BAND * (self.dmax - self.dmin)
        return ~self.class_fails(classes, data) & (
            (delta <= self.dmin + band) | (delta >= self.dmax - band)
        )

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, FloatArray]:
        out = {"presence": self.presence(classes)}
        if classes.population is not None:
            out["population"] = classes.population.astype(np.float64)
        return out

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return [
            ("population", "people in the population table"),
            ("presence", "share of them released (δ)"),
        ]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        delta = self.presence(classes)
        return {
            "min": float(delta.min()) if len(delta) else 0.0,
            "max": float(delta.max()) if len(delta) else 0.0,
            "population_rows": int(data.population_rows or 0),
        }

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        low = float(achieved.get("min") or 0.0)
        high = float(achieved.get("max") or 0.0)
        rows = int(achieved.get("population_rows") or 0)
        return [
            Check(
                "δ-presence",
                self.dmin <= low and high <= self.dmax,
                f"share of each class's people released between {low:.4f} and {high:.4f} "
                f"(population table of {rows:,} rows), δ between {self.dmin:g} and "
                f"{self.dmax:g} requested",
            )
        ]
