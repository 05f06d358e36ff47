"""Differentially private statistics with OpenDP: query specs, a free accuracy preview, the run.

A statistics release is a list of queries on one dataset (counts, histograms by one or two
columns, sums, means and quantiles of a numeric column), each with its own ε. Every mechanism
and the accounting come from OpenDP (https://opendp.org); nothing here draws noise itself.

Privacy unit: one row, added or removed (unbounded DP, ``dp.unit_of(contributions=1)``); the
number of rows is not public and is never used to calibrate noise. Every mechanism is pure
ε-DP (δ = 0) except the private key release of labels from the data, which is (ε, δ)-DP. The
queries of a release compose by OpenDP's basic sequential composition (``make_composition``):
the release's privacy loss is the sum of its queries' ε (and of their δ), and the dataset's
budget is spent by those sums.

Queries:

* :class:`Count`: rows in the dataset. Discrete Laplace noise (sensitivity 1).
* :class:`Histogram`: rows per cell of one or two :class:`Grouping` s (declared categories,
  or numeric bins from declared edges). Only declared cells are released, plus one "other"
  cell counting rows whose value is outside the declared categories or bins, empty, or not a
  number: nothing reveals which other values exist. Discrete Laplace noise on every cell
  (L1 sensitivity 1: one row changes one cell by one). A cell's label is published as it is,
  so every declared label must be public knowledge; each grouping says where its labels come
  from (:data:`LABEL_SOURCES`): typed by the steward, a level of the column's hierarchy, or
  the column's declared values. Labels taken from the data itself are released only through
  OpenDP's private key release (``make_laplace_threshold``): the cells of the values present
  are counted with noise and a cell is published only when its noisy count passes a
  threshold, so a label held by few rows appears with probability at most δ. That query is
  (ε, δ)-DP; the others of its release are made approximate-DP (δ = 0) to compose with it.
* :class:`Sum`: sum of a numeric column, each value clamped by OpenDP to the steward's bounds
  (never taken from the data). Laplace noise.
* :class:`Mean`: OpenDP's approach when the number of rows is unknown: a noisy sum and a noisy
  count, each with half of ε, and their ratio (clamped to the bounds, post-processing).
* :class:`Quantiles`: each chosen quantile by OpenDP's exponential mechanism (report noisy max
  with Gumbel noise) over an even grid of candidates between the bounds, ε shared evenly.

Numeric cells are read as plain decimal numbers (``pd.to_numeric``); a cell that is empty,
not a number, or infinite is left out of sums, means and quantiles (and of a mean's count),
and counts in a histogram's "other" cell. Dropping rows is row-by-row, so it keeps the
privacy unit.

Expected errors, at 95 %, are computed before any data is touched (the free preview), from
OpenDP's accuracy utilities: for a count or a histogram cell the discrete Laplace accuracy,
for a sum the Laplace accuracy. A mean's error combines its sum's and count's (each at
97.5 %, so both hold together with 95 %) at the noisy count. A quantile's error is a rank
error: OpenDP has no accuracy utility for the exponential mechanism, so it is the Gumbel
noisy-max bound ``scale * ln(candidates / 0.05)``, in rows of the sorted column.

OpenDP's feature flags ``contrib`` and ``honest-but-curious`` are enabled on import; the
latter only for :func:`_rowwise`, which picks each query's values from the DataFrame row by
row (its stability, one row in gives at most one value out, is stated there).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from decimal import Decimal
from importlib.metadata import version
from typing import Any, ClassVar

import numpy as np
import opendp.prelude as dp
import pandas as pd

from .types import EngineError

dp.enable_features("contrib", "honest-but-curious")

__all__ = [
    "CONFIDENCE",
    "CompiledRelease",
    "Count",
    "Grouping",
    "Histogram",
    "Mean",
    "Quantiles",
    "Query",
    "QueryPlan",
    "QueryResult",
    "ReleaseResult",
    "Sum",
    "canonical_json",
    "compile_release",
    "describe_grouping",
    "preview",
    "queries_from_list",
    "query_from_dict",
    "requested_delta",
    "requested_epsilon",
    "run_release",
    "true_counts",
    "validate_queries",
]

#: The confidence of every reported error.
CONFIDENCE = 0.95
ALPHA = 0.05  # 1 - CONFIDENCE, written out (1 - 0.95 is 0.050000000000000044)

#: The privacy unit: one row, added or removed.
METRIC, D_IN = dp.unit_of(contributions=1)

#: The label of a histogram's cell for everything outside the declared cells.
OTHER_LABEL = "(other or missing)"

MAX_QUERIES = 50
MAX_EPSILON = 100.0
#: δ of a private key release: what a label held by a single row risks being published with.
#: Far above 1e-3 the threshold protects little (δ should be well below one over the rows).
MAX_DELTA = 1e-3
MAX_CATEGORIES = 1_000
MAX_CELLS = 10_000
MAX_CANDIDATES = 10_001
MAX_QUANTILES = 20
#: Bounds beyond this magnitude make a float sum's rounding error matter; refused.
MAX_BOUND = 1e12
#: OpenDP's float sum needs a public bound on the number of values it adds; a random subset of
#: this many values is summed beyond it (never reached: uploads are far smaller).
SUM_SIZE_LIMIT = 2**27
#: Each measurement is calibrated to a hair under its ε, so that OpenDP's accountant (which
#: rounds up) never reports more than the ε that was requested and spent.
_SLACK = 1e-9
#: A value no declared category or bin label can equal (labels are stripped text).
_OUTSIDE = "\x00"
#: Joins a two-column cell's labels into one key.
_SEPARATOR = "\x1f"

#: Where a histogram's labels come from. Labels are published as they are, so they are either
#: public knowledge (the first three) or found in the data and released privately ("data").
TYPED = "typed"
HIERARCHY = "hierarchy"
DOMAIN = "domain"
DATA = "data"
LABEL_SOURCES: dict[str, str] = {
    TYPED: "typed by the steward",
    HIERARCHY: "a level of the column's hierarchy",
    DOMAIN: "the column's declared values",
    DATA: "the data, released privately (noisy counts above a threshold)",
}


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else format(x, "g")


def _finite_number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise EngineError(f"{what} must be a number, not {value!r}.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise EngineError(f"{what} must be a number, not {value!r}.") from None
    if not math.isfinite(number):
        raise EngineError(f"{what} must be a finite number, not {value!r}.")
    return number


def _check_bounds(lower: float, upper: float, column: str) -> None:
    if not lower < upper:
        raise EngineError(
            f"The lower bound of {column!r} must be below its upper bound "
            f"(given {_fmt(lower)} and {_fmt(upper)})."
        )
    if max(abs(lower), abs(upper)) > MAX_BOUND:
        raise EngineError(f"The bounds of {column!r} must lie within ±{MAX_BOUND:g}.")


# --- Query specifications -----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Grouping:
    """How a histogram groups one column: declared ``categories``, or numeric bins between
    increasing ``edges`` (``[e0, e1)``, ``[e1, e2)``, ..., the last one closed ``[.., en]``), or
    the values found in the data (``source`` "data": no categories, released privately).

    ``source`` says where declared categories come from (:data:`LABEL_SOURCES`); ``level`` is
    the hierarchy's level for "hierarchy". Bins are always the steward's typed edges."""

    column: str
    categories: tuple[str, ...] = ()
    edges: tuple[float, ...] = ()
    source: str = TYPED
    level: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "column", str(self.column))
        if isinstance(self.categories, str) or isinstance(self.edges, str):
            raise EngineError("Categories and edges are lists, not one text.")
        object.__setattr__(self, "categories", tuple(str(c).strip() for c in self.categories))
        object.__setattr__(
            self,
            "edges",
            tuple(_finite_number(e, f"An edge of {self.column!r}") for e in self.edges),
        )
        object.__setattr__(self, "source", str(self.source or TYPED))
        if self.level is not None:
            if isinstance(self.level, bool) or not isinstance(self.level, int | float):
                raise EngineError(f"The hierarchy level of {self.column!r} is a whole number.")
            if int(self.level) != self.level:
                raise EngineError(f"The hierarchy level of {self.column!r} is a whole number.")
            object.__setattr__(self, "level", int(self.level))

    @property
    def from_data(self) -> bool:
        return self.source == DATA

    def validate(self) -> None:
        if not self.column:
            raise EngineError("Name the column a histogram groups by.")
        if self.source not in LABEL_SOURCES:
            raise EngineError(
                f"Unknown source of labels {self.source!r} for {self.column!r}; use one of "
                f"{', '.join(LABEL_SOURCES)}."
            )
        if self.level is not None and self.source != HIERARCHY:
            raise EngineError(
                f"A hierarchy level goes with labels from {self.column!r}'s hierarchy."
            )
        if self.from_data:
            if self.categories or self.edges:
                raise EngineError(
                    f"Labels of {self.column!r} from the data are found by the run, privately: "
                    "declare no categories or edges with them."
                )
            return
        if bool(self.categories) == bool(self.edges):
            raise EngineError(
                f"Group {self.column!r} either by declared categories or by numeric bin "
                "edges (one of the two)."
            )
        if self.edges and self.source != TYPED:
            raise EngineError(
                f"The bin edges of {self.column!r} are typed: their source is {TYPED!r}."
            )
        if self.source == HIERARCHY and (self.level is None or self.level < 1):
            raise EngineError(
                f"Labels from {self.column!r}'s hierarchy come from a level of 1 or more (level 0 "
                "holds the column's own values)."
            )
        if self.categories:
            if len(self.categories) > MAX_CATEGORIES:
                raise EngineError(
                    f"Declare at most {MAX_CATEGORIES} categories of {self.column!r}."
                )
            if "" in self.categories:
                raise EngineError(
                    f"A category of {self.column!r} is empty; empty cells are counted in the "
                    f'"{OTHER_LABEL}" cell.'
                )
            if len(set(self.categories)) != len(self.categories):
                raise EngineError(f"The categories of {self.column!r} repeat a value.")
            if any(_OUTSIDE in c or _SEPARATOR in c for c in self.categories):
                raise EngineError(f"A category of {self.column!r} holds a control character.")
        else:
            if len(self.edges) < 2:
                raise EngineError(
                    f"Give at least two bin edges for {self.column!r} (one bin has two ends)."
                )
            if any(b <= a for a, b in zip(self.edges, self.edges[1:], strict=False)):
                raise EngineError(f"The bin edges of {self.column!r} must be increasing.")
            if len(self.edges) - 1 > MAX_CATEGORIES:
                raise EngineError(f"Use at most {MAX_CATEGORIES} bins for {self.column!r}.")

    def labels(self) -> list[str]:
        if self.from_data:
            raise EngineError(f"The labels of {self.column!r} are found in the data by the run.")
        if self.categories:
            return list(self.categories)
        last = len(self.edges) - 2
        return [
            f"[{_fmt(a)}, {_fmt(b)}{']' if i == last else ')'}"
            for i, (a, b) in enumerate(zip(self.edges, self.edges[1:], strict=False))
        ]

    def label_cells(self, cells: pd.Series) -> np.ndarray:
        """Each row's label, or :data:`_OUTSIDE` when no declared cell holds it. Labels from
        the data are the stripped values themselves (empty, or holding a control character
        this module uses to join labels: outside)."""
        text = cells.str.strip()
        if self.from_data:
            values = text.to_numpy(dtype=object)
            unusable = (text == "") | text.str.contains(f"[{_OUTSIDE}{_SEPARATOR}]", regex=True)
            return np.where(unusable.to_numpy(dtype=bool), _OUTSIDE, values)
        if self.categories:
            return np.where(text.isin(self.categories), text.to_numpy(dtype=object), _OUTSIDE)
        numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
        edges = np.asarray(self.edges)
        index = np.searchsorted(edges, numbers, side="right") - 1
        # The last bin is closed: its upper edge belongs to it.
        index = np.where(numbers == edges[-1], len(edges) - 2, index)
        inside = np.isfinite(numbers) & (numbers >= edges[0]) & (numbers <= edges[-1])
        labels = np.asarray(self.labels(), dtype=object)
        return np.where(inside, labels[np.clip(index, 0, len(labels) - 1)], _OUTSIDE)

    def describe_source(self) -> str:
        """Where the labels come from, in words (for the review page and the methods note)."""
        if self.edges:
            return "bins with edges typed by the steward"
        if self.source == TYPED:
            return "typed by the steward"
        if self.source == HIERARCHY:
            return f"from level {self.level} of the column's hierarchy"
        return f"from {LABEL_SOURCES[self.source]}"

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"column": self.column}
        if self.categories:
            out["categories"] = list(self.categories)
        elif self.edges:
            out["edges"] = list(self.edges)
        out["source"] = self.source
        if self.level is not None:
            out["level"] = self.level
        return out


@dataclass(frozen=True, kw_only=True)
class Query:
    """One statistic of a release and the ε it may use. δ is 0 except for a histogram whose
    labels come from the data (its private key release needs δ > 0)."""

    epsilon: float
    delta: float = 0.0
    kind: ClassVar[str] = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _finite_number(self.epsilon, "ε"))
        object.__setattr__(self, "delta", _finite_number(self.delta, "δ"))

    @property
    def needs_delta(self) -> bool:
        """Whether the query's mechanism is (ε, δ)-DP (its δ must then be above 0)."""
        return False

    @property
    def columns(self) -> tuple[str, ...]:
        return ()

    def describe(self) -> str:
        raise NotImplementedError

    def validate(self, columns: Sequence[str] | None = None) -> None:
        if not 0 < self.epsilon <= MAX_EPSILON:
            raise EngineError(f"ε must be above 0 and at most {MAX_EPSILON:g}.")
        if self.needs_delta:
            if not 0 < self.delta <= MAX_DELTA:
                raise EngineError(
                    f"Labels from the data are released privately, which needs a δ above 0 and "
                    f"at most {MAX_DELTA:g} (for example 1e-6)."
                )
        elif self.delta != 0:
            raise EngineError(
                "Only a histogram whose labels come from the data spends δ; set δ to 0."
            )
        if columns is not None:
            for name in self.columns:
                if name not in columns:
                    raise EngineError(f"The dataset has no column {name!r}.")

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "delta" and not value:
                continue  # pure ε-DP: the stored form stays as it always was
            if isinstance(value, tuple):
                value = [v.to_dict() if isinstance(v, Grouping) else v for v in value]
            out[f.name] = value
        return out


