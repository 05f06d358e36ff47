"""Microaggregation of numeric quasi-identifiers, as ARX 3.9.2 does it.

A microaggregated quasi-identifier is not generalized: the equivalence classes are formed by
the other quasi-identifiers alone (ARX's ``DataDefinition.setMicroAggregationFunction(attr,
function)``, whose ``performClustering`` is false), and every released value of the column is
replaced by an aggregate of its class's original values
(``DistributionAggregateFunction``):

* ``mean``: the arithmetic mean (commons-math's two-pass mean), for whole numbers rounded
  half up (``Math.round``), for decimals written as Java's ``Double.toString`` writes them;
* ``median``: the middle value, or the mean of the two middle values (rounded half up for
  whole numbers);
* ``mode``: the most frequent value as written in the input; of equally frequent values the
  first in the order of ARX's per-class hash table (``Distribution``: open addressing by the
  value's dictionary code, linear probing, doubled from 8 buckets when three quarters full,
  filled in the order of the input's rows), which is reproduced;
* ``interval``: ``[min, max]``, each written as the column's type writes it.

Mean, median and interval need a numeric column (every value a whole number, or every value a
decimal number); mode takes any column. Missing values (the empty string) are left out of
the aggregate (a class holding nothing else releases ""), but count as a value of the column
in the Loss.

The Loss metric counts a microaggregated attribute as ARX's ``MetricMDNMLoss`` does: the
rows of each kept class times the share of the column's distinct values the class holds,
plus every suppressed row, divided by the rows (``getInformationLoss``, no lower bound).
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .arrays import FloatArray, IntArray, SmallIntArray
from .errors import EngineError

__all__ = [
    "FUNCTIONS",
    "NUMERIC_FUNCTIONS",
    "AggregatedColumn",
    "aggregate_classes",
    "first_rows",
    "column_kind",
    "describe",
    "parse_microaggregate",
]

#: The aggregate functions, in the order they are offered.
FUNCTIONS = ("mean", "median", "mode", "interval")
#: Those that need a numeric column.
NUMERIC_FUNCTIONS = ("mean", "median", "interval")
_LABELS = {
    "mean": "arithmetic mean",
    "median": "median",
    "mode": "mode",
    "interval": "interval [min, max]",
}

_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_LONG_MAX = 2**63 - 1


def describe(function: str) -> str:
    """The function as the report and the pages name it."""
    return _LABELS[function]


def parse_microaggregate(text: str) -> dict[str, str]:
    """``"age=mean,hours=interval"`` -> ``{"age": "mean", "hours": "interval"}`` (the command
    line's ``--microaggregate``)."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.rpartition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or not name:
            raise EngineError(
                f"Microaggregation is given as COLUMN=mean|median|mode|interval, not {part!r}."
            )
        if name in out:
            raise EngineError(f"The microaggregation of {name!r} is given twice.")
        if value not in FUNCTIONS:
            raise EngineError(
                f"Unknown microaggregation {value!r} for {name!r}; use one of "
                f"{', '.join(FUNCTIONS)}."
            )
        out[name] = value
    if not out:
        raise EngineError("No microaggregation given.")
    return out


def column_kind(values: Sequence[str]) -> str | None:
    """``"integer"`` when every value that is not missing is a whole number (ARX's Integer),
    ``"decimal"`` when every one is a decimal number (ARX's Decimal), else None."""
    present = [v.strip() for v in values if v.strip() != ""]
    if not present:
        return None
    if all(_INTEGER.fullmatch(v) and abs(int(v)) <= _LONG_MAX for v in present):
        return "integer"
    if all(_DECIMAL.fullmatch(v) and math.isfinite(float(v)) for v in present):
        return "decimal"
    return None


def java_double(x: float) -> str:
    """``Double.toString(x)``: the shortest digits that read back as ``x``, in fixed notation
    from 10^-3 up to 10^7, else as ``d.dddE±n``."""
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(x)
        return text if "." in text else text + ".0"
    sign, digits, exponent = decimal.Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + int(exponent)
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def _java_round(x: float) -> int:
    """Java's ``Math.round(double)``: the nearest whole number, halves up."""
    return math.floor(x + 0.5)


@dataclass(frozen=True)
class AggregatedColumn:
    """One microaggregated column: its distinct values (in the order they first appear: ARX's
    dictionary), each row's code among them and the function."""

    name: str
    function: str
    labels: list[str]
    codes: IntArray
    kind: str | None

    @property
    def domain_size(self) -> int:
        return len(self.labels)

    @classmethod
    def build(cls, name: str, function: str, column: Sequence[str]) -> AggregatedColumn:
        # In the order the values first appear, as ARX's dictionary numbers them.
        codes, uniques = pd.factorize(np.asarray([str(v) for v in column], dtype=object))
        labels = [str(u) for u in uniques]
        kind = column_kind(labels)
        if function in NUMERIC_FUNCTIONS and kind is None:
            raise EngineError(
                f"Column {name!r} cannot be microaggregated with the {describe(function)}: "
                "it needs numbers (every value a whole or a decimal number, or empty)."
            )
        return cls(name, function, labels, codes.astype(np.int64), kind)

    def numbers(self) -> FloatArray:
        """Each label as a number (NaN for a missing one or a non-numeric column)."""
        out = np.full(len(self.labels), np.nan)
        if self.kind is not None:
            for i, label in enumerate(self.labels):
                if label.strip():
                    out[i] = float(label)
        return out

    def format(self, value: float) -> str:
        """A number as the column's type writes it (integer: rounded half up)."""
        if self.kind == "integer":
            return str(_java_round(value))
        return java_double(value)

    def canonical(self, label: str) -> str:
        """An input value as ARX's type parses and writes it again."""
        if self.kind == "integer":
            return str(int(label))
        return java_double(float(label))


def first_rows(column: AggregatedColumn, row_class: SmallIntArray) -> tuple[IntArray, IntArray]:
    """Each (class, value) pair of the rows' classes, sorted by class then value, as
    ``(key, first row)`` with ``key = class * domain + value``."""
    key = row_class.astype(np.int64) * column.domain_size + column.codes
    uniq, first = np.unique(key, return_index=True)
    return uniq, first


def aggregate_classes(
    column: AggregatedColumn,
    group: IntArray,
    value: IntArray,
    count: IntArray,
    n_groups: int,
    first: IntArray | None = None,
) -> list[str]:
    """The aggregate of every class: ``(group[j], value[j], count[j])`` says that class
    ``group[j]`` holds ``count[j]`` rows with value code ``value[j]``; ``first[j]`` is the
    first input row of the pair (needed for the mode's ties)."""
    numbers = column.numbers()
    missing = np.array([label.strip() == "" for label in column.labels], dtype=bool)
    out = [""] * n_groups
    order = np.lexsort((value, group))
    group, value, count = group[order], value[order], count[order]
    arrival = np.zeros(len(group), dtype=np.int64) if first is None else first[order]
    bounds = np.flatnonzero(np.diff(group)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(group)]))
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if s == e:
            continue
        codes = value[s:e]
        freq = count[s:e]
        rows = arrival[s:e]
        present = ~missing[codes]
        codes, freq, rows = codes[present], freq[present], rows[present]
        if len(codes) == 0:
            continue
        if column.function == "mode":
            out[int(group[s])] = _mode(column, codes, freq, rows)
        else:
            out[int(group[s])] = _aggregate(column, numbers, codes, freq)
    return out


