"""Privacy models: each one defined once, here.

A privacy model (a *criterion*, as ARX calls it) is one class below: its parameters and their
validation, its description, how it evaluates equivalence classes (vectorised over all classes
at once), whether it is monotone (for pruning the search), what it achieved on a release and
the check line a privacy officer reads. The optimal search, Mondrian, the result's classes
table, the command line and the review checks all work from these definitions, so adding a
model is adding a class here (registered in :data:`REGISTRY`) and its tests.

Two kinds of criteria, as in ARX:

* per-class criteria (``scope = "class"``) say for every equivalence class whether it passes;
  classes that fail are suppressed (k-anonymity, l-diversity, t-closeness, δ-disclosure,
  β-likeness, highest risk);
* dataset criteria (``scope = "dataset"``) judge the distribution of class sizes of the whole
  release (average risk, population uniqueness). As ARX's ``RiskBasedCriterion.enforce``:
  after the per-class criteria, the remaining classes are ordered smallest first (ties: lower
  information loss, then earlier first row) and the shortest prefix whose suppression fulfils
  the criterion is found by ARX's binary search
  (``HashGroupifyDistribution.suppressWhileNotFulfilledBinary``). Classes whose every
  quasi-identifier is ``*`` take no part (ARX counts them as suppressed for risk, but not
  against the suppression limit). A transformation is valid when all suppressed rows number at
  most the suppression limit.

Interface for the web layer
---------------------------

* Listing models for a form: ``for c in REGISTRY.values()`` gives ``c.name`` (stable slug, used
  in storage and on the command line), ``c.label``, ``c.summary`` (one sentence for the page),
  ``c.needs_sensitive``, ``c.needs_population`` and ``c.params``: :class:`ParamSpec` with
  ``name``, ``kind`` ("int" / "float" / "choice"), ``label``, ``help``, ``minimum`` /
  ``maximum`` (and whether they are exclusive), ``choices`` (value, label), ``default``,
  ``required`` and ``flag`` (the command-line option). A form field's name is
  ``spec.key(c.name)`` (``"<model>__<param>"``); a model is requested when its first
  parameter (``c.params[0]``, the threshold) has a value. :data:`POPULATION_PARAMS` are the
  fields of the population model (``population_size``, ``sampling_fraction``).
* Building a model: ``PrivacyModel.from_fields(form.cleaned_data, suppression_limit=...)``
  from such fields, or ``PrivacyModel.from_spec(json)`` from the stored JSON, which
  ``model.to_spec()`` writes::

      {"criteria": [{"model": "k-anonymity", "k": 5},
                    {"model": "l-diversity", "variant": "entropy", "l": 2}],
       "suppression_limit": 0.05, "population": {"sampling_fraction": 0.01}}

  Both raise :class:`EngineError` with a sentence for the person; ``model.fields()`` gives the
  flat fields back (to fill the form from a stored model). ``model.describe()`` is the
  one-line description ("k=5, entropy 2-diversity, at most 5% of rows suppressed").
* The classes table: ``result.classes`` has a column per quasi-identifier, ``size``, then for
  each sensitive attribute S the columns ``S:distinct_l``, ``S:entropy_l``, ``S:t`` and each
  criterion's own (``S:recursive_l``, ``S:delta``, ``S:beta``), then ``fails`` (names of the
  models a class fails) and ``borderline`` (those it only just passes:
  :meth:`Criterion.class_borderline`). ``model.class_column_labels(sensitive)`` lists (column, label) pairs.
* Check lines from a stored summary: ``checks(summary)`` with ``summary = result.report()``
  (JSON-serialisable; its ``"privacy_model"`` holds the spec and ``"models"`` each criterion's
  achieved values) returns :class:`Check` (name, passed, detail) per model and attribute, and
  the suppression limit's.
* Candidates: ``report["candidates"]`` (``result.candidates``) is the Pareto front of the
  valid transformations evaluated, each ``{"levels", "loss", "highest_risk", "suppressed",
  "optimum"}``; re-running with ``AnonymizationConfig(levels=candidate["levels"])`` applies
  one (``report["levels_fixed"]`` is then true and ``report["optimum"]`` still names the
  optimum, to compare).
* Risk: ``report["risk_before"]`` / ``["risk_after"]`` keep the prosecutor figures at the top
  (``highest``, ``average``, ``records_at_risk``, ``sample_uniques``) and add ``journalist``,
  ``marketer`` and, with a population model, ``population`` (each estimator's share of
  population uniques, ``dankar`` and ``dankar_model``; ``None`` for an estimate that failed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from .errors import EngineError
from .privacy import (
    SensitiveCounts,
    TContext,
    distinct_l,
    entropy_l,
    recursive_cl,
    recursive_l_value,
    t_distance,
)
from .risk import PopulationModel, population_uniques

__all__ = [
    "POPULATION_PARAMS",
    "REGISTRY",
    "AverageRisk",
    "BORDERLINE_SHARE",
    "BetaLikeness",
    "Check",
    "Classes",
    "Criterion",
    "DataContext",
    "DeltaDisclosure",
    "Evaluation",
    "HighestRisk",
    "KAnonymity",
    "LDiversity",
    "ParamSpec",
    "PopulationUniqueness",
    "PrivacyModel",
    "TCloseness",
    "checks",
    "size_threshold",
]

# Tolerance for floating-point comparisons against thresholds.
_EPS = 1e-9

#: A class whose measure uses more than this share of what a continuous threshold allows
#: (t, δ, β, entropy l) "only just passes".
BORDERLINE_SHARE = 0.9


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a privacy model, enough to build a form field or a command-line option.

    ``minimum`` / ``maximum`` bound the value (exclusive when ``*_exclusive``); ``integer``
    floats must be whole unless ``whole=False``; ``choices`` are (value, label) pairs.
    """

    name: str
    kind: Literal["int", "float", "choice"]
    label: str
    help: str = ""
    symbol: str = ""  # how messages name it ("k", "δ", ...)
    default: Any = None
    required: bool = True
    minimum: float | None = None
    maximum: float | None = None
    minimum_exclusive: bool = False
    maximum_exclusive: bool = False
    choices: tuple[tuple[str, str], ...] = ()
    flag: str | None = None
    metavar: str | None = None

    def key(self, model: str) -> str:
        """The form field / flat key of this parameter of ``model``."""
        return f"{model}__{self.name}"

    def coerce(self, raw: Any) -> Any:
        """The value as its kind (``None`` when absent); an unreadable value is an error."""
        if raw is None or (isinstance(raw, str) and raw.strip() == ""):
            return self.default
        who = self.symbol or self.label
        if self.kind == "choice":
            value = str(raw).strip()
            if value not in {c for c, _ in self.choices}:
                allowed = ", ".join(c for c, _ in self.choices)
                raise EngineError(f"Unknown {self.label} {value!r}; use one of {allowed}.")
            return value
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise EngineError(f"{who} must be a number, not {raw!r}.") from None
        if self.kind == "int" and value.is_integer():
            return int(value)
        return value  # a fractional "int" is kept so that validate() can name it

    def problem(self, value: Any, owner: str) -> str | None:
        """A sentence saying what is wrong with ``value``, or None."""
        who = self.symbol or self.label
        if value is None:
            return f"{owner} needs {self.label}." if self.required else None
        if self.kind == "choice":
            return None
        if not math.isfinite(float(value)):
            return f"{who} must be a finite number, not {value!r}."
        low, high = self.minimum, self.maximum
        whole = self.kind == "int"
        below = low is not None and (value <= low if self.minimum_exclusive else value < low)
        above = high is not None and (value >= high if self.maximum_exclusive else value > high)
        if (whole and int(value) != value) or below or above:
            return f"{who} must be {self._range(whole)}, not {value!r}."
        return None

    def _range(self, whole: bool) -> str:
        low, high = self.minimum, self.maximum
        if whole:
            return f"a whole number of at least {low:g}" if low is not None else "a whole number"
        if low is not None and high is not None:
            left = "above" if self.minimum_exclusive else "at least"
            right = "below" if self.maximum_exclusive else "at most"
            if not self.minimum_exclusive and not self.maximum_exclusive:
                return f"between {low:g} and {high:g}"
            return f"{left} {low:g} and {right} {high:g}"
        if low is not None:
            return f"{'above' if self.minimum_exclusive else 'at least'} {low:g}"
        if high is not None:
            return f"{'below' if self.maximum_exclusive else 'at most'} {high:g}"
        return "a number"


