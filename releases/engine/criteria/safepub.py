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
from scipy.stats import binom

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
    "smallest_delta",
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


#: The most class sizes n the derivation of k may look at: ARX's loop looks at every n until
#: the Chernoff bound e^(-n(γ log(γ/β) - (γ - β))) falls below δ_k, about log(1/δ) divided by
#: that exponent. For ε near 0 or near its maximum the exponent nears 0 and the count grows
#: without bound (ε=10, δ=1e-5: some 10^10); this many take well under a second.
MAX_CLASS_SIZES = 150_000
#: The smallest δ at all: below it the binomial tails leave what doubles resolve.
MIN_DELTA = 1e-100


def _exponent(epsilon: float) -> tuple[float, float, float]:
    """β, γ and the Chernoff bound's exponent for ε, as ARX computes them."""
    # β's lower bound as ARX's interval arithmetic computes it: each operation's result
    # widened by one floating-point step (so β equals ARX's to the last bit).
    beta = _down(1.0 - _up(math.exp(_up(-epsilon))))
    power = math.exp(epsilon)
    gamma = (power - 1.0 + beta) / power
    return beta, gamma, gamma * math.log(gamma / beta) - (gamma - beta)


def smallest_delta(epsilon: float) -> float:
    """The smallest δ whose k can be derived for ε (see :data:`MAX_CLASS_SIZES`)."""
    return max(MIN_DELTA, 2 * math.exp(-MAX_CLASS_SIZES * _exponent(epsilon)[2]))


class _Tails:
    """P(Binomial(n, β) > ⌊nγ⌋) and its Chernoff bound for n = 0, 1, ...: computed in blocks as
    they are needed (SciPy's binomial survival function), to find where each δ_k's maximum
    lies; the maximum itself is then summed term by term, as ARX sums it."""

    def __init__(self, beta: float, gamma: float, exponent: float) -> None:
        self.beta, self.gamma, self.exponent = beta, gamma, exponent
        self.values = np.zeros(0)
        self.bounds = np.zeros(0)

    def upto(self, end: int) -> None:
        if end > len(self.values):
            end = max(end, 2 * len(self.values))
            n = np.arange(len(self.values), end, dtype=np.float64)
            more = binom.sf(np.floor(n * self.gamma), n, self.beta)
            self.values = np.concatenate([self.values, np.nan_to_num(more)])
            self.bounds = np.concatenate([self.bounds, np.exp(-n * self.exponent)])


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
    if delta < MIN_DELTA:
        raise EngineError(f"δ must be at least {MIN_DELTA:g}, not {delta:g}.")
    beta, gamma, exponent = _exponent(epsilon)
    if math.log(2 / delta) > MAX_CLASS_SIZES * exponent:
        if smallest_delta(epsilon) > 0.5:
            raise EngineError(
                f"ε={epsilon:g} is too large for k to be derived with a useful δ (it would need "
                f"δ ≥ {smallest_delta(epsilon):.3g}): choose a smaller ε."
            )
        raise EngineError(
            f"For ε={epsilon:g}, δ must be at least {smallest_delta(epsilon):.3g}, not "
            f"{delta:g}: a smaller δ makes k too large to derive (ARX looks at the class sizes "
            f"up to about {math.log(1 / delta) / exponent:,.0f}). Raise δ or choose an ε nearer 1."
        )
    tails = _Tails(beta, gamma, exponent)

    def delta_of(k: int) -> float:
        # ARX's loop: n from ⌈k/γ - 1⌉, the running maximum of the tails, stopping at the first
        # n where it exceeds the bound (that n included); in blocks of n.
        first = math.ceil(k / gamma - 1.0)
        start, end, carried = first, first + 256, -math.inf
        while True:
            tails.upto(end)
            running = np.maximum(np.maximum.accumulate(tails.values[start:end]), carried)
            over = np.flatnonzero(running > tails.bounds[start:end])
            if len(over):
                stop = start + int(over[0])
                break
            if tails.bounds[end - 1] < delta / 2:
                # Every tail so far and from here is below its bound, below δ/2: δ_k is too,
                # wherever ARX's loop would stop (below δ is all the search asks of it).
                return 0.0
            start, end, carried = end, end + 2 * (end - start), float(running[-1])
        worst = first + int(np.argmax(tails.values[first : stop + 1]))
        return _binomial_tail(worst, beta, math.floor(worst * gamma) + 1)

    # ARX tries k = 1, 2, ... until δ_k < δ. δ_k does not grow with k (a larger k starts the
    # maximum at a larger n, and past where a smaller k stopped every tail is below its
    # Chernoff bound, below that maximum), so the first such k is found by doubling, then
    # halving: the same k with a few dozen δ_k instead of k of them.
    low, high = 0, 1  # δ_low ≥ δ (δ_0 taken as 1), δ_high not yet known
    while not delta_of(high) < delta:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        if delta_of(middle) < delta:
            high = middle
        else:
            low = middle
    return high + 1, beta


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
        try:
            parameters(self.epsilon_anonymization, float(self.delta))  # k can be derived
        except EngineError as exc:
            if not self.epsilon_search:
                raise
            raise EngineError(
                f"{exc} (k is derived from ε less the search budget: "
                f"{self.epsilon:g} - {self.epsilon_search:g}.)"
            ) from None

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
