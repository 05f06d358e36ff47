"""Re-identification risk: prosecutor, journalist and marketer risk, and population uniqueness.

Everything here works on the sizes of the equivalence classes of a table (``f_j`` rows in class
``j``, ``n = sum f_j`` rows, ``u`` classes). Formulas follow ARX 3.9 (``RiskModelSampleSummary``,
``RiskModelPopulationUniqueness``, ``ModelPitman``, ``ModelZayatz``, ``ModelSNB``).

Prosecutor (the attacker knows the target is in the release): a record in a class of size ``f``
is re-identified with probability ``1/f``.

* highest risk     = 1 / min_j f_j
* average risk     = (1/n) sum over records of 1/f(record) = u / n
* records at risk  = (1/n) sum_j f_j [1/f_j > threshold]  (strictly greater, as ARX: with the
  default 0.2 a class of 5 is *not* at risk, one of 4 is)
* sample uniques   = (1/n) sum_j f_j [f_j == 1]

Journalist (the target is somebody of the population) and marketer (re-identify as many as
possible) risk use the population class size ``F_j`` behind each released class: ARX computes
journalist highest risk ``1/min F_j``, records at risk ``sum f_j [1/F_j > t] / n``, average
``max(u / sum F_j, (1/n) sum f_j / F_j)``, and marketer ``(1/n) sum f_j / F_j``. ARX takes
``F_j`` from a population table; without one it uses the released table itself (``F_j = f_j``),
so journalist risk equals prosecutor risk and marketer risk is ``u/n``: that is what is reported
when no population model is given. With a population model (population size ``N`` or sampling
fraction ``pi = n/N``) we have no population table, so ``1/F_j`` is replaced by its expectation
under the negative binomial model of Benedetti & Franconi (sdcMicro's individual risk), for a
class of ``f`` sample records:

    E[1/F | f] = sum_{h >= f} (1/h) C(h-1, f-1) pi^f (1-pi)^(h-f) = pi * I_f,
    I_f = integral_0^1 y^(f-1) / (pi + (1-pi) y) dy,
    I_1 = ln(1/pi) / (1-pi),  I_(f+1) = (1/f - pi I_f) / (1-pi)

(at ``pi = 1`` this is ``1/f``, the prosecutor risk), and ``sum F_j`` by ``N``.

Population uniqueness: the share of the population that is unique on the quasi-identifiers,
estimated from the sample's class-size histogram (``c_k`` classes of size ``k``) with:

* Pitman (Hoshino 2001): maximum-likelihood ``(theta, alpha)`` of the Pitman sampling formula,
  solving ``dL/dtheta = sum_{i=1}^{u-1} 1/(theta + i alpha) - sum_{i=1}^{n-1} 1/(theta + i) = 0``
  and ``dL/dalpha = sum_{i=1}^{u-1} i/(theta + i alpha) - sum_k c_k sum_{j=1}^{k-1} 1/(j - alpha)
  = 0`` by Newton's method (closed forms with digamma / trigamma, ARX's starting point, then
  ARX's 16 fall-back starts); uniques = ``N^alpha Gamma(theta + 1) / Gamma(theta + alpha)``;
* Zayatz (1991): uniques = ``c_1 / pi * P(unique | sample unique)`` with
  ``P = (c_1 h(1)) / sum_k c_k h(k)``, ``h(k)`` the hypergeometric probability of drawing
  exactly 1 of ``k`` population records in a sample of ``n`` out of ``N``;
* SNB (Chen & Keller-McNulty 1998): ``K`` population classes (Shlosser's estimator as ARX
  computes it), then ``(alpha, beta)`` solving ARX's two moment equations for ``c_1`` and
  ``c_2``; uniques = ``K beta^alpha``. ARX's second equation multiplies by
  ``(1 - D)^(alpha + 2)`` and its Shlosser sum subtracts 1 per histogram entry; we follow ARX.
* Dankar et al. (2012)'s rule: with ``pi <= 0.1`` Pitman (Zayatz if Pitman fails); otherwise the
  smaller of Zayatz and SNB (Zayatz if SNB fails).

A histogram without sample uniques has no population uniques (every estimate 0). An estimate
that fails (no convergence, out of range) is reported as ``None``; the privacy model treats it
as ARX does (see :class:`.criteria.PopulationUniqueness`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .arrays import FloatArray, IntArray
from .errors import EngineError
from .summation import block_sum

__all__ = [
    "ESTIMATORS",
    "AttackerRisk",
    "PopulationModel",
    "RiskSummary",
    "UniquenessEstimate",
    "class_sizes_of",
    "dankar",
    "expected_inverse_population_size",
    "pitman",
    "population_uniqueness",
    "risk_summary",
    "snb",
    "zayatz",
]

#: The estimators of population uniqueness, by name; "dankar" chooses among them.
ESTIMATORS = ("pitman", "zayatz", "snb", "dankar")

# ARX's solver defaults (ARXSolverConfiguration): accuracy and start values; fewer iterations per
# try than ARX's 1000 (Newton either converges in a few dozen steps or not at all).
_ACCURACY = 1e-6
_ITERATIONS = 300
_STARTS = [(a, b) for a in (0.0, 0.33, 0.66, 0.99) for b in (0.0, 0.33, 0.66, 0.99)]


# --------------------------------------------------------------------------- population model


@dataclass(frozen=True)
class PopulationModel:
    """The population the data were sampled from: its size, or the sampling fraction.

    ``size(n)`` is the population size for a sample of ``n`` records: ``population_size``, or
    ``round(n / sampling_fraction)`` (ARX's ``ARXPopulationModel.create(n, fraction)``).
    """

    population_size: int | None = None
    sampling_fraction: float | None = None

    def validate(self) -> None:
        if (self.population_size is None) == (self.sampling_fraction is None):
            raise EngineError("Give either the population size or the sampling fraction.")
        if self.population_size is not None and (
            int(self.population_size) != self.population_size or self.population_size < 1
        ):
            raise EngineError(
                f"The population size must be a whole number of people, not "
                f"{self.population_size!r}."
            )
        if self.sampling_fraction is not None and not 0 < self.sampling_fraction <= 1:
            raise EngineError(
                "The sampling fraction is the share of the population in the data, above 0 and "
                f"at most 1, not {self.sampling_fraction!r}."
            )

    def size(self, sample_size: int) -> int:
        if self.population_size is not None:
            return int(self.population_size)
        return max(int(round(sample_size / float(self.sampling_fraction or 1.0))), sample_size)

    def describe(self) -> str:
        if self.population_size is not None:
            return f"population of {int(self.population_size):,}"
        return f"sampling fraction {self.sampling_fraction:g}"

    def to_spec(self) -> dict[str, Any]:
        if self.population_size is not None:
            return {"population_size": int(self.population_size)}
        return {"sampling_fraction": float(self.sampling_fraction or 0)}

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> PopulationModel | None:
        if not spec:
            return None
        unknown = set(spec) - {"population_size", "sampling_fraction"}
        if unknown:
            raise EngineError(f"Unknown population setting {sorted(unknown)[0]!r}.")
        try:
            size = spec.get("population_size")
            fraction = spec.get("sampling_fraction")
            model = cls(
                None if size in (None, "") else int(size),
                None if fraction in (None, "") else float(fraction),
            )
        except (TypeError, ValueError):
            raise EngineError("The population size and sampling fraction are numbers.") from None
        model.validate()
        return model


# --------------------------------------------------------------------------- histogram


@dataclass(frozen=True)
class _Histogram:
    """Class-size histogram: ``counts[i]`` classes of size ``sizes[i]`` (ascending)."""

    sizes: FloatArray
    counts: FloatArray

    @classmethod
    def of(cls, class_sizes: Sequence[int] | IntArray) -> _Histogram:
        s = np.asarray(class_sizes, dtype=np.int64).ravel()
        s = s[s > 0]
        if len(s) > 1 and not bool((s[1:] >= s[:-1]).all()):
            s = np.sort(s)  # the search passes sizes already sorted: no sort then
        if len(s) == 0:
            return cls(np.zeros(0), np.zeros(0))
        starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
        counts = np.diff(np.append(starts, len(s)))
        return cls(s[starts].astype(np.float64), counts.astype(np.float64))

    @property
    def n(self) -> float:
        return float(self.sizes @ self.counts)

    @property
    def u(self) -> float:
        return float(self.counts.sum())

    def classes_of_size(self, k: int) -> float:
        hit = self.sizes == k
        return float(self.counts[hit].sum())


#: ``(f1, f2, df1/dx, df1/dy, df2/dx, df2/dy)`` of two equations at a point.
_Equations = tuple[float, float, float, float, float, float]


def _newton(
    function: Callable[[float, float], _Equations],
    start: tuple[float, float],
    constraint: Callable[[float, float], bool] | None = None,
) -> tuple[float, float] | None:
    """Newton-Raphson in two dimensions, as ARX's solver: from ``start``, then from each of
    ARX's 16 start values, stop when both equations are within 1e-6 of 0. ``function(x, y)``
    returns ``(f1, f2, df1/dx, df1/dy, df2/dx, df2/dy)``. None when no start converges."""
    for x0, y0 in [start, *_STARTS]:
        x, y = float(x0), float(y0)
        with np.errstate(all="ignore"):
            for _ in range(_ITERATIONS):
                try:
                    f1, f2, a, b, c, d = function(x, y)
                except (ValueError, OverflowError, ZeroDivisionError):
                    break
                if not (math.isfinite(f1) and math.isfinite(f2)):
                    break
                if abs(f1) <= _ACCURACY and abs(f2) <= _ACCURACY:
                    return x, y
                det = a * d - b * c
                if not math.isfinite(det) or det == 0:
                    break
                x, y = x - (d * f1 - b * f2) / det, y - (a * f2 - c * f1) / det
                if not (math.isfinite(x) and math.isfinite(y)):
                    break
                if constraint is not None and not constraint(x, y):
                    break
    return None


# --------------------------------------------------------------------------- estimators


def pitman(hist: _Histogram, population: int) -> float:
    """Estimated number of population uniques, Pitman's model (NaN when it fails)."""
    from scipy import special  # imported on first use: it is slow to import

    def trigamma(x: float) -> float:
        # The Hurwitz zeta is much faster than polygamma(1, x); for x < 0 it sums slowly, so
        # reflect: trigamma(x) = pi^2 / sin^2(pi x) - trigamma(1 - x).
        if x < 0:
            return (math.pi / math.sin(math.pi * x)) ** 2 - float(special.zeta(2, 1.0 - x))
        return float(special.zeta(2, x))

    c1 = hist.classes_of_size(1)
    if c1 == 0:
        return 0.0
    c2 = hist.classes_of_size(2) or 1.0  # ARX: an overestimate when there are none
    u, n = hist.u, hist.n
    c = c1 * (c1 - 1) / c2
    denominator = 2 * c1 * u + c1 * c - n * c
    if denominator == 0:
        return math.nan
    theta0 = (n * u * c - c1 * (n - 1) * (2 * u + c)) / denominator
    alpha0 = (theta0 * (c1 - n) + (n - 1) * c1) / (n * u)
    # sum_k c_k sum_{j<k} 1/(j - alpha) (and squared) through running sums over j: the
    # digamma / trigamma differences of ARX's closed form, without a special function per size.
    sizes = hist.sizes.astype(np.int64) - 1
    counts = hist.counts
    steps = np.arange(1, int(hist.sizes.max()), dtype=np.float64)

    def equations(t: float, a: float) -> _Equations:
        # ARX's closed forms (ModelPitman.getMasterFunctionClosed).
        v0 = u - 1.0
        v1 = float(special.digamma(v0 + t / a + 1.0))
        v2 = trigamma(u + t / a)
        v3 = trigamma(t / a + 1.0)
        v4 = float(special.digamma(t / a + 1.0))
        a2 = a * a
        d1 = (v3 - v2) / a2
        d5 = (a * v1 + t * v2 - a * v4 - t * v3) / (a2 * a)
        d3 = (a2 * v0 - t * t * v2 + t * t * v3 - 2 * a * t * v1 + 2 * a * t * v4) / (a2 * a2)
        o1 = (v1 - v4) / a
        o3 = (-t * v1 + a * v0 + t * v4) / a2
        o2 = float(special.digamma(n + t)) - float(special.digamma(t + 1.0))
        d2 = trigamma(t + 1.0) - trigamma(n + t)
        inverse = 1.0 / (steps - a)
        o4 = float(counts @ np.concatenate([[0.0], np.cumsum(inverse)])[sizes])
        d4 = float(counts @ np.concatenate([[0.0], np.cumsum(inverse * inverse)])[sizes])
        return (o1 - o2, o3 - o4, d2 - d1, -d5, -d5, -d3 - d4)

    found = _newton(equations, (theta0, alpha0), constraint=lambda t, a: t >= 0)
    if found is None:
        return math.nan
    theta, alpha = found
    if alpha == 0 or not math.isfinite(alpha):
        return math.nan
    with np.errstate(all="ignore"):
        value = float(
            np.exp(
                special.gammaln(theta + 1.0)
                - special.gammaln(theta + alpha)
                + alpha * math.log(population)
            )
        )
    return value if 0 <= value <= population else math.nan


def zayatz(hist: _Histogram, population: int) -> float:
    """Estimated number of population uniques, Zayatz's model."""
    c1 = hist.classes_of_size(1)
    if c1 == 0:
        return 0.0
    n = hist.n
    fraction = n / population
    # h(k) / h(1) = k * C(N-k, n-1) / C(N-1, n-1) = k * prod_{j=1}^{k-1} (1 - (n-1)/(N-j))
    kmax = int(hist.sizes.max())
    j = np.arange(1, kmax, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(population - j > n - 1, 1.0 - (n - 1) / (population - j), 0.0)
    log_ratio = np.concatenate([[0.0], np.cumsum(np.log(factor))])  # index k-1
    ratio = hist.sizes * np.exp(log_ratio[hist.sizes.astype(np.int64) - 1])
    total = float(hist.counts @ ratio)
    if total <= 0:
        return math.nan
    return c1 * (c1 / total) / fraction


def snb(hist: _Histogram, population: int) -> float:
    """Estimated number of population uniques, the shifted negative binomial model."""
    c1 = hist.classes_of_size(1)
    if c1 == 0:
        return 0.0
    c2 = hist.classes_of_size(2)
    f = hist.n / population
    s, cnt = hist.sizes, hist.counts
    with np.errstate(all="ignore"):
        var1 = block_sum(s * f * f * (1 - f * f) ** (s - 1) * cnt)
        var2 = block_sum((1 - f) ** s * cnt * (1 + f) ** s - 1)  # as ARX computes it
        var3 = block_sum((1 - f) ** s * cnt)
        var4 = block_sum(s * f * (1 - f) ** (s - 1) * cnt)
        k = hist.u + c1 * (var1 / var2) * (var3 / var4) ** 2
    if not math.isfinite(k):
        return math.nan

    def equations(a: float, b: float) -> _Equations:
        # ARX's ModelSNB object function and (Matlab-derived) derivatives, as written there.
        dv = (1 - f) * (1 - b)
        f1 = k * f * (b / (1 - dv)) ** a * ((a * dv) / (1 - dv) + 1) - c1
        f2 = k * a * b**a * (f * f) * (1 - b) / 2 * (1 - dv) ** (a + 2) * (2 - (1 - a) * dv) - c2
        val0 = (b - 1) * (f - 1)
        val1 = val0 - 1
        val2 = 1 - val0
        val3 = a * val0 / val1 - 1
        val4 = (-b / val1) ** a
        val6 = f**2
        val7 = b**a
        val8 = val7 * val6 * k
        val9 = a * val8
        val10 = 2 * val2 ** (a + 2)
        val11 = val1**2
        val13 = f * k
        val14 = f - 1
        val15 = a - 1
        val16 = b - 1
        val17 = val15 * val0
        val18 = val6 * k
        val19 = val17 + 2
        val20 = val18 * val19
        x1 = -val13 * math.log(-b / val1) * val3 * val4 - (val13 * val4 * val0) / val1
        x2 = a * val13 * (1 / val1 - (b * val14) / val11) * val3 * (-b / val1) ** val15 - (
            val13 * val4 * ((a * val14) / val1 - (a * val16 * val14**2) / val11)
        )
        y1 = (
            (val9 * math.log(val2) * val19 * val16) / val10
            - (val9 * val16**2 * val14) / val10
            - (val7 * val20 * val16) / val10
            - (a * val7 * val18 * math.log(b) * val19 * val16) / val10
        )
        y2 = (
            -(val9 * val19) / val10
            - (a**2 * b**val15 * val20 * val16) / val10
            - (a * val7 * val18 * val17) / val10
            - (a * val7 * val20 * (a + 2) * val0) / (2 * val2 ** (a + 3))
        )
        return (f1, f2, x1, x2, y1, y2)

    found = _newton(equations, (1.0, 1.0))
    if found is None:
        return math.nan
    alpha, beta = found
    with np.errstate(all="ignore"):
        value = k * beta**alpha
    return float(value) if math.isfinite(value) else math.nan


def _valid(value: float) -> bool:
    return not math.isnan(value) and value != 0


def dankar(hist: _Histogram, population: int, zayatz_fallback: bool = True) -> tuple[float, str]:
    """Dankar et al.'s choice: ``(uniques, model)``; uniques NaN when no estimate is valid.
    ``zayatz_fallback=False`` is how ARX's privacy model calls it (no Zayatz after Pitman)."""
    if hist.classes_of_size(1) == 0:
        return 0.0, "none"
    if hist.n / population <= 0.1:
        value = pitman(hist, population)
        if _valid(value):
            return value, "pitman"
        if zayatz_fallback:
            return zayatz(hist, population), "zayatz"
        return math.nan, "pitman"
    value_snb = snb(hist, population)
    value_zayatz = zayatz(hist, population)
    if _valid(value_snb):
        if value_zayatz < value_snb:
            return value_zayatz, "zayatz"
        return value_snb, "snb"
    return value_zayatz, "zayatz"


_ESTIMATE = {"pitman": pitman, "zayatz": zayatz, "snb": snb}


def population_uniques(
    class_sizes: Sequence[int] | IntArray, population: int, estimator: str
) -> float:
    """Share of the population estimated unique (uniques / N) with one estimator, 0 when the
    estimate fails (as ARX's ``getFractionOfUniqueTuples``)."""
    hist = _Histogram.of(class_sizes)
    if hist.n == 0 or hist.classes_of_size(1) == 0:
        return 0.0
    key = (hist.sizes.tobytes(), hist.counts.tobytes(), int(population), estimator)
    return _cached_uniques(key)


@functools.lru_cache(maxsize=4096)
def _cached_uniques(key: tuple[bytes, bytes, int, str]) -> float:
    # The search meets the same class-size histograms again (e.g. across suppression prefixes
    # of neighbouring transformations); solving Pitman / SNB again would cost milliseconds.
    sizes, counts, population, estimator = key
    hist = _Histogram(np.frombuffer(sizes), np.frombuffer(counts))
    if estimator == "dankar":
        value, _ = dankar(hist, population, zayatz_fallback=False)
    else:
        value = _ESTIMATE[estimator](hist, population)
    return value / population if _valid(value) else 0.0


@dataclass(frozen=True)
class UniquenessEstimate:
    """Estimated share of the population unique on the quasi-identifiers (None: failed)."""

    population_size: int
    sampling_fraction: float
    sample_uniques: float  # share of the sample's records alone in their class
    pitman: float | None
    zayatz: float | None
    snb: float | None
    dankar: float | None
    dankar_model: str  # "pitman", "zayatz", "snb" or "none" (no sample uniques)

    def as_dict(self) -> dict[str, Any]:
        return {
            "population_size": self.population_size,
            "sampling_fraction": self.sampling_fraction,
            "sample_uniques": self.sample_uniques,
            "pitman": self.pitman,
            "zayatz": self.zayatz,
            "snb": self.snb,
            "dankar": self.dankar,
            "dankar_model": self.dankar_model,
        }


def population_uniqueness(
    class_sizes: Sequence[int] | IntArray, population: int
) -> UniquenessEstimate:
    """Every estimator's share of population uniques, and Dankar's choice (see module doc)."""
    hist = _Histogram.of(class_sizes)
    n = hist.n
    if n == 0:
        return UniquenessEstimate(population, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, "none")
    values = {name: estimate(hist, population) for name, estimate in _ESTIMATE.items()}
    chosen, model = dankar(hist, population)

    def share(value: float) -> float | None:
        return None if math.isnan(value) else float(value) / population

    return UniquenessEstimate(
        population_size=int(population),
        sampling_fraction=n / population,
        sample_uniques=hist.classes_of_size(1) / n,
        pitman=share(values["pitman"]),
        zayatz=share(values["zayatz"]),
        snb=share(values["snb"]),
        dankar=share(chosen),
        dankar_model=model,
    )


# --------------------------------------------------------------------------- attacker risks


def expected_inverse_population_size(sizes: IntArray, fraction: float) -> FloatArray:
    """``E[1/F | f]`` for each sample class size ``f`` (Benedetti & Franconi; module doc)."""
    f = np.asarray(sizes, dtype=np.int64)
    if f.size == 0:
        return np.zeros(0)
    if fraction >= 1.0:
        return 1.0 / f
    p = float(fraction)
    if p >= 0.5:
        # I_f = sum_m (1-p)^m B(f, m+1); terms shrink by at least (1-p) <= 1/2.
        term = 1.0 / f.astype(np.float64)
        total = term.copy()
        for m in range(1, 80):
            term = term * (1 - p) * m / (f + m)
            total += term
        return p * total
    # Forward recursion, stable for p < 1/2 (errors shrink by p / (1-p) each step).
    top = int(f.max())
    values = np.empty(top)
    values[0] = -math.log(p) / (1 - p)
    for k in range(1, top):
        values[k] = (1.0 / k - p * values[k - 1]) / (1 - p)
    return p * np.take(values, f - 1)


@dataclass(frozen=True)
class AttackerRisk:
    highest: float
    average: float
    records_at_risk: float

    def as_dict(self) -> dict[str, float]:
        return {
            "highest": self.highest,
            "average": self.average,
            "records_at_risk": self.records_at_risk,
        }


@dataclass(frozen=True)
class RiskSummary:
    """Re-identification risk of one table (formulas in the module docstring).

    The first fields are the prosecutor risk. ``journalist`` and ``marketer`` use the population
    model when one was given, else they assume the table is the population (as ARX does
    without a population table). ``population`` holds the population-uniqueness estimates
    (None without a population model).
    """

    highest: float
    average: float
    records_at_risk: float
    sample_uniques: float
    threshold: float = 0.2
    journalist: AttackerRisk | None = None
    marketer: float | None = None
    population: UniquenessEstimate | None = None
    population_model: str | None = None

    @property
    def prosecutor(self) -> AttackerRisk:
        return AttackerRisk(self.highest, self.average, self.records_at_risk)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready; the top-level ``highest`` / ``average`` / ``records_at_risk`` are the
        prosecutor's (as before journalist and marketer risk were added)."""
        journalist = self.journalist or self.prosecutor
        return {
            "highest": self.highest,
            "average": self.average,
            "records_at_risk": self.records_at_risk,
            "sample_uniques": self.sample_uniques,
            "threshold": self.threshold,
            "prosecutor": self.prosecutor.as_dict(),
            "journalist": journalist.as_dict(),
            "marketer": {"average": self.average if self.marketer is None else self.marketer},
            "population_model": self.population_model,
            "population": None if self.population is None else self.population.as_dict(),
        }


def risk_summary(
    class_sizes: Sequence[int] | IntArray,
    threshold: float = 0.2,
    population: PopulationModel | None = None,
    population_size: int | None = None,
) -> RiskSummary:
    """Prosecutor, journalist and marketer risk (and population uniqueness with a population
    model) of a table given the sizes of its equivalence classes (see module doc).

    ``population_size``: N when it is already known (the released rows of a release are a
    sample of the population the input was sampled from, so its N comes from the input).
    """
    sizes = np.asarray(class_sizes, dtype=np.int64).ravel()
    sizes = sizes[sizes > 0]  # an empty class holds no record and carries no risk
    n = int(sizes.sum()) if sizes.size else 0
    if n == 0:
        empty = AttackerRisk(0.0, 0.0, 0.0)
        return RiskSummary(0.0, 0.0, 0.0, 0.0, float(threshold), empty, 0.0)
    highest = 1.0 / float(sizes.min())
    average = float(sizes.size) / n
    at_risk = float(sizes[1.0 / sizes > threshold].sum()) / n
    uniques = float(sizes[sizes == 1].sum()) / n
    if population_size is None and population is not None:
        population_size = population.size(n)
    if population_size is None:
        journalist = AttackerRisk(highest, average, at_risk)
        return RiskSummary(
            highest, average, at_risk, uniques, float(threshold), journalist, average
        )
    big_n = max(int(population_size), n)
    risk = expected_inverse_population_size(sizes, n / big_n)
    marketer = block_sum(sizes * risk) / n
    journalist = AttackerRisk(
        float(risk.max()),
        max(float(sizes.size) / big_n, marketer),
        float(sizes[risk > threshold].sum()) / n,
    )
    return RiskSummary(
        highest,
        average,
        at_risk,
        uniques,
        float(threshold),
        journalist,
        marketer,
        population_uniqueness(sizes, big_n),
        population.describe() if population is not None else f"population of {big_n:,}",
    )


def class_sizes_of(df: pd.DataFrame, columns: Sequence[str]) -> IntArray:
    """Sizes of the equivalence classes of ``df`` on ``columns`` (a missing "" is a value).

    With no columns the whole table is one class.
    """
    cols = list(columns)
    if len(df) == 0:
        return np.zeros(0, dtype=np.int64)
    if not cols:
        return np.array([len(df)], dtype=np.int64)
    # dropna=False: NaN (if any slipped in) forms its own class instead of vanishing;
    # observed=True: Categoricals give the classes that occur, not every combination.
    sizes = df.groupby(cols, sort=False, dropna=False, observed=True).size()
    return np.asarray(sizes, dtype=np.int64)