@dataclass(frozen=True, kw_only=True)
class Count(Query):
    """The number of rows."""

    kind: ClassVar[str] = "count"

    def describe(self) -> str:
        return "Number of rows"


@dataclass(frozen=True, kw_only=True)
class Histogram(Query):
    """Rows per cell of one grouping, or of the cross of two."""

    by: tuple[Grouping, ...]
    kind: ClassVar[str] = "histogram"

    def __post_init__(self) -> None:
        super().__post_init__()
        groupings = (self.by,) if isinstance(self.by, Grouping | Mapping) else self.by
        object.__setattr__(
            self,
            "by",
            tuple(g if isinstance(g, Grouping) else _grouping_from_dict(g) for g in groupings),
        )

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(g.column for g in self.by)

    @property
    def from_data(self) -> bool:
        """Whether a grouping's labels are found in the data (a private key release)."""
        return any(g.from_data for g in self.by)

    @property
    def needs_delta(self) -> bool:
        return self.from_data

    def describe(self) -> str:
        return "Rows by " + " × ".join(g.column for g in self.by)

    def validate(self, columns: Sequence[str] | None = None) -> None:
        super().validate(columns)
        if len(self.by) not in (1, 2):
            raise EngineError("A histogram groups by one or two columns.")
        if len(self.by) == 2 and self.by[0].column == self.by[1].column:
            raise EngineError("A histogram's two columns must differ.")
        for grouping in self.by:
            grouping.validate()
        declared = [g for g in self.by if not g.from_data]
        if math.prod(len(g.labels()) for g in declared) > MAX_CELLS:
            raise EngineError(f"A histogram may have at most {MAX_CELLS} cells.")

    def cells(self) -> list[tuple[str, ...]]:
        """The declared cells, in order (the "other" cell comes after them); a histogram
        with labels from the data has none declared."""
        if self.from_data:
            return []
        cells: list[tuple[str, ...]] = [()]
        for grouping in self.by:
            cells = [c + (label,) for c in cells for label in grouping.labels()]
        return cells