#: The population model's fields (for the form and the command line).
POPULATION_PARAMS = (
    ParamSpec(
        "population_size",
        "int",
        "population size",
        "How many people the data were drawn from (for population uniqueness and the "
        "journalist and marketer risk).",
        minimum=1,
        required=False,
        flag="--population-size",
        metavar="N",
    ),
    ParamSpec(
        "sampling_fraction",
        "float",
        "sampling fraction",
        "The data's share of that population (instead of its size), e.g. 0.01 for 1 in 100.",
        minimum=0,
        maximum=1,
        minimum_exclusive=True,
        required=False,
        flag="--sampling-fraction",
        metavar="F",
    ),
)


@dataclass(frozen=True)
class Check:
    """One line of the review checks."""

    name: str
    passed: bool
    detail: str


# --------------------------------------------------------------------------- data the criteria see


@dataclass
class Classes:
    """The equivalence classes of a candidate release: rows per class and, per sensitive
    attribute, sparse counts of its values per class."""

    sizes: np.ndarray
    sensitive: Mapping[str, SensitiveCounts] = field(default_factory=dict)

    def subset(self, keep: np.ndarray) -> Classes:
        return Classes(
            self.sizes[keep], {name: sc.subset(keep) for name, sc in self.sensitive.items()}
        )


class DataContext:
    """What criteria need to know about the whole input: its size, the sensitive attributes
    (integer codes of every input row, labels, optional hierarchies) and the population size.
    Distributions and t-closeness contexts are computed once, on demand."""

    def __init__(
        self,
        n: int,
        sensitive_codes: Mapping[str, np.ndarray] | None = None,
        sensitive_labels: Mapping[str, Sequence[str]] | None = None,
        sensitive_hierarchies: Mapping[str, Any] | None = None,
        population_size: int | None = None,
    ) -> None:
        self.n = int(n)
        self.codes = dict(sensitive_codes or {})
        self.labels = {k: list(v) for k, v in (sensitive_labels or {}).items()}
        self.hierarchies = dict(sensitive_hierarchies or {})
        self.population_size = population_size
        self._q: dict[str, np.ndarray] = {}
        self._t: dict[tuple[str, str], TContext] = {}

    @property
    def sensitive(self) -> list[str]:
        return list(self.codes)

    def distribution(self, name: str) -> np.ndarray:
        """Share of the input rows holding each value (by code) of sensitive ``name``."""
        if name not in self._q:
            codes = self.codes[name]
            m = len(self.labels.get(name, ())) or (int(codes.max()) + 1 if len(codes) else 0)
            self._q[name] = np.bincount(codes, minlength=m) / max(len(codes), 1)
        return self._q[name]

    def t_context(self, name: str, distance: str) -> TContext:
        key = (name, distance)
        if key not in self._t:
            labels = self.labels.get(name)
            self._t[key] = TContext.build(
                self.codes[name],
                distance,
                labels,
                self.hierarchies.get(name),
                n_values=len(labels) if labels else None,
            )
        return self._t[key]


def _class_max(values: np.ndarray, sc: SensitiveCounts, empty: float = 0.0) -> np.ndarray:
    """Per class, the largest of ``values`` (one per cell of ``sc``, cells sorted by class)."""
    out = np.full(sc.n_groups, empty, dtype=np.float64)
    if len(values) == 0:
        return out
    starts = np.flatnonzero(np.concatenate(([True], sc.group[1:] != sc.group[:-1])))
    out[sc.group[starts]] = np.maximum.reduceat(values, starts)
    return out


