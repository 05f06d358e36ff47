"""(ε, δ)-differentially private microdata, SafePub (Bild, Kuhn and Prasser, PoPETs 2018; ARX's
``EDDifferentialPrivacy``).

A release satisfies (ε, δ)-differential privacy when it is made in three steps: every input row
is kept with probability β (random sampling), the sample is generalized by a transformation
chosen without looking at the data (data-independent: a generalization scheme the requester
gives) or by the exponential mechanism, which spends a part ε_search of ε
(data-dependent), and every class of the sample with fewer than k rows is suppressed. β and k
follow from ε (less ε_search) and δ exactly as ARX's ``ParameterCalculation`` derives them
(:func:`parameters`): β = 1 - e^-ε and k the smallest class size whose δ_k falls below δ
(plus one, as ARX's loop counts it).

The criterion judges the classes of the sample (the engine samples and releases only the
sampled rows; see :mod:`..safepub`): a class fails when it holds fewer than k sampled rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import gammaln

from ..arrays import BoolArray
from ..errors import EngineError
from .base import Check, Classes, Criterion, DataContext, ParamSpec

__all__ = [
    "DEGREES",
    "SafePub",
    "anonymization_epsilon",
    "parameters",
    "sample_rows",
    "scheme_level",
]

#: ARX's ``DataGeneralizationScheme.GeneralizationDegree``: the share of each hierarchy's
#: highest level a data-independent scheme generalizes to.
DEGREES: dict[str, float] = {
    "none": 0.0,
    "low": 0.2,
    "low-medium": 0.4,
    "medium": 0.5,
    "medium-high": 0.6,
    "high": 0.8,
    "complete": 1.0,
}

#: ARX's default share of ε spent on the data-dependent search (``setDPSearchBudget``).
DEFAULT_SEARCH_BUDGET = 0.1


def scheme_level(degree: str, height: int) -> int:
    """The level ARX's scheme of ``degree`` applies to a hierarchy of ``height`` levels (Java's
    ``Math.round``: halves go up)."""
    return int(math.floor(DEGREES[degree] * (height - 1) + 0.5))


def _binomial_tail(n: int, beta: float, first: int) -> float:
    """P(X >= first) for X ~ Binomial(n, beta), summed term by term as ARX does."""
    if first > n:
        return 0.0
    j = np.arange(first, n + 1, dtype=np.float64)
    log_p = (
        gammaln(n + 1.0)
        - gammaln(j + 1.0)
        - gammaln(n - j + 1.0)
        + j * math.log(beta)
        + (n - j) * math.log1p(-beta)
    )
    return float(np.exp(log_p).sum())


def _down(value: float) -> float:
    return math.nextafter(value, -math.inf)


def _up(value: float) -> float:
    return math.nextafter(value, math.inf)


def anonymization_epsilon(epsilon: float, epsilon_search: float) -> float:
    """ε left for the sampling: ε - ε_search, its lower bound as ARX's interval arithmetic
    rounds it (ε itself when nothing is spent on the search)."""
    return _down(epsilon - epsilon_search) if epsilon_search else float(epsilon)


@lru_cache(maxsize=64)
def parameters(epsilon: float, delta: float) -> tuple[int, float]:
    """(k, β) of (ε, δ)-DP by sampling and k-suppression, as ARX's ``ParameterCalculation``:
    β = 1 - e^-ε; γ = (e^ε - 1 + β) / e^ε; for a class size k, δ_k is the largest
    P(Binomial(n, β) > ⌊nγ⌋) over n from ⌈k/γ - 1⌉ until it is no smaller than the bound
    e^(-n(γ log(γ/β) - (γ - β))); k is one more than the first k whose δ_k is below δ."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise EngineError(f"ε must be a number above 0, not {epsilon!r}.")
    if not 0 < delta < 1:
        raise EngineError(f"δ must be above 0 and below 1, not {delta!r}.")
    # β's lower bound as ARX's interval arithmetic computes it: each operation's result
    # widened by one floating-point step (so β equals ARX's to the last bit).
    beta = _down(1.0 - _up(math.exp(_up(-epsilon))))
    power = math.exp(epsilon)
    gamma = (power - 1.0 + beta) / power
    exponent = gamma * math.log(gamma / beta) - (gamma - beta)
    tails: dict[int, float] = {}

    def delta_of(k: int) -> float:
        n = math.ceil(k / gamma - 1.0)
        worst, bound = -math.inf, math.inf
        while worst <= bound:
            if n not in tails:
                tails[n] = _binomial_tail(n, beta, math.floor(n * gamma) + 1)
            worst = max(worst, tails[n])
            bound = math.exp(-n * exponent)
            n += 1
        return worst

    k = 1
    delta_k = math.inf
    while not delta_k < delta:
        delta_k = delta_of(k)
        k += 1
        if k > 1_000_000:  # pragma: no cover - δ below what doubles can tell apart
            raise EngineError(f"δ={delta:g} is too small for ε={epsilon:g}.")
    return k, beta