@dataclass(frozen=True, kw_only=True)
class _Bounded(Query):
    column: str
    lower: float
    upper: float

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "column", str(self.column))
        object.__setattr__(
            self, "lower", _finite_number(self.lower, f"The lower bound of {self.column!r}")
        )
        object.__setattr__(
            self, "upper", _finite_number(self.upper, f"The upper bound of {self.column!r}")
        )

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def validate(self, columns: Sequence[str] | None = None) -> None:
        super().validate(columns)
        if not self.column:
            raise EngineError("Name the numeric column.")
        _check_bounds(self.lower, self.upper, self.column)

    @property
    def bounds_text(self) -> str:
        return f"[{_fmt(self.lower)}, {_fmt(self.upper)}]"


@dataclass(frozen=True, kw_only=True)
class Sum(_Bounded):
    """The sum of a numeric column, each value clamped to [lower, upper]."""

    kind: ClassVar[str] = "sum"

    def describe(self) -> str:
        return f"Sum of {self.column} (values clamped to {self.bounds_text})"


@dataclass(frozen=True, kw_only=True)
class Mean(_Bounded):
    """The mean of a numeric column, each value clamped to [lower, upper]."""

    kind: ClassVar[str] = "mean"

    def describe(self) -> str:
        return f"Mean of {self.column} (values clamped to {self.bounds_text})"


