"""What a statistics release asks: its queries, their validation, where labels come from.

A release is a list of queries on one dataset, each with its own ε (and δ for a private key
release). The query classes here are plain specifications: they read and validate their
dict form and say which columns they use; the OpenDP measurements are built from them in
:mod:`.mechanisms`, and run in :mod:`.run`. :data:`QUERY_TYPES` is the registry of query
kinds: the request form, the preview and the run all follow it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, fields
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ..types import EngineError

#: An array of labels (Python strings), one per row.
ObjectArray = np.ndarray[tuple[int], np.dtype[np.object_]]

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
#: A value no declared category or bin label can equal (labels are stripped text).
OUTSIDE = "\x00"
#: Joins a two-column cell's labels into one key.
SEPARATOR = "\x1f"

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


def fmt(x: float) -> str:
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
            f"(given {fmt(lower)} and {fmt(upper)})."
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
        given: tuple[object, object] = (self.categories, self.edges)  # as passed, unchecked
        if any(isinstance(g, str) for g in given):
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
            if any(OUTSIDE in c or SEPARATOR in c for c in self.categories):
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
            f"[{fmt(a)}, {fmt(b)}{']' if i == last else ')'}"
            for i, (a, b) in enumerate(zip(self.edges, self.edges[1:], strict=False))
        ]

    def label_cells(self, cells: pd.Series) -> ObjectArray:
        """Each row's label, or :data:`OUTSIDE` when no declared cell holds it. Labels from
        the data are the stripped values themselves (empty, or holding a control character
        this module uses to join labels: outside)."""
        text = cells.str.strip()
        if self.from_data:
            values = text.to_numpy(dtype=object)
            unusable = (text == "") | text.str.contains(f"[{OUTSIDE}{SEPARATOR}]", regex=True)
            return np.where(unusable.to_numpy(dtype=bool), OUTSIDE, values)
        if self.categories:
            return np.where(text.isin(self.categories), text.to_numpy(dtype=object), OUTSIDE)
        numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
        edges = np.asarray(self.edges)
        index = np.searchsorted(edges, numbers, side="right") - 1
        # The last bin is closed: its upper edge belongs to it.
        index = np.where(numbers == edges[-1], len(edges) - 2, index)
        inside = np.isfinite(numbers) & (numbers >= edges[0]) & (numbers <= edges[-1])
        labels = np.asarray(self.labels(), dtype=object)
        return np.where(inside, labels[np.clip(index, 0, len(labels) - 1)], OUTSIDE)

    def describe_source(self) -> str:
        """Where the labels come from, in words (for the review page and the methods note)."""
        if self.edges:
            return "bins with edges typed by the steward"
        if self.source == TYPED:
            return "typed by the steward"
        if self.source == HIERARCHY:
            return f"from level {self.level} of the column's hierarchy"
        return f"from {LABEL_SOURCES[self.source]}"

    def to_dict(self) -> dict[str, Any]:
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
    #: How the request form offers this kind of query.
    label: ClassVar[str] = ""
    #: The parts of the request form this kind uses (:data:`FORM_PARTS`).
    form_parts: ClassVar[tuple[str, ...]] = ()

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

    def to_dict(self) -> dict[str, Any]:
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
    label: ClassVar[str] = "Count of rows"
    form_parts: ClassVar[tuple[str, ...]] = ()

    def describe(self) -> str:
        return "Number of rows"


@dataclass(frozen=True, kw_only=True)
class Histogram(Query):
    """Rows per cell of one grouping, or of the cross of two."""

    by: tuple[Grouping, ...]
    kind: ClassVar[str] = "histogram"
    label: ClassVar[str] = "Histogram (counts by one or two columns)"
    form_parts: ClassVar[tuple[str, ...]] = ("groupings", "delta")

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
        return f"[{fmt(self.lower)}, {fmt(self.upper)}]"


@dataclass(frozen=True, kw_only=True)
class Sum(_Bounded):
    """The sum of a numeric column, each value clamped to [lower, upper]."""

    kind: ClassVar[str] = "sum"
    label: ClassVar[str] = "Sum of a numeric column"
    form_parts: ClassVar[tuple[str, ...]] = ("column", "bounds")

    def describe(self) -> str:
        return f"Sum of {self.column} (values clamped to {self.bounds_text})"


@dataclass(frozen=True, kw_only=True)
class Mean(_Bounded):
    """The mean of a numeric column, each value clamped to [lower, upper]."""

    kind: ClassVar[str] = "mean"
    label: ClassVar[str] = "Mean of a numeric column"
    form_parts: ClassVar[tuple[str, ...]] = ("column", "bounds")

    def describe(self) -> str:
        return f"Mean of {self.column} (values clamped to {self.bounds_text})"


@dataclass(frozen=True, kw_only=True)
class Quantiles(_Bounded):
    """Quantiles of a numeric column (``alphas``: 0.5 is the median, 0.9 the 90th percentile),
    chosen among ``steps + 1`` evenly spaced candidates from lower to upper."""

    alphas: tuple[float, ...] = (0.5,)
    steps: int = 1000
    kind: ClassVar[str] = "quantiles"
    label: ClassVar[str] = "Quantiles (median, percentiles) of a numeric column"
    form_parts: ClassVar[tuple[str, ...]] = ("column", "bounds", "alphas")

    def __post_init__(self) -> None:
        super().__post_init__()
        given: object = self.alphas  # as passed: one number, or several
        alphas = (given,) if isinstance(given, int | float) else self.alphas
        object.__setattr__(self, "alphas", tuple(_finite_number(a, "A quantile") for a in alphas))
        if isinstance(self.steps, bool) or not isinstance(self.steps, int | float):
            raise EngineError(f"The number of steps must be a whole number, not {self.steps!r}.")
        if int(self.steps) != self.steps:
            raise EngineError(f"The number of steps must be a whole number, not {self.steps!r}.")
        object.__setattr__(self, "steps", int(self.steps))

    def describe(self) -> str:
        which = ", ".join(alpha_label(a) for a in self.alphas)
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


def alpha_label(alpha: float) -> str:
    return "median" if alpha == 0.5 else f"p{fmt(round(alpha * 100, 6))}"


#: The parts of the request form a query kind may use: a histogram's one or two groupings
#: (column, label source, hierarchy level, categories or bin edges), the δ of a private key
#: release, a numeric column, the bounds the steward types, the quantiles asked for.
FORM_PARTS = ("groupings", "delta", "column", "bounds", "alphas")


def registry(*kinds: type[Query]) -> dict[str, type[Query]]:
    for cls in kinds:
        unknown = set(cls.form_parts) - set(FORM_PARTS)
        if not cls.kind or not cls.label or unknown:
            raise TypeError(f"{cls.__name__} needs a kind, a label and known form parts.")
    return {cls.kind: cls for cls in kinds}


#: Every kind of query, in the order the request form offers them: the form, the preview,
#: the mechanisms and the run follow this registry (a new kind: its class above, its
#: measurement in ``mechanisms.BUILDERS``, one entry here).
QUERY_TYPES: dict[str, type[Query]] = registry(Count, Histogram, Sum, Mean, Quantiles)


def kinds_using(part: str) -> list[str]:
    """The kinds of query whose form uses ``part``, in the registry's order."""
    return [kind for kind, cls in QUERY_TYPES.items() if part in cls.form_parts]


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
        edges = ", ".join(fmt(float(e)) for e in data["edges"])
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


def _required(f: Field[Any]) -> bool:
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
