"""k-map (Sweeney; ARX's ``KMap``): every released equivalence class matches at least k people
of the population, not only k records of the sample.

Two ways, as in ARX:

* **counted**, with a research subset (:class:`..subset.ResearchSubset`): the input is the
  population table and the release a subset of it; a class passes when the population table
  holds at least k people with its quasi-identifiers (ARX's ``KMap(k, subset)``,
  ``entry.pcount >= k``);
* **estimated**, without one: from the sample size n and the population size N, the class
  sizes of the population are modelled as Poisson with mean ``λ = (n / N) * k`` (or
  zero-truncated Poisson, a class of the sample holding at least one record), and the model
  becomes k-anonymity with the derived k' that a class of the sample needs so that it matches
  fewer than k people with probability at most the significance level α (ARX's
  ``KMap(k, α, population, estimator)``, ``calculateKPoisson`` / ``calculateKZeroPoisson``,
  carried over exactly: :func:`derived_k`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import pdtr
from scipy.stats import poisson

from ..arrays import BoolArray, FloatArray
from .base import Check, Classes, Criterion, DataContext, ParamSpec

__all__ = ["ESTIMATORS", "KMap", "derived_k"]

#: The estimators of the population's class sizes, by name.
ESTIMATORS = {"poisson": "Poisson", "zero-truncated-poisson": "zero-truncated Poisson"}


@lru_cache(maxsize=256)
def derived_k(
    k: int, significance: float, sample_size: int, population_size: int, estimator: str
) -> tuple[int, float]:
    """ARX's derived k' of estimated k-map and its type 1 error (``KMap.initialize``).

    With ``λ = (sample_size / population_size) * k`` and P the Poisson distribution of mean λ:

    * Poisson: the smallest ``c`` with ``P(X <= c - 1) >= 1 - α``, counting from 0, and
      ``k' = c + 1``;
    * zero-truncated Poisson: the smallest ``c`` with ``sum_{x=1}^{c-1} P(X = x) / (1 - P(X =
      0)) >= 1 - α``, counting from 1, and ``k' = c``;

    in both, the count stops at k (the error is then 0: k records are k people for sure), and
    ``k' = min(k, k', sample_size)``. The error is 1 minus the probability reached.
    """
    lam = float(sample_size) / float(population_size) * float(k)
    threshold = 1.0 - significance
    value = 0.0
    if estimator == "poisson":
        counter = 0
        while value < threshold:
            value = float(pdtr(counter, lam))  # P(X <= counter), the regularized gamma Q
            counter += 1
            if counter >= k:
                value = 1.0
                break
        found = counter + 1
    else:
        truncated = 1.0 - float(poisson.pmf(0, lam))
        counter = 1
        while value < threshold:
            value += float(poisson.pmf(counter, lam)) / truncated
            counter += 1
            if counter >= k:
                value = 1.0
                break
        found = counter
    return min(k, found, sample_size), 1.0 - value


class KMap(Criterion):
    name = "k-map"
    label = "k-map"
    summary = (
        "Every equivalence class matches at least k people of the population: counted in the "
        "population table of a research subset, or estimated from the sample and population "
        "sizes (Poisson or zero-truncated Poisson, at a significance level)."
    )
    params = (
        ParamSpec(
            "k",
            "int",
            "k",
            "Smallest number of people of the population that share a released class's "
            "quasi-identifiers.",
            symbol="k",
            minimum=1,
            flag="--k-map",
            metavar="K",
        ),
        ParamSpec(
            "estimator",
            "choice",
            "estimator",
            "Without a research subset: how the population's class sizes are estimated.",
            choices=tuple(ESTIMATORS.items()),
            default="poisson",
            flag="--k-map-estimator",
        ),
        ParamSpec(
            "significance",
            "float",
            "significance level",
            "Without a research subset: the largest probability accepted that a class matches "
            "fewer than k people, e.g. 0.01.",
            symbol="significance level",
            minimum=0,
            maximum=1,
            default=0.01,
            flag="--significance",
            metavar="A",
        ),
    )
    uses_research_subset = "optional"
    k: int
    estimator: str
    significance: float

    def describe(self) -> str:
        return f"{self.k}-map"

    def data_problem(self, data: DataContext) -> str | None:
        if data.research_subset or data.population_size:
            return None
        return (
            "k-map needs a research subset (the population table with the released rows marked) "
            "or the population size or sampling fraction to estimate the population from."
        )

    def _counted(self, classes: Classes) -> bool:
        return classes.population is not None

    def derived(self, data: DataContext) -> tuple[int, float] | None:
        """The estimate's (k', type 1 error); None when counted or without a population size."""
        if data.research_subset or not data.population_size or data.n < 1:
            return None
        return derived_k(
            int(self.k),
            float(self.significance),
            int(data.n),
            int(data.population_size),
            self.estimator,
        )

    def _size(self, data: DataContext) -> int:
        # Without a population to estimate from, k records are k people: k-anonymity implies it.
        derived = self.derived(data)
        return int(self.k) if derived is None else derived[0]

    def min_class_size(self, data: DataContext) -> int:
        return 1 if data.research_subset else self._size(data)

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        if classes.population is not None:
            return classes.population < self.k
        return classes.sizes < self._size(data)

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        if classes.population is not None:
            return np.equal(classes.population, self.k)
        return np.equal(classes.sizes, self._size(data))

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, FloatArray]:
        if classes.population is None:
            return {}
        return {"population": classes.population.astype(np.float64)}

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return [("population", "people in the population table")]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        smallest = int(classes.sizes.min()) if len(classes.sizes) else 0
        if classes.population is not None:
            people = int(classes.population.min()) if len(classes.population) else 0
            return {
                "method": "research subset",
                "smallest_population_class": people,
                "smallest_class": smallest,
                "population_rows": int(data.population_rows or 0),
            }
        derived = self.derived(data)
        return {
            "method": self.estimator,
            "smallest_class": smallest,
            "derived_k": self._size(data),
            "type1_error": None if derived is None else derived[1],
            "population_size": int(data.population_size or 0),
            "significance": float(self.significance),
        }

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        smallest = int(achieved.get("smallest_class") or 0)
        if achieved.get("method") == "research subset":
            people = int(achieved.get("smallest_population_class") or 0)
            rows = int(achieved.get("population_rows") or 0)
            return [
                Check(
                    "k-map",
                    people >= self.k,
                    f"smallest class matches {people:,} people of the population table "
                    f"({rows:,} rows), k requested {self.k}",
                )
            ]
        size = int(achieved.get("derived_k") or self.k)
        error = achieved.get("type1_error")
        population = int(achieved.get("population_size") or 0)
        how = ESTIMATORS.get(str(achieved.get("method")), str(achieved.get("method")))
        detail = (
            f"smallest class {smallest}; {self.k}-map in a population of {population:,} "
            f"estimated ({how}, significance {float(self.significance):g}) as classes of at "
            f"least {size}"
        )
        if error is not None:
            detail += f" (type 1 error {float(error):.2%})"
        return [Check("k-map", smallest >= size, detail)]