@dataclass(frozen=True, kw_only=True)
class Quantiles(_Bounded):
    """Quantiles of a numeric column (``alphas``: 0.5 is the median, 0.9 the 90th percentile),
    chosen among ``steps + 1`` evenly spaced candidates from lower to upper."""

    alphas: tuple[float, ...] = (0.5,)
    steps: int = 1000
    kind: ClassVar[str] = "quantiles"

    def __post_init__(self) -> None:
        super().__post_init__()
        alphas = (self.alphas,) if isinstance(self.alphas, int | float) else self.alphas
        object.__setattr__(self, "alphas", tuple(_finite_number(a, "A quantile") for a in alphas))
        if isinstance(self.steps, bool) or not isinstance(self.steps, int | float):
            raise EngineError(f"The number of steps must be a whole number, not {self.steps!r}.")
        if int(self.steps) != self.steps:
            raise EngineError(f"The number of steps must be a whole number, not {self.steps!r}.")
        object.__setattr__(self, "steps", int(self.steps))

    def describe(self) -> str:
        which = ", ".join(_alpha_label(a) for a in self.alphas)
        return f"Quantiles ({which}) of {self.column} (values clamped to {self.bounds_text})"

    def validate(self, columns: Sequence[str] | None = None) -> None:
        super().validate(columns)
        if not self.alphas:
            raise EngineError(f"Choose at least one quantile of {self.column!r}.")
        if len(self.alphas) > MAX_QUANTILES:
            raise EngineError(f"Choose at most {MAX_QUANTILES} quantiles of {self.column!r}.")
        if any(not 0 < a < 1 for a in self.alphas):
            raise EngineError("Each quantile is a share strictly between 0 and 1 (0.5: median).")
        if len(set(self.alphas)) != len(self.alphas):
            raise EngineError(f"The quantiles of {self.column!r} repeat a value.")
        if not 1 <= self.steps < MAX_CANDIDATES:
            raise EngineError(f"Use between 1 and {MAX_CANDIDATES - 1} steps between the bounds.")

    def candidates(self) -> list[float]:
        grid = np.linspace(self.lower, self.upper, self.steps + 1)
        # Rounded to 12 significant digits so that a step of 0.12 reads 48.24, not
        # 48.239999999999995; unrounded when rounding would merge two candidates.
        rounded = [float(f"{x:.12g}") for x in grid]
        if all(b > a for a, b in zip(rounded, rounded[1:], strict=False)):
            return rounded
        return [float(x) for x in grid]


def _alpha_label(alpha: float) -> str:
    return "median" if alpha == 0.5 else f"p{_fmt(round(alpha * 100, 6))}"


QUERY_TYPES: dict[str, type[Query]] = {
    cls.kind: cls for cls in (Count, Histogram, Sum, Mean, Quantiles)
}


def _grouping_from_dict(data: Any) -> Grouping:
    if not isinstance(data, Mapping):
        raise EngineError("Each grouping of a histogram is an object with a column.")
    unknown = set(data) - {"column", "categories", "edges", "source", "level"}
    if unknown:
        raise EngineError(f"Unknown grouping field {sorted(unknown)[0]!r}.")
    if "column" not in data:
        raise EngineError("Name the column a histogram groups by.")
    return Grouping(
        column=data["column"],
        categories=tuple(data.get("categories") or ()),
        edges=tuple(data.get("edges") or ()),
        source=data.get("source") or TYPED,
        level=data.get("level"),
    )


def describe_grouping(data: Mapping[str, Any]) -> str:
    """A stored grouping in words, with where its labels come from ("sex: 2 labels typed by
    the steward"). A grouping stored before sources were recorded says so."""
    column = data.get("column", "")
    if data.get("edges"):
        edges = ", ".join(_fmt(float(e)) for e in data["edges"])
        return f"{column}: bins with edges {edges} (typed by the steward)"
    if data.get("source") == DATA:
        return f"{column}: labels from {LABEL_SOURCES[DATA]}"
    count = len(data.get("categories") or [])
    if "source" not in data:
        return f"{column}: {count} labels of unrecorded origin"
    where = _grouping_from_dict(data).describe_source()
    return f"{column}: {count} labels {where}"


def query_from_dict(data: Mapping[str, Any]) -> Query:
    """A query from its :meth:`Query.to_dict` form (e.g. JSON); not yet validated."""
    if not isinstance(data, Mapping):
        raise EngineError("Each query is an object with a kind and an ε.")
    kind = data.get("kind")
    cls = QUERY_TYPES.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise EngineError(f"Unknown kind of query {kind!r}; use one of {', '.join(QUERY_TYPES)}.")
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names - {"kind"}
    if unknown:
        raise EngineError(f"A {kind} query has no field {sorted(unknown)[0]!r}.")
    missing = [f.name for f in fields(cls) if f.name not in data and _required(f)]
    if missing:
        raise EngineError(f"A {kind} query needs {missing[0]!r}.")
    arguments = {k: v for k, v in data.items() if k != "kind"}
    if "by" in arguments:
        by = arguments["by"]
        arguments["by"] = tuple(by) if isinstance(by, list | tuple) else (by,)
    if "alphas" in arguments and isinstance(arguments["alphas"], list):
        arguments["alphas"] = tuple(arguments["alphas"])
    try:
        return cls(**arguments)
    except TypeError as exc:  # a value of the wrong shape
        raise EngineError(f"A {kind} query is malformed: {exc}.") from None


def _required(f) -> bool:
    from dataclasses import MISSING

    return f.default is MISSING and f.default_factory is MISSING


def queries_from_list(items: Iterable[Mapping[str, Any]]) -> list[Query]:
    return [query_from_dict(item) for item in items]


def validate_queries(queries: Sequence[Query], columns: Sequence[str] | None = None) -> None:
    """Raise :class:`EngineError` naming the first query that cannot run, and why."""
    if not queries:
        raise EngineError("Add at least one query.")
    if len(queries) > MAX_QUERIES:
        raise EngineError(f"A release holds at most {MAX_QUERIES} queries.")
    for number, query in enumerate(queries, start=1):
        if not isinstance(query, Query):
            raise EngineError(f"Query {number} is not a query.")
        try:
            query.validate(columns)
        except EngineError as exc:
            raise EngineError(f"Query {number} ({query.kind}): {exc}") from None


def requested_epsilon(queries: Sequence[Query]) -> Decimal:
    """The ε the release spends: the exact decimal sum of its queries' ε."""
    return sum((Decimal(repr(q.epsilon)) for q in queries), Decimal(0))


def requested_delta(queries: Sequence[Query]) -> Decimal:
    return sum((Decimal(repr(q.delta)) for q in queries), Decimal(0))


# --- Building the OpenDP measurements ------------------------------------------------------