def _bucket_order(codes: list[int]) -> list[int]:
    """ARX's ``Distribution`` filled with ``codes`` (in this order): its buckets' codes in
    bucket order (8 buckets, linear probing, doubled when more than 3/4 are used; a rehash
    moves the codes over in bucket order)."""
    capacity = 8
    table = [-1] * capacity

    def place(into: list[int], code: int) -> None:
        mask = len(into) - 1
        i = code & mask
        while into[i] != -1:
            i = (i + 1) & mask
        into[i] = code

    for size, code in enumerate(codes, start=1):
        place(table, code)
        if size > int(capacity * 0.75):
            capacity *= 2
            bigger = [-1] * capacity
            for old in table:
                if old != -1:
                    place(bigger, old)
            table = bigger
    return [c for c in table if c != -1]


def _mode(column: AggregatedColumn, codes: IntArray, freq: IntArray, rows: IntArray) -> str:
    """The most frequent value; of equally frequent ones the first in ARX's bucket order."""
    frequency = dict(zip(codes.tolist(), freq.tolist(), strict=True))
    arrival = [int(c) for c in codes[np.argsort(rows, kind="stable")]]
    best, top = -1, -1
    for code in _bucket_order(arrival):
        if frequency[code] > top:
            best, top = code, frequency[code]
    return column.labels[best]


def _aggregate(
    column: AggregatedColumn, numbers: FloatArray, codes: IntArray, freq: IntArray
) -> str:
    fn = column.function
    x = numbers[codes]
    if fn == "interval":
        return (
            f"[{column.canonical(column.labels[int(codes[np.argmin(x)])])}, "
            f"{column.canonical(column.labels[int(codes[np.argmax(x)])])}]"
        )
    if fn == "mean":
        values = np.repeat(x, freq)
        n = len(values)
        xbar = float(np.sum(values)) / n
        # commons-math's Mean: the sum's mean corrected by the mean deviation from it.
        return column.format(xbar + float(np.sum(values - xbar)) / n)
    # median
    order = np.argsort(x, kind="stable")
    x, freq = x[order], freq[order]
    cumulative = np.cumsum(freq) - 1
    total = int(freq.sum())

    def at(index: int) -> float:
        return float(x[int(np.searchsorted(cumulative, index))])

    if total % 2 == 1:
        middle = at(total // 2)
        return column.format(middle)
    return column.format((at(total // 2 - 1) + at(total // 2)) / 2.0)


def validate(
    columns: Mapping[str, str],
    quasi_identifiers: Sequence[str],
) -> None:
    """The configuration's microaggregation, checked against its quasi-identifiers."""
    for name, function in columns.items():
        if function not in FUNCTIONS:
            raise EngineError(
                f"Unknown microaggregation {function!r} for {name!r}; use one of "
                f"{', '.join(FUNCTIONS)}."
            )
        if name not in quasi_identifiers:
            raise EngineError(f"Column {name!r} is microaggregated but is not a quasi-identifier.")