def _cell_shares(sc: SensitiveCounts) -> np.ndarray:
    """Each cell's share of its class."""
    sizes = np.bincount(sc.group, weights=sc.count, minlength=sc.n_groups)
    return sc.count / sizes[sc.group]


def _smallest_size(capacity: np.ndarray, need: float) -> int:
    """The smallest s such that the s largest ``capacity`` values sum to at least ``need``
    (a class of s rows holds at most s values); ``len + 1`` when none."""
    total = np.cumsum(np.sort(capacity)[::-1])
    ok = np.flatnonzero(total >= need - _EPS)
    return int(ok[0]) + 1 if len(ok) else len(capacity) + 1


def size_threshold(risk: float) -> int:
    """ARX's ``ParameterTranslation.getSizeThreshold``: the class size that keeps the highest
    re-identification risk at ``risk``, allowing 1 % rounding."""
    if risk <= 0:
        return 2**31 - 1
    size = 1.0 / risk
    floor = math.floor(size)
    if (1.0 / floor) - (1.0 / size) >= 0.01 * risk:
        floor += 1
    return int(floor)


# --------------------------------------------------------------------------- the criteria


class Criterion:
    """A privacy model with its parameters (see the module docstring).

    Subclasses set the class attributes and implement the evaluation methods of their scope.
    Instances are immutable values; equal when model and parameters are equal.
    """

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    params: ClassVar[tuple[ParamSpec, ...]] = ()
    scope: ClassVar[Literal["class", "dataset"]] = "class"
    needs_sensitive: ClassVar[bool] = False
    needs_population: ClassVar[bool] = False
    #: Whether Mondrian (local recoding) can enforce the model.
    local_recoding: ClassVar[bool] = True

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - {p.name for p in self.params}
        if unknown:
            raise EngineError(f"{self.label} has no parameter {sorted(unknown)[0]!r}.")
        for spec in self.params:
            object.__setattr__(self, spec.name, spec.coerce(values.get(spec.name)))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("privacy models are immutable")

    @property
    def values(self) -> dict[str, Any]:
        return {p.name: getattr(self, p.name) for p in self.params}

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Criterion) and other.name == self.name and other.values == self.values
        )

    def __hash__(self) -> int:
        return hash((self.name, tuple(self.values.items())))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.values.items())
        return f"{type(self).__name__}({args})"

    def to_spec(self) -> dict[str, Any]:
        return {"model": self.name, **{k: v for k, v in self.values.items() if v is not None}}

    # --- validation and description
    def validate(self) -> None:
        """Raise :class:`EngineError` naming the first parameter that is wrong."""
        for spec in self.params:
            problem = spec.problem(getattr(self, spec.name), self.label)
            if problem:
                raise EngineError(problem)

    def describe(self) -> str:
        raise NotImplementedError

    # --- properties used by the search
    def monotone(self, with_suppression: bool) -> bool:
        """Whether validity carries over to every generalization (ARX's
        ``isMonotonicWithSuppression`` / ``isMonotonicWithGeneralization``)."""
        return True

    def min_class_size(self, data: DataContext) -> int:
        """Classes smaller than this fail for sure (1 when no such bound is known)."""
        return 1

    def implied(self, data: DataContext) -> list[Criterion]:
        """Per-class criteria, monotone even with suppression, that every release satisfying
        this one satisfies too (used to prune when this one is not monotone)."""
        if self.scope == "class" and self.monotone(True):
            return [self]
        size = self.min_class_size(data)
        return [KAnonymity(k=size)] if size > 1 else []

    def requires_hierarchy(self) -> bool:
        """Whether every sensitive attribute needs a hierarchy."""
        return False

    # --- per-class criteria
    def class_fails(self, classes: Classes, data: DataContext) -> np.ndarray:
        """True for each class that fails (per-class criteria only)."""
        raise NotImplementedError

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, np.ndarray]:
        """The per-class measures this model adds to the classes table."""
        return {}

    def class_borderline(self, classes: Classes, data: DataContext) -> np.ndarray:
        """True for each class that only just passes: exactly at a whole-number threshold
        (k, distinct l, the size a highest risk allows) or within
        :data:`BORDERLINE_SHARE` of a continuous one. What the classes table flags."""
        return np.zeros(len(classes.sizes), dtype=bool)

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return []

    # --- dataset criteria
    def fulfilled(self, sizes: np.ndarray, data: DataContext) -> bool:
        """Whether released classes of these sizes satisfy the model (dataset criteria)."""
        raise NotImplementedError

    def class_budget(self, n: int) -> int | None:
        """For Mondrian: the most classes a release of ``n`` rows may have (None: no limit)."""
        return None

    # --- the result
    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        """What the released classes achieve, JSON-ready (input of :meth:`check`)."""
        raise NotImplementedError

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        raise NotImplementedError


def _per_attribute(classes: Classes, data: DataContext) -> Iterable[tuple[str, SensitiveCounts]]:
    for name in data.sensitive:
        if name in classes.sensitive:
            yield name, classes.sensitive[name]


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "∞"
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