@dataclass(frozen=True)
class QueryPlan:
    """What a query will cost and how precise it will be, known before any data is read.

    ``privacy_loss``: OpenDP's privacy map of the query's measurement at one row (a hair under
    ``epsilon``). ``error``: half-width at 95 % (``error_kind`` "absolute", in the statistic's
    unit; "rank", in rows of the sorted column for quantiles); a mean's error depends on the
    number of rows and is None in a preview without ``rows``.
    """

    index: int
    kind: str
    description: str
    mechanism: str
    epsilon: float
    delta: float
    privacy_loss: float
    sensitivity: float
    scale: float
    error: float | None
    error_kind: str
    error_note: str
    query: dict
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class _Built:
    plan: QueryPlan
    measurement: dp.Measurement
    #: raw OpenDP output -> (value, error, detail)
    finish: Callable[[Any], tuple[Any, float | None, dict]]


def _frame_space(columns: Sequence[str]) -> tuple[dp.Domain, dp.Metric]:
    names = [str(c) for c in columns]

    def member(frame: Any) -> bool:
        return isinstance(frame, pd.DataFrame) and [str(c) for c in frame.columns] == names

    # The identifier names the columns: two frames with other columns are other domains.
    return dp.user_domain(f"AnonymizerFrame{json.dumps(names)}", member=member), METRIC


def _rowwise(space, output_domain: dp.Domain, function: Callable[[pd.DataFrame], list]):
    """A transformation mapping each row of the frame to at most one value, on its own.

    Stability: adding or removing one row adds or removes at most one value, so a distance of
    d rows in gives at most d values out (``d_in -> d_in`` under the symmetric distance).
    """
    return dp.t.make_user_transformation(
        space[0], space[1], output_domain, METRIC, function, lambda d_in: d_in
    )


def _text(frame: pd.DataFrame, column: str) -> pd.Series:
    cells = frame[column]
    if pd.api.types.infer_dtype(cells, skipna=False) == "string":
        return cells
    return cells.where(cells.notna(), "").astype(str)


def _numbers(frame: pd.DataFrame, column: str) -> list[float]:
    """The column's finite numbers; empty, non-numeric and infinite cells are left out."""
    numbers = pd.to_numeric(_text(frame, column).str.strip(), errors="coerce").to_numpy(dtype=float)
    return numbers[np.isfinite(numbers)].tolist()


def _calibrate(make: Callable[[float], dp.Measurement], epsilon: float):
    """The measurement with the smallest noise scale whose privacy loss fits ``epsilon``.

    Every mechanism here has a privacy loss of sensitivity / scale, so OpenDP's map at scale 1
    gives the scale directly; OpenDP's map of the result is then checked (and the scale nudged
    up while it rounds above the target), so the loss reported is always OpenDP's own.
    """
    target = epsilon * (1 - _SLACK)
    scale = float(make(1.0).map(D_IN)) / target
    measurement = make(scale)
    while measurement.map(D_IN) > target:
        scale = math.nextafter(scale, math.inf) * (1 + 1e-12)
        measurement = make(scale)
    return measurement, scale, float(measurement.map(D_IN))


def _laplace_accuracy(scale: float, alpha: float = ALPHA) -> float:
    return float(dp.laplacian_scale_to_accuracy(scale, alpha))


def _discrete_accuracy(scale: float, alpha: float = ALPHA) -> float:
    return float(dp.discrete_laplacian_scale_to_accuracy(scale, alpha))


def _plan(query: Query, index: int, **values: Any) -> QueryPlan:
    return QueryPlan(
        index=index,
        kind=query.kind,
        description=query.describe(),
        epsilon=query.epsilon,
        delta=query.delta,
        query=query.to_dict(),
        **values,
    )


def _build_count(query: Count, space, index: int, rows: int | None) -> _Built:
    rows_t = _rowwise(space, dp.vector_domain(dp.atom_domain(T=bool)), lambda f: [True] * len(f))
    count = rows_t >> dp.t.then_count(TO="i64")

    def make(scale: float):
        return count >> dp.m.then_laplace(scale=scale)

    measurement, scale, loss = _calibrate(make, query.epsilon)
    error = _discrete_accuracy(scale)
    plan = _plan(
        query,
        index,
        mechanism="discrete Laplace",
        privacy_loss=loss,
        sensitivity=float(count.map(D_IN)),
        scale=scale,
        error=error,
        error_kind="absolute",
        error_note="rows, at 95 %",
    )
    return _Built(plan, measurement, lambda raw: (int(raw), error, {}))


def _joint_keys(groupings: Sequence[Grouping], frame: pd.DataFrame) -> np.ndarray:
    """Each row's cell key (its groupings' labels joined), or :data:`_OUTSIDE` when a grouping
    has no cell for it."""
    labels = [g.label_cells(_text(frame, g.column)) for g in groupings]
    keyed = labels[0].astype(object)
    outside = labels[0] == _OUTSIDE
    for more in labels[1:]:
        keyed = keyed + _SEPARATOR + more
        outside |= more == _OUTSIDE
    return np.where(outside, _OUTSIDE, keyed)


def _threshold_for(make: Callable[[int], dp.Measurement], delta: float) -> int:
    """The smallest threshold whose δ (OpenDP's privacy map) fits ``delta``."""
    target = delta * (1 - _SLACK)

    def fits(threshold: int) -> bool:
        return float(make(threshold).map(D_IN)[1]) <= target

    low, high = 1, 2
    while not fits(high):
        low, high = high, high * 2
        if high > 2**40:  # pragma: no cover - δ is bounded below by validation
            raise EngineError("No threshold keeps δ this small.")
    while low < high:  # smallest passing threshold in (low, high]
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return high


