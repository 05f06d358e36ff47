"""What every privacy model is made of: its parameters (:class:`ParamSpec`), the data it judges
(:class:`Classes`, :class:`DataContext`), the check lines it writes for the review
(:class:`Check`) and the protocol it implements (:class:`Criterion`).

Two kinds of criteria, as in ARX:

* per-class criteria (``scope = "class"``) say for every equivalence class whether it passes;
  classes that fail are suppressed (k-anonymity, l-diversity, t-closeness, δ-disclosure,
  β-likeness, highest risk);
* dataset criteria (``scope = "dataset"``) judge the distribution of class sizes of the whole
  release (average risk, population uniqueness); how the smallest classes are then suppressed
  is :meth:`.model.PrivacyModel.evaluate`'s.

Nothing here knows a particular model: each is a module of this package, listed in
:mod:`.registry`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from ..arrays import BoolArray, FloatArray, IntArray
from ..errors import EngineError
from ..hierarchy import Hierarchy
from ..privacy import SensitiveCounts, TContext

__all__ = [
    "BORDERLINE_SHARE",
    "EPS",
    "Check",
    "Classes",
    "Criterion",
    "DataContext",
    "ParamSpec",
    "per_attribute",
]

#: Tolerance for floating-point comparisons against thresholds.
EPS = 1e-9

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
    #: On the command line, this option may also carry the value of the parameter named here
    #: after a comma (``--delta-presence 0.05,0.5``).
    pair: str | None = None

    def key(self, model: str) -> str:
        """The form field / flat key of this parameter of ``model``."""
        return f"{model}__{self.name}"

    def option(self, model: str) -> str:
        """The command-line option of this parameter of ``model``: its ``flag``, or else
        ``--<model>-<name>``."""
        return self.flag or f"--{model}-{self.name.replace('_', '-')}"

    def coerce(self, raw: Any) -> Any:
        """The value as its kind (``None`` when absent); an unreadable value is an error."""
        if raw is None or (isinstance(raw, str) and raw.strip() == ""):
            return self.default
        who = self.symbol or self.label
        if self.kind == "choice":
            choice = str(raw).strip()
            if choice not in {c for c, _ in self.choices}:
                allowed = ", ".join(c for c, _ in self.choices)
                raise EngineError(f"Unknown {self.label} {choice!r}; use one of {allowed}.")
            return choice
        if self.kind == "int" and isinstance(raw, int) and not isinstance(raw, bool):
            return raw  # exactly: a seed may have more digits than a float holds
        if self.kind == "int" and isinstance(raw, str) and raw.strip().isdigit():
            return int(raw)
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
    attribute, sparse counts of its values per class.

    ``linked``: per earlier release (by name), sparse counts of the earlier release's classes
    within each class, its "value" being the earlier class (the last code: not in that
    release). Each cell is a joint class of the two releases (see :mod:`.earlier_releases`).

    With a research subset (:class:`..subset.ResearchSubset`), ``sizes`` (and ``linked``)
    count the class's rows in the subset (what is released) and ``population`` its rows in the
    population table; a class of the population may then hold no row of the subset (size 0)."""

    sizes: IntArray
    sensitive: Mapping[str, SensitiveCounts] = field(default_factory=dict)
    linked: Mapping[str, SensitiveCounts] = field(default_factory=dict)
    population: IntArray | None = None

    def subset(self, keep: BoolArray) -> Classes:
        return Classes(
            self.sizes[keep],
            {name: sc.subset(keep) for name, sc in self.sensitive.items()},
            {name: sc.subset(keep) for name, sc in self.linked.items()},
            None if self.population is None else self.population[keep],
        )


class DataContext:
    """What criteria need to know about the whole input: its size, the sensitive attributes
    (integer codes of every input row, labels, optional hierarchies), the population size and,
    with a research subset, the rows of the population table (``population_rows``; ``n`` is
    then the subset's size). Distributions and t-closeness contexts are computed once, on
    demand."""

    def __init__(
        self,
        n: int,
        sensitive_codes: Mapping[str, IntArray] | None = None,
        sensitive_labels: Mapping[str, Sequence[str]] | None = None,
        sensitive_hierarchies: Mapping[str, Hierarchy] | None = None,
        population_size: int | None = None,
        population_rows: int | None = None,
        sensitive_frequencies: Mapping[str, IntArray] | None = None,
    ) -> None:
        self.n = int(n)
        self.codes = dict(sensitive_codes or {})
        #: Per sensitive attribute given without its rows' codes (a frequency table's input):
        #: the rows holding each code.
        self.frequencies = dict(sensitive_frequencies or {})
        self.labels = {k: list(v) for k, v in (sensitive_labels or {}).items()}
        self.hierarchies = dict(sensitive_hierarchies or {})
        self.population_size = population_size
        self.population_rows = population_rows
        self._q: dict[str, FloatArray] = {}
        self._t: dict[tuple[str, str], TContext] = {}

    @property
    def research_subset(self) -> bool:
        """Whether the release is a research subset of a population table."""
        return self.population_rows is not None

    @property
    def sensitive(self) -> list[str]:
        return list(self.codes) + [k for k in self.frequencies if k not in self.codes]

    def distribution(self, name: str) -> FloatArray:
        """Share of the input rows holding each value (by code) of sensitive ``name``."""
        if name not in self._q and name in self.frequencies:
            counts = self.frequencies[name]
            self._q[name] = counts / max(int(counts.sum()), 1)
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
                self.codes.get(name),
                distance,
                labels,
                self.hierarchies.get(name),
                n_values=len(labels) if labels else None,
                frequencies=self.frequencies.get(name),
            )
        return self._t[key]


# --------------------------------------------------------------------------- the criteria


class Criterion:
    """A privacy model with its parameters.

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
    #: The research subset: "required" (the model compares the release with the population
    #: table), "optional" (used when given), "" (not used).
    uses_research_subset: ClassVar[Literal["", "optional", "required"]] = ""
    #: Whether a class of the population without any released row can fail the model. Such a
    #: class cannot be suppressed, so the transformation is then invalid (ARX's δ-presence);
    #: for other models these classes are ignored.
    judges_absent_classes: ClassVar[bool] = False

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
        this one satisfies too (used to prune when this one is not monotone). The bound on
        the class size (:meth:`min_class_size`) need not be among them: the pruning model
        adds it as k-anonymity."""
        if self.scope == "class" and self.monotone(True):
            return [self]
        return []

    def requires_hierarchy(self) -> bool:
        """Whether every sensitive attribute needs a hierarchy."""
        return False

    def data_problem(self, data: DataContext) -> str | None:
        """A sentence saying why the model cannot judge this input (e.g. it needs a research
        subset that is not given), or None."""
        return None

    # --- per-class criteria
    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        """True for each class that fails (per-class criteria only)."""
        raise NotImplementedError

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, FloatArray]:
        """The per-class measures this model adds to the classes table."""
        return {}

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        """True for each class that only just passes: exactly at a whole-number threshold
        (k, distinct l, the size a highest risk allows) or within
        :data:`BORDERLINE_SHARE` of a continuous one. What the classes table flags."""
        return np.zeros(len(classes.sizes), dtype=bool)

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return []

    # --- dataset criteria
    def fulfilled(self, sizes: IntArray, data: DataContext) -> bool:
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


def per_attribute(classes: Classes, data: DataContext) -> Iterable[tuple[str, SensitiveCounts]]:
    for name in data.sensitive:
        if name in classes.sensitive:
            yield name, classes.sensitive[name]