class KAnonymity(Criterion):
    name = "k-anonymity"
    label = "k-anonymity"
    summary = "Every equivalence class holds at least k records."
    params = (
        ParamSpec(
            "k",
            "int",
            "k",
            "Smallest number of records that share their quasi-identifiers.",
            symbol="k",
            minimum=1,
            flag="--k",
            metavar="N",
        ),
    )
    k: int

    def describe(self) -> str:
        return f"k={self.k}"

    def min_class_size(self, data: DataContext) -> int:
        return int(self.k)

    def class_fails(self, classes: Classes, data: DataContext) -> np.ndarray:
        return classes.sizes < self.k

    def class_borderline(self, classes: Classes, data: DataContext) -> np.ndarray:
        return classes.sizes == self.k

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        return {"k": int(classes.sizes.min()) if len(classes.sizes) else 0}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        value = achieved.get("k") or 0
        return [
            Check("k-anonymity", value >= self.k, f"smallest class {value}, k requested {self.k}")
        ]


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
        return [LDiversity(l=float(math.ceil(self.l - _EPS)), variant="distinct")]

    def min_class_size(self, data: DataContext) -> int:
        return int(math.ceil(self.l - _EPS))

    def _values(self, sc: SensitiveCounts) -> np.ndarray:
        if self.variant == "entropy":
            return entropy_l(sc)
        if self.variant == "recursive":
            return recursive_l_value(sc, float(self.c or 0))
        return distinct_l(sc)

    def class_fails(self, classes: Classes, data: DataContext) -> np.ndarray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for _, sc in _per_attribute(classes, data):
            if self.variant == "distinct":
                fails |= distinct_l(sc) < self.l - _EPS
            elif self.variant == "entropy":
                fails |= entropy_l(sc) < self.l * (1 - _EPS)
            else:
                fails |= ~recursive_cl(sc, float(self.c or 0), int(self.l))
        return fails

    def class_borderline(self, classes: Classes, data: DataContext) -> np.ndarray:
        out = np.zeros(len(classes.sizes), dtype=bool)
        for _, sc in _per_attribute(classes, data):
            values = self._values(sc)
            if self.variant == "entropy":
                out |= values * BORDERLINE_SHARE <= self.l
            else:  # distinct and recursive l are whole numbers
                out |= np.abs(values - self.l) < _EPS
        return out

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, np.ndarray]:
        if self.variant != "recursive":
            return {}  # distinct and entropy l are in every classes table
        return {f"{n}:recursive_l": self._values(sc) for n, sc in _per_attribute(classes, data)}

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        if self.variant != "recursive":
            return []
        return [(f"{s}:recursive_l", f"recursive l for c={self.c:g} ({s})") for s in sensitive]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        out = {}
        for name, sc in _per_attribute(classes, data):
            values = self._values(sc)
            out[name] = float(values.min()) if len(values) else 0.0
        return {"l": out}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        lines = []
        for name, value in (achieved.get("l") or {}).items():
            passed = value is None or value + _EPS >= self.l
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


class TCloseness(Criterion):
    name = "t-closeness"
    label = "t-closeness"
    summary = (
        "The distribution of every sensitive attribute in each class is within Earth Mover's "
        "Distance t of its distribution in the whole table."
    )
    params = (
        ParamSpec(
            "t",
            "float",
            "t",
            "Largest distance allowed between a class's distribution and the table's.",
            symbol="t",
            minimum=0,
            maximum=1,
            flag="--t",
            metavar="T",
        ),
        ParamSpec(
            "distance",
            "choice",
            "t-closeness distance",
            "equal: every value as far from every other; ordered: values in (numeric) order; "
            "hierarchical: along the sensitive attribute's hierarchy.",
            choices=(
                ("equal", "equal distance"),
                ("ordered", "ordered distance"),
                ("hierarchical", "hierarchical distance"),
            ),
            default="equal",
            flag="--t-distance",
        ),
    )
    needs_sensitive = True
    t: float
    distance: str

    def describe(self) -> str:
        return f"{self.t:g}-closeness ({self.distance} distance)"

    def requires_hierarchy(self) -> bool:
        return self.distance == "hierarchical"

    def monotone(self, with_suppression: bool) -> bool:
        return not with_suppression  # EMD is convex in the distribution

    def min_class_size(self, data: DataContext) -> int:
        from .privacy import min_class_size_for_t

        sizes = [
            min_class_size_for_t(data.t_context(s, self.distance), self.t) for s in data.sensitive
        ]
        return max(sizes, default=1)

    def _distances(self, classes: Classes, data: DataContext):
        for name, sc in _per_attribute(classes, data):
            yield name, t_distance(sc, data.t_context(name, self.distance))

    def class_fails(self, classes: Classes, data: DataContext) -> np.ndarray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for _, d in self._distances(classes, data):
            fails |= d > self.t + _EPS
        return fails

    def class_borderline(self, classes: Classes, data: DataContext) -> np.ndarray:
        out = np.zeros(len(classes.sizes), dtype=bool)
        for _, d in self._distances(classes, data):
            out |= d >= BORDERLINE_SHARE * self.t
        return out

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, np.ndarray]:
        return {f"{name}:t": d for name, d in self._distances(classes, data)}

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return [(f"{s}:t", f"t, {self.distance} distance ({s})") for s in sensitive]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        return {
            "t": {n: float(d.max()) if len(d) else 0.0 for n, d in self._distances(classes, data)}
        }

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        return [
            Check(
                f"t-closeness of {name}",
                value <= self.t + _EPS,
                f"largest distance {value:.4f}, t requested {self.t:g} ({self.distance})",
            )
            for name, value in (achieved.get("t") or {}).items()
        ]


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
        sizes = [_smallest_size(data.distribution(s), 2.0 ** (-self.delta)) for s in data.sensitive]
        return max(sizes, default=1)

    def _measure(self, sc: SensitiveCounts, data: DataContext, name: str) -> np.ndarray:
        q = data.distribution(name)
        with np.errstate(divide="ignore"):
            cells = np.abs(np.log2(_cell_shares(sc) / q[sc.value]))
        return _class_max(cells, sc)

    def class_fails(self, classes: Classes, data: DataContext) -> np.ndarray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for name, sc in _per_attribute(classes, data):
            fails |= self._measure(sc, data, name) >= self.delta - _EPS
        return fails

    def class_borderline(self, classes: Classes, data: DataContext) -> np.ndarray:
        out = np.zeros(len(classes.sizes), dtype=bool)
        for name, sc in _per_attribute(classes, data):
            out |= self._measure(sc, data, name) >= BORDERLINE_SHARE * self.delta
        return out

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, np.ndarray]:
        return {f"{n}:delta": self._measure(sc, data, n) for n, sc in _per_attribute(classes, data)}

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return [(f"{s}:delta", f"δ ({s})") for s in sensitive]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        out = {}
        for name, sc in _per_attribute(classes, data):
            m = self._measure(sc, data, name)
            out[name] = float(m.max()) if len(m) else 0.0
        return {"delta": out}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        return [
            Check(
                f"δ-disclosure privacy of {name}",
                value < self.delta - _EPS,
                f"largest |log2(class share / table share)| {value:.4f}, "
                f"δ requested {self.delta:g}",
            )
            for name, value in (achieved.get("delta") or {}).items()
        ]


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

    def _caps(self, q: np.ndarray) -> np.ndarray:
        if self.variant == "enhanced":
            with np.errstate(divide="ignore"):
                return np.minimum(self.beta, -np.log(q))
        return np.full(len(q), float(self.beta))

    def min_class_size(self, data: DataContext) -> int:
        sizes = []
        for s in data.sensitive:
            q = data.distribution(s)
            present = q > 0
            sizes.append(_smallest_size(q[present] * (1 + self._caps(q[present])), 1.0))
        return max(sizes, default=1)

    def _cells(self, sc: SensitiveCounts, data: DataContext, name: str):
        q = data.distribution(name)[sc.value]
        gain = (_cell_shares(sc) - q) / q
        return gain, self._caps(data.distribution(name))[sc.value]

    def class_fails(self, classes: Classes, data: DataContext) -> np.ndarray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for name, sc in _per_attribute(classes, data):
            gain, cap = self._cells(sc, data, name)
            bad = gain > cap + _EPS
            fails[np.unique(sc.group[bad])] = True
        return fails

    def class_borderline(self, classes: Classes, data: DataContext) -> np.ndarray:
        out = np.zeros(len(classes.sizes), dtype=bool)
        for name, sc in _per_attribute(classes, data):
            gain, cap = self._cells(sc, data, name)
            near = (cap > 0) & (gain >= BORDERLINE_SHARE * cap)
            out[np.unique(sc.group[near])] = True
        return out

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, np.ndarray]:
        return {
            f"{n}:beta": _class_max(self._cells(sc, data, n)[0], sc, empty=-1.0)
            for n, sc in _per_attribute(classes, data)
        }

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return [(f"{s}:beta", f"largest relative gain ({s})") for s in sensitive]

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        beta, used = {}, {}
        for name, sc in _per_attribute(classes, data):
            gain, cap = self._cells(sc, data, name)
            beta[name] = float(gain.max()) if len(gain) else 0.0
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(cap > 0, gain / cap, np.where(gain > _EPS, np.inf, 0.0))
            worst = float(share.max()) if len(share) else 0.0
            used[name] = worst if math.isfinite(worst) else None
        return {"beta": beta, "share_of_allowed_gain": used}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        lines = []
        used = achieved.get("share_of_allowed_gain") or {}
        for name, value in (achieved.get("beta") or {}).items():
            share = used.get(name)
            passed = share is not None and share <= 1 + _EPS
            detail = f"largest relative gain {value:.4f}, β requested {self.beta:g}"
            if self.variant == "enhanced":
                shown = "∞" if share is None else f"{share:.0%}"
                detail += f"; {shown} of the allowed gain min(β, −ln p) used"
            lines.append(Check(f"{self.variant} β-likeness of {name}", passed, detail))
        return lines