def _build_private_keys(query: Histogram, space, index: int, rows: int | None) -> _Built:
    """A histogram whose labels are found in the data: OpenDP's private key release.

    Every row maps to its cell (a stability-1 row map), the cells present are counted
    (``make_count_by``: one row changes one count by one), and ``make_laplace_threshold``
    adds discrete Laplace noise to each count and publishes only the cells whose noisy count
    reaches the threshold. The noise's scale gives ε; the threshold is the smallest that keeps
    δ, the chance that a cell held by one row is published, within the query's δ."""
    groupings = query.by

    def cell_keys(frame: pd.DataFrame) -> list[str]:
        keys = _joint_keys(groupings, frame)
        return keys[keys != _OUTSIDE].tolist()

    labelled = _rowwise(space, dp.vector_domain(dp.atom_domain(T=str)), cell_keys)
    counts = labelled >> dp.t.then_count_by(TV="i64")

    def make(scale: float, threshold: int = 2**40):
        return counts >> dp.m.then_laplace_threshold(scale=scale, threshold=threshold)

    def epsilon_of(measurement) -> float:
        return float(measurement.map(D_IN)[0])

    target = query.epsilon * (1 - _SLACK)
    scale = epsilon_of(make(1.0)) / target
    while epsilon_of(make(scale)) > target:
        scale = math.nextafter(scale, math.inf) * (1 + 1e-12)
    threshold = _threshold_for(lambda t: make(scale, t), query.delta)
    measurement = make(scale, threshold)
    loss_epsilon, loss_delta = (float(x) for x in measurement.map(D_IN))
    error = _discrete_accuracy(scale)
    plan = _plan(
        query,
        index,
        mechanism="discrete Laplace with a threshold (private key release)",
        privacy_loss=loss_epsilon,
        sensitivity=1.0,
        scale=scale,
        error=error,
        error_kind="absolute",
        error_note=(
            f"rows in each published cell, at 95 %; a cell is published only when its noisy "
            f"count reaches {threshold}"
        ),
        detail={"threshold": threshold, "privacy_loss_delta": loss_delta, "label_source": DATA},
    )

    def finish(raw: Mapping[str, int]) -> tuple[Any, float, dict]:
        value = [{"cell": key.split(_SEPARATOR), "count": int(n)} for key, n in sorted(raw.items())]
        return value, error, {"published_cells": len(value)}

    return _Built(plan, measurement, finish)


def _build_histogram(query: Histogram, space, index: int, rows: int | None) -> _Built:
    if query.from_data:
        return _build_private_keys(query, space, index, rows)
    cells = query.cells()
    keys = [_SEPARATOR.join(cell) for cell in cells]
    groupings = query.by

    def cell_keys(frame: pd.DataFrame) -> list[str]:
        # A row outside any grouping's declared values goes to the "other" cell.
        return _joint_keys(groupings, frame).tolist()

    labelled = _rowwise(space, dp.vector_domain(dp.atom_domain(T=str)), cell_keys)
    counts = labelled >> dp.t.then_count_by_categories(
        categories=keys, null_category=True, TOA="i64"
    )

    def make(scale: float):
        return counts >> dp.m.then_laplace(scale=scale)

    measurement, scale, loss = _calibrate(make, query.epsilon)
    error = _discrete_accuracy(scale)
    plan = _plan(
        query,
        index,
        mechanism="discrete Laplace",
        privacy_loss=loss,
        sensitivity=float(counts.map(D_IN)),
        scale=scale,
        error=error,
        error_kind="absolute",
        error_note="rows in each cell, at 95 %",
        detail={"cells": len(cells) + 1},
    )

    def finish(raw: list[int]) -> tuple[Any, float, dict]:
        value = [{"cell": list(cell), "count": int(n)} for cell, n in zip(cells, raw, strict=False)]
        value.append({"cell": [OTHER_LABEL], "count": int(raw[-1]), "other": True})
        return value, error, {}

    return _Built(plan, measurement, finish)


def _numeric(space, query: _Bounded):
    column = query.column
    values = _rowwise(
        space, dp.vector_domain(dp.atom_domain(T=float, nan=False)), lambda f: _numbers(f, column)
    )
    return values >> dp.t.then_clamp(bounds=(query.lower, query.upper))


def _sum_chain(space, query: _Bounded):
    return _numeric(space, query) >> dp.t.make_bounded_float_checked_sum(
        size_limit=SUM_SIZE_LIMIT, bounds=(query.lower, query.upper)
    )


def _build_sum(query: Sum, space, index: int, rows: int | None) -> _Built:
    total = _sum_chain(space, query)

    def make(scale: float):
        return total >> dp.m.then_laplace(scale=scale)

    measurement, scale, loss = _calibrate(make, query.epsilon)
    error = _laplace_accuracy(scale)
    plan = _plan(
        query,
        index,
        mechanism="Laplace",
        privacy_loss=loss,
        sensitivity=float(total.map(D_IN)),
        scale=scale,
        error=error,
        error_kind="absolute",
        error_note=f"in units of {query.column}, at 95 %",
        detail={"lower": query.lower, "upper": query.upper},
    )
    return _Built(plan, measurement, lambda raw: (float(raw), error, {}))


def _mean_error(sum_scale: float, count_scale: float, bound: float, count: float) -> float:
    """Half-width at 95 % of ``noisy sum / noisy count`` around the clamped values' mean m.

    With S~ = S + e_s and n~ = n + e_c: S~/n~ - m = (e_s - m e_c) / n~, and |m| <= bound. Each of
    |e_s| <= a_s and |e_c| <= a_c fails with probability 2.5 %, so both hold with 95 %.
    """
    a_sum = _laplace_accuracy(sum_scale, ALPHA / 2)
    a_count = _discrete_accuracy(count_scale, ALPHA / 2)
    return (a_sum + bound * a_count) / max(count, 1.0)


def _build_mean(query: Mean, space, index: int, rows: int | None) -> _Built:
    half = query.epsilon / 2
    total = _sum_chain(space, query)
    count = _numeric(space, query) >> dp.t.then_count(TO="i64")
    m_sum, sum_scale, sum_loss = _calibrate(lambda s: total >> dp.m.then_laplace(scale=s), half)
    m_count, count_scale, count_loss = _calibrate(
        lambda s: count >> dp.m.then_laplace(scale=s), half
    )
    measurement = dp.c.make_composition([m_sum, m_count])
    bound = max(abs(query.lower), abs(query.upper))
    plan = _plan(
        query,
        index,
        mechanism="Laplace sum / discrete Laplace count",
        privacy_loss=float(measurement.map(D_IN)),
        sensitivity=float(total.map(D_IN)),
        scale=sum_scale,
        error=_mean_error(sum_scale, count_scale, bound, rows) if rows else None,
        error_kind="absolute",
        error_note=f"in units of {query.column}, at 95 %, at the noisy count",
        detail={
            "lower": query.lower,
            "upper": query.upper,
            "sum_scale": sum_scale,
            "count_scale": count_scale,
            "sum_error": _laplace_accuracy(sum_scale),
            "count_error": _discrete_accuracy(count_scale),
            "sum_privacy_loss": sum_loss,
            "count_privacy_loss": count_loss,
        },
    )

    def finish(raw: list) -> tuple[Any, float | None, dict]:
        noisy_sum, noisy_count = float(raw[0]), int(raw[1])
        detail = {"noisy_sum": noisy_sum, "noisy_count": noisy_count}
        if noisy_count < 1:
            # Too few values for a mean; nothing more is learnt from saying so.
            return None, None, detail
        value = min(max(noisy_sum / noisy_count, query.lower), query.upper)
        return value, _mean_error(sum_scale, count_scale, bound, noisy_count), detail

    return _Built(plan, measurement, finish)