def sample_rows(n: int, beta: float, seed: int) -> BoolArray:
    """Each of ``n`` rows kept with probability ``beta`` (Bernoulli), drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    return np.asarray(rng.random(n) < beta, dtype=bool)


class SafePub(Criterion):
    name = "safepub"
    label = "(ε, δ)-differential privacy (SafePub)"
    summary = (
        "Rows are sampled, generalized and every class smaller than k is suppressed, so that "
        "the release is (ε, δ)-differentially private; spends ε from the dataset's budget."
    )
    params = (
        ParamSpec(
            "epsilon",
            "float",
            "ε",
            "The privacy budget of the release, e.g. 1 (on the command line EPSILON,DELTA).",
            symbol="ε",
            minimum=0,
            minimum_exclusive=True,
            maximum=10,
            flag="--safepub",
            metavar="EPSILON,DELTA",
            pair="delta",
        ),
        ParamSpec(
            "delta",
            "float",
            "δ",
            "The probability the guarantee may fail, e.g. 0.00001 (below 1 / rows).",
            symbol="δ",
            minimum=0,
            maximum=1,
            minimum_exclusive=True,
            maximum_exclusive=True,
            metavar="DELTA",
            flag="--safepub-delta",
        ),
        ParamSpec(
            "search_budget",
            "float",
            "search budget ε_search",
            "The part of ε the data-dependent search spends choosing the generalization "
            "(0: data-independent, a generalization scheme; default 0.1 without a scheme).",
            symbol="ε_search",
            required=False,
            minimum=0,
            metavar="EPSILON",
            flag="--safepub-search-budget",
        ),
        ParamSpec(
            "steps",
            "int",
            "search steps",
            "Steps of the data-dependent search (default: the lattice's height).",
            required=False,
            minimum=1,
            metavar="N",
            flag="--safepub-steps",
        ),
        ParamSpec(
            "degree",
            "choice",
            "generalization scheme",
            "Data-independent: every quasi-identifier generalized to this share of its "
            "hierarchy's height (ARX's scheme), unless fixed levels are given.",
            required=False,
            choices=tuple((d, d.replace("-", " ")) for d in DEGREES),
            flag="--safepub-degree",
        ),
        ParamSpec(
            "seed",
            "int",
            "random seed",
            "Seed of the sampling and of the search (a fresh one when omitted; kept in the "
            "report).",
            required=False,
            minimum=0,
            metavar="N",
            flag="--safepub-seed",
        ),
    )
    local_recoding = False
    epsilon: float
    delta: float
    search_budget: float | None
    steps: int | None
    degree: str | None
    seed: int | None

    def validate(self) -> None:
        super().validate()
        if self.search_budget is not None and self.search_budget >= self.epsilon:
            raise EngineError(
                f"The search budget ε_search={self.search_budget:g} must be below "
                f"ε={self.epsilon:g}: the rest is spent on the sampling."
            )
        if self.degree is not None and self.search_budget:
            raise EngineError(
                "A generalization scheme is data-independent: give it without a search budget."
            )

    @property
    def data_dependent(self) -> bool:
        """Whether the exponential mechanism chooses the generalization."""
        return bool(self.search_budget) or (self.search_budget is None and self.degree is None)

    @property
    def epsilon_search(self) -> float:
        if not self.data_dependent:
            return 0.0
        return DEFAULT_SEARCH_BUDGET if self.search_budget is None else float(self.search_budget)

    @property
    def k(self) -> int:
        return parameters(self.epsilon_anonymization, float(self.delta))[0]

    @property
    def beta(self) -> float:
        return parameters(self.epsilon_anonymization, float(self.delta))[1]

    @property
    def epsilon_anonymization(self) -> float:
        return anonymization_epsilon(float(self.epsilon), self.epsilon_search)

    def describe(self) -> str:
        mode = (
            f"data-dependent search with ε_search={self.epsilon_search:g}"
            if self.data_dependent
            else "data-independent"
        )
        return f"({self.epsilon:g}, {self.delta:g})-differential privacy (SafePub, {mode})"

    def monotone(self, with_suppression: bool) -> bool:
        return not with_suppression

    def min_class_size(self, data: DataContext) -> int:
        return self.k

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        return classes.sizes < self.k

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        return np.equal(classes.sizes, self.k)

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        sizes = classes.sizes[classes.sizes > 0]
        return {
            "k": self.k,
            "beta": self.beta,
            "smallest_class": int(sizes.min()) if len(sizes) else 0,
            "epsilon": float(self.epsilon),
            "delta": float(self.delta),
            "epsilon_search": self.epsilon_search,
            "mode": "data-dependent" if self.data_dependent else "data-independent",
        }

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        smallest = int(achieved.get("smallest_class") or 0)
        k = int(achieved.get("k") or self.k)
        sampled = achieved.get("sampled_rows")
        mode = achieved.get("mode") or ("data-dependent" if self.data_dependent else "")
        detail = (
            f"smallest class {smallest}, k={k} from ε={self.epsilon:g}, δ={self.delta:g} ({mode})"
        )
        if sampled is not None:
            detail += f"; {sampled} rows sampled with β={float(achieved.get('beta') or 0):.4f}"
        return [Check("differential privacy (SafePub)", smallest == 0 or smallest >= k, detail)]