class HighestRisk(Criterion):
    """Highest prosecutor re-identification risk at most a threshold: every class has at least
    ARX's size threshold (:func:`size_threshold`) records. ARX offers it as k-anonymity with
    that k, and with average risk as ``AverageReidentificationRisk(average, highest, 0)``;
    combined here with :class:`AverageRisk` it gives the same releases."""

    name = "highest-risk"
    label = "highest re-identification risk"
    summary = "No record's prosecutor re-identification risk (1 / its class size) exceeds r."
    params = (
        ParamSpec(
            "risk",
            "float",
            "highest risk",
            "Largest re-identification risk allowed for any record, e.g. 0.1 for 10 %.",
            symbol="highest risk",
            minimum=0,
            maximum=1,
            minimum_exclusive=True,
            flag="--highest-risk",
            metavar="R",
        ),
    )
    risk: float

    @property
    def size(self) -> int:
        return size_threshold(float(self.risk))

    def describe(self) -> str:
        return f"highest re-identification risk at most {self.risk:g}"

    def min_class_size(self, data: DataContext) -> int:
        return self.size

    def class_fails(self, classes: Classes, data: DataContext) -> np.ndarray:
        return classes.sizes < self.size

    def class_borderline(self, classes: Classes, data: DataContext) -> np.ndarray:
        return classes.sizes == self.size

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        smallest = int(classes.sizes.min()) if len(classes.sizes) else 0
        return {"highest_risk": 1.0 / smallest if smallest else 0.0, "smallest_class": smallest}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        value = float(achieved.get("highest_risk") or 0.0)
        effective = 1.0 / self.size
        detail = f"highest risk {value:.2%} (smallest class {achieved.get('smallest_class')})"
        detail += f", at most {self.risk:.2%} requested"
        if abs(effective - self.risk) > 1e-12:
            detail += f" (classes of at least {self.size}: {effective:.2%})"
        return [Check("highest re-identification risk", value <= effective + 1e-12, detail)]