def _build_quantiles(query: Quantiles, space, index: int, rows: int | None) -> _Built:
    share = query.epsilon / len(query.alphas)
    candidates = query.candidates()
    values = _numeric(space, query)
    parts = []
    measurements = []
    for alpha in query.alphas:

        def make(scale: float, alpha: float = alpha):
            return values >> dp.m.then_private_quantile(
                dp.max_divergence(), candidates=candidates, alpha=alpha, scale=scale
            )

        measurement, scale, loss = _calibrate(make, share)
        measurements.append(measurement)
        # Report noisy max with Gumbel(scale) noise on scores counted in rows: a candidate
        # whose score is t worse than the best wins with probability at most exp(-t/scale),
        # so with 95 % the winner is within scale * ln(|C| / 0.05) rows of the best.
        rank_error = scale * math.log(len(candidates) / ALPHA)
        parts.append(
            {
                "alpha": alpha,
                "scale": scale,
                "privacy_loss": loss,
                "error": rank_error,
                "sensitivity": loss * scale,
            }
        )
    measurement = dp.c.make_composition(measurements)
    error = max(p["error"] for p in parts)
    plan = _plan(
        query,
        index,
        mechanism="exponential mechanism (report noisy max, Gumbel)",
        privacy_loss=float(measurement.map(D_IN)),
        sensitivity=max(p["sensitivity"] for p in parts),
        scale=max(p["scale"] for p in parts),
        error=error,
        error_kind="rank",
        error_note="rows of the sorted column, at 95 % "
        f"(candidates every {_fmt((query.upper - query.lower) / query.steps)})",
        detail={"quantiles": parts, "step": (query.upper - query.lower) / query.steps},
    )

    def finish(raw: list) -> tuple[Any, float, dict]:
        value = [
            {
                "alpha": p["alpha"],
                "label": _alpha_label(p["alpha"]),
                "value": float(v),
                "error": p["error"],
            }
            for p, v in zip(parts, raw, strict=False)
        ]
        return value, error, {}

    return _Built(plan, measurement, finish)


_BUILDERS: dict[str, Callable[..., _Built]] = {
    "count": _build_count,
    "histogram": _build_histogram,
    "sum": _build_sum,
    "mean": _build_mean,
    "quantiles": _build_quantiles,
}


def _build_all(
    queries: Sequence[Query], columns: Sequence[str], rows: int | None = None
) -> list[_Built]:
    space = _frame_space(columns)
    try:
        return [_BUILDERS[q.kind](q, space, i, rows) for i, q in enumerate(queries)]
    except dp.OpenDPException as exc:  # pragma: no cover - validation should catch it first
        raise EngineError(f"OpenDP refused a query: {exc}") from None


def preview(queries: Sequence[Query], rows: int | None = None) -> list[QueryPlan]:
    """Each query's mechanism, ε and expected error at 95 %, without touching any data.

    ``rows``: the number of rows, known to the steward, used only for a mean's error (which
    depends on it); never for noise. Spends nothing.
    """
    validate_queries(queries)
    columns = sorted({c for q in queries for c in q.columns})
    return [b.plan for b in _build_all(queries, columns, rows)]


# --- Running a release ----------------------------------------------------------------------


@dataclass(frozen=True)
class QueryResult:
    """A query's plan and its noisy ``value`` (drawn once), with the error at 95 %."""

    plan: QueryPlan
    value: Any
    error: float | None
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            **self.plan.to_dict(),
            "value": self.value,
            "error": self.error,
            "result_detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryResult:
        plan_fields = {f.name for f in fields(QueryPlan)}
        plan = QueryPlan(**{k: v for k, v in data.items() if k in plan_fields})
        return cls(plan, data["value"], data["error"], dict(data.get("result_detail") or {}))

    def table_rows(self) -> list[dict]:
        """One row per published number: statistic, group, value, error (for CSV)."""
        p = self.plan
        base = {
            "query": p.index + 1,
            "statistic": p.description,
            "epsilon": p.epsilon,
            "mechanism": p.mechanism,
            "error_kind": p.error_kind,
        }
        if p.kind == "histogram":
            return [
                {**base, "group": " × ".join(c["cell"]), "value": c["count"], "error": self.error}
                for c in self.value
            ]
        if p.kind == "quantiles":
            return [
                {**base, "group": q["label"], "value": q["value"], "error": q["error"]}
                for q in self.value
            ]
        return [{**base, "group": "", "value": self.value, "error": self.error}]


@dataclass(frozen=True)
class ReleaseResult:
    """The noisy results of a release and its total privacy loss.

    ``epsilon``/``delta``: what the release spends (sum of the queries' requested ε and δ).
    ``privacy_loss``: OpenDP's accountant for the composed measurement that ran (<= epsilon);
    ``privacy_loss_delta`` its δ (0 unless a query released labels from the data).
    """

    results: tuple[QueryResult, ...]
    epsilon: float
    delta: float
    privacy_loss: float
    privacy_loss_delta: float = 0.0
    confidence: float = CONFIDENCE
    privacy_unit: str = "one row, added or removed (unbounded DP)"
    composition: str = "basic sequential composition (OpenDP make_composition)"
    opendp_version: str = field(default_factory=lambda: version("opendp"))

    def to_dict(self) -> dict:
        return {
            "results": [r.to_dict() for r in self.results],
            "epsilon": self.epsilon,
            "delta": self.delta,
            "privacy_loss": self.privacy_loss,
            # Only when a query spent δ: pure ε-DP results keep the form (and SHA-256) they had.
            **({"privacy_loss_delta": self.privacy_loss_delta} if self.privacy_loss_delta else {}),
            "confidence": self.confidence,
            "privacy_unit": self.privacy_unit,
            "composition": self.composition,
            "opendp_version": self.opendp_version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReleaseResult:
        return cls(
            results=tuple(QueryResult.from_dict(r) for r in data["results"]),
            **{k: v for k, v in data.items() if k != "results"},
        )

    def canonical_json(self) -> bytes:
        return canonical_json(self.to_dict())

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json()).hexdigest()

    def table_rows(self) -> list[dict]:
        return [row for r in self.results for row in r.table_rows()]


def canonical_json(data: Any) -> bytes:
    """One byte form per value: sorted keys, no spaces, UTF-8, shortest float repr, no NaN."""
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


@dataclass(frozen=True)
class CompiledRelease:
    """A release's OpenDP measurement, built once: invoking it draws fresh noise each time.

    ``measurement`` is the basic composition of the queries' measurements; its privacy map at
    one row, ``privacy_loss``, is checked to equal the sum of theirs and to fit ``epsilon``.
    """

    queries: tuple[Query, ...]
    columns: tuple[str, ...]
    plans: tuple[QueryPlan, ...]
    measurement: dp.Measurement
    privacy_loss: float
    privacy_loss_delta: float
    epsilon: Decimal
    delta: Decimal
    _finishers: tuple[Callable[[Any], tuple[Any, float | None, dict]], ...]

    def run(self, frame: pd.DataFrame) -> ReleaseResult:
        if [str(c) for c in frame.columns] != list(self.columns):
            raise EngineError("The data's columns are not those the release was built for.")
        raw = self.measurement(frame)
        results = []
        for plan, finish, output in zip(self.plans, self._finishers, raw, strict=True):
            value, error, detail = finish(output)
            results.append(QueryResult(plan, value, error, detail))
        return ReleaseResult(
            results=tuple(results),
            epsilon=float(self.epsilon),
            delta=float(self.delta),
            privacy_loss=self.privacy_loss,
            privacy_loss_delta=self.privacy_loss_delta,
        )


def _is_approximate(measurement: dp.Measurement) -> bool:
    return measurement.output_measure != dp.max_divergence()


def compile_release(queries: Sequence[Query], columns: Sequence[str]) -> CompiledRelease:
    """Validate the queries against the dataset's columns and compose their measurements.

    When a query is (ε, δ)-DP (a private key release), every pure one is made approximate
    (``make_approximate``, δ = 0) so that OpenDP composes them all: ε's and δ's add up."""
    columns = [str(c) for c in columns]
    validate_queries(queries, columns)
    built = _build_all(queries, columns)
    measurements = [b.measurement for b in built]
    approximate = any(_is_approximate(m) for m in measurements)
    if approximate:
        measurements = [m if _is_approximate(m) else dp.c.make_approximate(m) for m in measurements]
    measurement = dp.c.make_composition(measurements)
    loss = measurement.map(D_IN)
    total, total_delta = (float(loss[0]), float(loss[1])) if approximate else (float(loss), 0.0)
    parts = sum(b.plan.privacy_loss for b in built)
    epsilon = requested_epsilon(queries)
    delta = requested_delta(queries)
    # The accountant's total is the sum recorded per query, and never more than is spent.
    if (
        not math.isclose(total, parts, rel_tol=1e-9)
        or total > float(epsilon)
        or total_delta > float(delta)
    ):
        raise EngineError(  # pragma: no cover - a broken invariant, not bad input
            f"OpenDP's privacy loss {total!r} (δ {total_delta!r}) does not match the queries' "
            f"ε {epsilon} (δ {delta})."
        )
    return CompiledRelease(
        queries=tuple(queries),
        columns=tuple(columns),
        plans=tuple(b.plan for b in built),
        measurement=measurement,
        privacy_loss=total,
        privacy_loss_delta=total_delta,
        epsilon=epsilon,
        delta=delta,
        _finishers=tuple(b.finish for b in built),
    )


#: A released cell holding fewer rows than this is counted as small on the officers' page.
SMALL_CELL = 10


def true_counts(
    frame: pd.DataFrame, queries: Sequence[Query], result: ReleaseResult
) -> list[dict[str, Any]]:
    """Per query, the rows behind what it released, counted exactly (plain pandas, no noise).

    For the officers' review only, never released: the smallest non-empty true count behind a
    published cell (and which cell), how many published cells hold fewer than
    :data:`SMALL_CELL` rows, the most one row can change the statistic, and whether the
    error at 95 % is at least that much (the noise hides one row)."""
    out = []
    for number, (query, released) in enumerate(zip(queries, result.results, strict=True), 1):
        cells: dict[str, int] = {}
        effect = 1.0
        if isinstance(query, Histogram):
            keys = pd.Series(_joint_keys(query.by, frame)).value_counts()
            if query.from_data:
                published = [_SEPARATOR.join(c["cell"]) for c in released.value]
            else:
                published = [_SEPARATOR.join(c) for c in query.cells()] + [_OUTSIDE]
            for key in published:
                label = OTHER_LABEL if key == _OUTSIDE else " × ".join(key.split(_SEPARATOR))
                cells[label] = int(keys.get(key, 0))
        elif isinstance(query, _Bounded):
            values = len(_numbers(frame, query.column))
            cells[""] = values
            if isinstance(query, Sum):
                effect = max(abs(query.lower), abs(query.upper))
            elif isinstance(query, Mean):
                effect = (query.upper - query.lower) / max(values, 1)
        else:
            cells[""] = len(frame)
        occupied = {label: n for label, n in cells.items() if n > 0}
        smallest_label = min(occupied, key=lambda label: occupied[label]) if occupied else ""
        error = released.error
        out.append(
            {
                "query": number,
                "smallest": occupied.get(smallest_label),
                "cell": smallest_label,
                "small_cells": sum(1 for n in occupied.values() if n < SMALL_CELL),
                "one_row_effect": effect,
                "error": error,
                "hides_one_row": error is not None and error >= effect,
            }
        )
    return out


def run_release(frame: pd.DataFrame, queries: Sequence[Query]) -> ReleaseResult:
    """Draw every query's noise once on ``frame`` (cells as strings) and return the results."""
    return compile_release(queries, list(frame.columns)).run(frame)