class AverageRisk(Criterion):
    """Average prosecutor re-identification risk at most a threshold (ARX's
    ``AverageReidentificationRisk``): ``classes / records <= r`` over the released classes
    (1 / average class size), enforced by suppressing the smallest classes."""

    name = "average-risk"
    label = "average re-identification risk"
    summary = (
        "The average prosecutor re-identification risk (classes / records) is at most r; the "
        "smallest classes are suppressed until it is."
    )
    params = (
        ParamSpec(
            "risk",
            "float",
            "average risk",
            "Largest average re-identification risk, e.g. 0.05 for 5 %.",
            symbol="average risk",
            minimum=0,
            maximum=1,
            minimum_exclusive=True,
            flag="--average-risk",
            metavar="R",
        ),
    )
    scope = "dataset"
    risk: float

    def describe(self) -> str:
        return f"average re-identification risk at most {self.risk:g}"

    def fulfilled(self, sizes: np.ndarray, data: DataContext) -> bool:
        n = int(sizes.sum())
        return n == 0 or len(sizes) / n <= self.risk + 1e-12

    def class_budget(self, n: int) -> int | None:
        return int(math.floor(self.risk * n + 1e-9))

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        n = int(classes.sizes.sum())
        return {"average_risk": len(classes.sizes) / n if n else 0.0}

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        value = float(achieved.get("average_risk") or 0.0)
        return [
            Check(
                "average re-identification risk",
                value <= self.risk + 1e-12,
                f"average risk {value:.2%}, at most {self.risk:.2%} requested",
            )
        ]


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

    def _estimate(self, sizes: np.ndarray, data: DataContext) -> float:
        return population_uniques(sizes, int(data.population_size or 0), self.estimator)

    def fulfilled(self, sizes: np.ndarray, data: DataContext) -> bool:
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


#: Every privacy model, by name, in the order forms and help list them.
REGISTRY: dict[str, type[Criterion]] = {
    c.name: c
    for c in (
        KAnonymity,
        LDiversity,
        TCloseness,
        DeltaDisclosure,
        BetaLikeness,
        HighestRisk,
        AverageRisk,
        PopulationUniqueness,
    )
}


def criterion_from_spec(spec: Mapping[str, Any]) -> Criterion:
    """A criterion from ``{"model": name, **parameters}``."""
    if not isinstance(spec, Mapping) or "model" not in spec:
        raise EngineError("Each privacy model needs its name ('model').")
    kind = REGISTRY.get(str(spec["model"]))
    if kind is None:
        raise EngineError(f"Unknown privacy model {spec['model']!r}.")
    return kind(**{k: v for k, v in spec.items() if k != "model"})


# --------------------------------------------------------------------------- the whole model


@dataclass
class Evaluation:
    """A candidate release judged: the classes to suppress, the rows they hold, and whether
    that is within the suppression limit."""

    fails: np.ndarray
    suppressed: int
    valid: bool


def _half(total: int) -> int:
    return int(total / 2)  # Java's integer division: toward zero


def _suppression_prefix(
    fulfilled, start: int, m: int, suppressed_at, limit: int | None
) -> tuple[int, bool]:
    """ARX's ``suppressWhileNotFulfilledBinary`` over the ordered suppressible classes: the
    number of them (from ``start``) to suppress, and whether the search gave up because the
    suppressed rows exceeded ``limit``."""
    if m <= start or fulfilled(start):
        return start, False

    def state(prefix: int) -> bool | None:
        ok = fulfilled(prefix)
        if not ok and limit is not None and suppressed_at(prefix) > limit:
            return None
        return ok

    low, high = start, m - 1
    mid = _half(low + high)
    while low <= high:
        ok = state(mid + 1)
        if ok is None:
            return mid + 1, True
        if ok:
            high = mid - 1
        else:
            low = mid + 1
        mid = _half(low + high)
    ok = state(mid + 1)
    if ok is None:
        return mid + 1, True
    if not ok and mid + 1 < m:
        return mid + 2, False
    return mid + 1, False


@dataclass(frozen=True, init=False)
class PrivacyModel:
    """The privacy models a release must satisfy (criteria, in any combination), the share of
    input rows that may be suppressed, and the population the data were drawn from.

    ``PrivacyModel(k=5, l=2, l_variant="entropy", suppression_limit=0.05)`` builds k-anonymity,
    l-diversity and t-closeness from keywords as before; ``criteria=[...]`` takes any
    criteria. ``k``, ``l``, ``l_variant``, ``c``, ``t`` and ``t_distance`` read back the first
    such criterion (``k`` is 1 without k-anonymity).
    """

    criteria: tuple[Criterion, ...]
    suppression_limit: float
    population: PopulationModel | None

    def __init__(
        self,
        k: int = 1,
        l: float | None = None,  # noqa: E741
        l_variant: str = "distinct",
        c: float | None = None,
        t: float | None = None,
        t_distance: str = "equal",
        suppression_limit: float = 0.0,
        *,
        criteria: Iterable[Criterion] | None = None,
        population: PopulationModel | None = None,
    ) -> None:
        built: list[Criterion] = list(criteria or ())
        if k != 1:
            built.insert(0, KAnonymity(k=k))
        if l is not None:
            built.append(LDiversity(l=l, variant=l_variant, c=c))
        if t is not None:
            built.append(TCloseness(t=t, distance=t_distance))
        object.__setattr__(self, "criteria", tuple(built))
        object.__setattr__(self, "suppression_limit", float(suppression_limit))
        object.__setattr__(self, "population", population)

    # --- legacy views
    def _first(self, kind: type[Criterion]) -> Any:
        return next((c for c in self.criteria if isinstance(c, kind)), None)

    @property
    def k(self) -> int:
        ks = [c.k for c in self.criteria if isinstance(c, KAnonymity)]
        return max(ks) if ks else 1

    @property
    def l(self) -> float | None:  # noqa: E743
        c = self._first(LDiversity)
        return None if c is None else c.l

    @property
    def l_variant(self) -> str:
        c = self._first(LDiversity)
        return "distinct" if c is None else c.variant

    @property
    def c(self) -> float | None:
        c = self._first(LDiversity)
        return None if c is None else c.c

    @property
    def t(self) -> float | None:
        c = self._first(TCloseness)
        return None if c is None else c.t

    @property
    def t_distance(self) -> str:
        c = self._first(TCloseness)
        return "equal" if c is None else c.distance

    # --- groups
    @property
    def class_criteria(self) -> tuple[Criterion, ...]:
        return tuple(c for c in self.criteria if c.scope == "class")

    @property
    def dataset_criteria(self) -> tuple[Criterion, ...]:
        return tuple(c for c in self.criteria if c.scope == "dataset")

    @property
    def needs_sensitive(self) -> bool:
        return any(c.needs_sensitive for c in self.criteria)

    # --- validation, description, storage
    def validate(self) -> None:
        if not 0.0 <= self.suppression_limit <= 1.0:
            raise EngineError(
                "The suppression limit is a share of rows between 0 and 1, "
                f"not {self.suppression_limit!r}."
            )
        for criterion in self.criteria:
            criterion.validate()
        if self.population is not None:
            self.population.validate()
        for criterion in self.criteria:
            if criterion.needs_population and self.population is None:
                raise EngineError(
                    f"{criterion.label.capitalize()} needs the population size or the "
                    "sampling fraction."
                )

    def describe_criteria(self) -> str:
        return " and ".join(c.describe() for c in self.criteria) or "no privacy model"

    def describe(self) -> str:
        parts = [c.describe() for c in self.criteria] or ["no privacy model"]
        parts.append(f"at most {self.suppression_limit * 100:g}% of rows suppressed")
        if self.population is not None:
            parts.append(self.population.describe())
        return ", ".join(parts)

    def to_spec(self) -> dict[str, Any]:
        return {
            "criteria": [c.to_spec() for c in self.criteria],
            "suppression_limit": self.suppression_limit,
            "population": None if self.population is None else self.population.to_spec(),
        }

    @classmethod
    def from_spec(
        cls, spec: Mapping[str, Any] | Sequence[Mapping[str, Any]], **overrides: Any
    ) -> PrivacyModel:
        """From :meth:`to_spec`'s dict, or a bare list of criteria (then ``suppression_limit``
        and ``population`` may be given as keywords). Validates."""
        if isinstance(spec, Mapping):
            items = spec.get("criteria") or []
            limit = overrides.get("suppression_limit", spec.get("suppression_limit", 0.0))
            population = overrides.get("population", spec.get("population"))
        else:
            items = list(spec)
            limit = overrides.get("suppression_limit", 0.0)
            population = overrides.get("population")
        if not isinstance(population, PopulationModel):
            population = PopulationModel.from_spec(population)
        try:
            limit = float(limit or 0.0)
        except (TypeError, ValueError):
            raise EngineError(f"The suppression limit must be a number, not {limit!r}.") from None
        model = cls(
            criteria=[criterion_from_spec(item) for item in items],
            suppression_limit=limit,
            population=population,
        )
        model.validate()
        return model

    @classmethod
    def from_fields(
        cls, data: Mapping[str, Any], suppression_limit: float | None = None
    ) -> PrivacyModel:
        """From flat fields named ``ParamSpec.key(model)`` (a form's cleaned data): a model is
        requested when its first parameter has a value. ``suppression_limit`` and the
        population fields are read from ``data`` unless given. Validates."""
        criteria = []
        for name, kind in REGISTRY.items():
            main = kind.params[0]
            if data.get(main.key(name)) in (None, ""):
                continue
            criteria.append(kind(**{p.name: data.get(p.key(name)) for p in kind.params}))
        population = PopulationModel.from_spec(
            {
                p.name: data.get(p.name)
                for p in POPULATION_PARAMS
                if data.get(p.name) not in (None, "")
            }
        )
        limit = data.get("suppression_limit") if suppression_limit is None else suppression_limit
        model = cls(criteria=criteria, suppression_limit=float(limit or 0.0), population=population)
        model.validate()
        return model

    def fields(self) -> dict[str, Any]:
        """The flat fields :meth:`from_fields` reads (to fill a form from a stored model)."""
        out: dict[str, Any] = {"suppression_limit": self.suppression_limit}
        for criterion in self.criteria:
            for spec in criterion.params:
                out[spec.key(criterion.name)] = getattr(criterion, spec.name)
        if self.population is not None:
            out.update(self.population.to_spec())
        return out

    # --- evaluation
    def monotone(self) -> bool:
        """Whether "valid within the suppression limit" carries over to every generalization
        (ARX's ``getMonotonicityOfPrivacy``: every criterion monotone with generalization, and
        with suppression too unless no row may be suppressed)."""
        with_suppression = self.suppression_limit > 0
        return all(
            c.monotone(False) and (not with_suppression or c.monotone(True)) for c in self.criteria
        )

    def pruning_model(self, data: DataContext) -> PrivacyModel:
        """A per-class model, monotone even with suppression, implied by this one: a
        transformation invalid for it is invalid for this model (its k raised to the smallest
        class that can pass)."""
        implied: list[Criterion] = []
        k = 1
        for criterion in self.criteria:
            for c in criterion.implied(data):
                if isinstance(c, KAnonymity | HighestRisk):
                    k = max(k, c.min_class_size(data))
                elif c not in implied:
                    implied.append(c)
            if criterion.scope == "class":
                k = max(k, criterion.min_class_size(data))
        if k > 1:
            implied.insert(0, KAnonymity(k=k))
        return PrivacyModel(criteria=implied, suppression_limit=self.suppression_limit)

    def min_class_size(self, data: DataContext) -> int:
        return max((c.min_class_size(data) for c in self.class_criteria), default=1)

    def class_fails(self, classes: Classes, data: DataContext) -> np.ndarray:
        """True for each class failing some per-class criterion."""
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for criterion in self.class_criteria:
            fails |= criterion.class_fails(classes, data)
        return fails

    def evaluate(
        self,
        classes: Classes,
        data: DataContext,
        limit_rows: int | None = None,
        tie_order: Callable[[np.ndarray, int], np.ndarray] | None = None,
        excluded: np.ndarray | None = None,
    ) -> Evaluation:
        """Which classes to suppress (see the module docstring). ``limit_rows``: the
        suppression limit in rows (None: no limit, and no early stop); ``tie_order(index, count)``: the
        ``count`` classes of ``index`` (all of one size) a dataset criterion suppresses first
        (default: as numbered);
        ``excluded``: classes that dataset criteria ignore (fully generalized ones)."""
        sizes = classes.sizes
        fails = self.class_fails(classes, data)
        dataset = self.dataset_criteria
        if dataset:
            keep = ~fails if excluded is None else ~fails & ~excluded
            index = np.flatnonzero(keep)
            # The criteria only see the sizes of the classes left, so the binary search runs on
            # sorted sizes; which classes of the last size suppressed go is settled after.
            ordered = np.sort(sizes[index])
            already = int(sizes[fails].sum())
            cumulative = np.concatenate([[0], np.cumsum(ordered)])
            prefix = 0
            aborted = False
            for criterion in dataset:
                prefix, aborted = _suppression_prefix(
                    lambda p, c=criterion: c.fulfilled(ordered[p:], data),
                    prefix,
                    len(index),
                    lambda p: already + int(cumulative[p]),
                    limit_rows,
                )
                if aborted:
                    break
            suppressed = already + int(cumulative[prefix])
            valid = not aborted and (limit_rows is None or suppressed <= limit_rows)
            if prefix and (valid or limit_rows is None):
                boundary = ordered[prefix - 1]
                smaller = index[sizes[index] < boundary]
                tied = index[sizes[index] == boundary]
                count = prefix - len(smaller)
                if tie_order is not None:
                    tied = tie_order(tied, count)
                fails = fails.copy()
                fails[smaller] = True
                fails[tied[:count]] = True
            # An invalid transformation's fails are only its per-class failures.
            return Evaluation(fails, suppressed, valid)
        suppressed = int(sizes[fails].sum())
        return Evaluation(fails, suppressed, limit_rows is None or suppressed <= limit_rows)

    def failing_models(self, classes: Classes, data: DataContext) -> np.ndarray:
        """Per class, the comma-separated names of the per-class models it fails ("" if none)."""
        out = np.full(len(classes.sizes), "", dtype=object)
        for criterion in self.class_criteria:
            bad = criterion.class_fails(classes, data)
            out[bad] = np.where(out[bad] == "", criterion.name, out[bad] + "," + criterion.name)
        return out

    def borderline_models(self, classes: Classes, data: DataContext) -> np.ndarray:
        """Per class, the comma-separated names of the per-class models it only just passes
        (see :meth:`Criterion.class_borderline`; "" if none)."""
        out = np.full(len(classes.sizes), "", dtype=object)
        for criterion in self.class_criteria:
            near = criterion.class_borderline(classes, data)
            out[near] = np.where(out[near] == "", criterion.name, out[near] + "," + criterion.name)
        return out

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, np.ndarray]:
        """The classes table's measures: ``size``, then per sensitive attribute S distinct l
        (``S:distinct_l``), entropy l (``S:entropy_l``) and t (``S:t``, equal distance unless
        the model's t-closeness uses another), then the criteria's own columns."""
        out: dict[str, np.ndarray] = {"size": classes.sizes}
        for name, sc in _per_attribute(classes, data):
            out[f"{name}:distinct_l"] = distinct_l(sc)
            out[f"{name}:entropy_l"] = entropy_l(sc)
            out[f"{name}:t"] = t_distance(sc, data.t_context(name, "equal"))
        for criterion in self.class_criteria:
            out.update(criterion.class_columns(classes, data))
        return out

    def legacy_achieved(
        self, classes: Classes, data: DataContext
    ) -> tuple[dict[str, float], dict[str, float]]:
        """``achieved_l`` (lowest l of the model's variant, distinct without l-diversity) and
        ``achieved_t`` (largest t, the model's distance or equal) per sensitive attribute."""
        if not data.sensitive:
            return {}, {}
        ell = self._first(LDiversity) or LDiversity(l=1, variant="distinct")
        tee = self._first(TCloseness) or TCloseness(t=1, distance="equal")
        return dict(ell.achieved(classes, data)["l"]), dict(tee.achieved(classes, data)["t"])

    def class_column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        """(column, label) of the per-class measures in the classes table, in order."""
        labels = {}
        for s in sensitive:
            labels[f"{s}:distinct_l"] = f"distinct l ({s})"
            labels[f"{s}:entropy_l"] = f"entropy l ({s})"
            labels[f"{s}:t"] = f"t, equal distance ({s})"
        for criterion in self.class_criteria:
            labels.update(dict(criterion.column_labels(sensitive)))
        return list(labels.items())

    def achieved(self, classes: Classes, data: DataContext) -> list[dict[str, Any]]:
        """Per criterion: its spec, description and achieved values on the released classes
        (JSON-ready; what :func:`checks` reads back)."""
        return [
            {
                "model": c.name,
                "spec": c.to_spec(),
                "description": c.describe(),
                "achieved": c.achieved(classes, data),
            }
            for c in self.criteria
        ]


def checks(summary: Mapping[str, Any]) -> list[Check]:
    """The review's check lines from a stored summary (``AnonymizationResult.report()``): one
    per model (and sensitive attribute), then the suppression limit."""
    spec = summary.get("privacy_model") or {}
    lines: list[Check] = []
    for entry in summary.get("models") or []:
        criterion = criterion_from_spec(entry.get("spec") or {"model": entry.get("model")})
        lines.extend(criterion.check(entry.get("achieved") or {}))
    rows_in = int(summary.get("rows_in") or 0)
    allowed = int(float(spec.get("suppression_limit") or 0.0) * rows_in + 1e-9)
    suppressed = int(summary.get("suppressed") or 0)
    lines.append(
        Check(
            "suppression limit",
            suppressed <= allowed,
            f"{suppressed} rows suppressed, at most {allowed} allowed",
        )
    )
    return lines
