"""Column profiles: inferred type, distinct and missing values, top values and a small chart.

Computed from a column's value counts (its distinct values and how often each occurs) rather
than from every row, so memory stays bounded by a column's distinct values whatever the number
of rows. The profiling job (``profiling``) and a type override (``services.set_column_type``)
use them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from releases.models.datasets import ColumnType, DateOrder

TOP_VALUES = 5
CHART_BARS = 8
HISTOGRAM_BINS = 12
#: Cells that mean "missing" in exports (besides the empty cell); counted, never changed.
MISSING_MARKERS = frozenset(
    {"", "?", "NA", "N/A", "n/a", "na", "NULL", "null", "None", "NaN", "nan", "-", "#N/A"}
)

INTEGER = re.compile(r"^[+-]?\d+$")
DECIMAL = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
#: A decimal comma (72,5), as files from much of Europe hold them.
DECIMAL_COMMA = re.compile(r"^[+-]?(\d+,\d*|,\d+)([eE][+-]?\d+)?$")
LEADING_ZERO = re.compile(r"^[+-]?0\d+([.,]\d*)?$")
ISO_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})([T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?$")
SLASH_DATE = re.compile(r"^(\d{1,2})[/.-](\d{1,2})[/.-](\d{4}|\d{2})$")


# --- Types --------------------------------------------------------------------------------


def _matches(values: pa.Array, pattern: re.Pattern) -> pa.Array:
    return pc.match_substring_regex(values, pattern.pattern)


def _all(mask: pa.Array) -> bool:
    return len(mask) > 0 and bool(pc.all(mask).as_py())


def _any(mask: pa.Array) -> bool:
    return bool(pc.any(mask).as_py())


def date_order_of(values: pd.Series | pa.Array) -> tuple[str, bool] | None:
    """The date order if every value is a date: ("ymd" | "dmy" | "mdy", ambiguous)."""
    values = _arrow(values)
    if len(values) == 0:
        return None
    if _all(_matches(values, ISO_DATE)):
        return DateOrder.ISO, False
    if not _all(_matches(values, SLASH_DATE)):
        return None
    first, second, _ = _slash_parts(values)
    if (
        (first < 1) | (second < 1) | ((first > 12) & (second > 12)) | (first > 31) | (second > 31)
    ).any():
        return None
    if (first > 12).any():
        return DateOrder.DMY, False
    if (second > 12).any():
        return DateOrder.MDY, False
    return DateOrder.DMY, True  # every day is 12 or less: the steward chooses


def _slash_parts(values: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, second, year) of d/m/y-like strings; NaN where a value is not one."""
    pattern = r"^(?P<a>\d{1,2})[/.-](?P<b>\d{1,2})[/.-](?P<y>\d{4}|\d{2})$"
    parts = pc.extract_regex(values, pattern)

    def number(field: str) -> np.ndarray:
        return pc.cast(parts.field(field), pa.float64()).to_numpy(zero_copy_only=False)

    year = number("y")
    year = np.where(year < 100, year + 2000, year)
    return number("a"), number("b"), year


def parse_dates(values: pd.Series | pa.Array, order: str) -> pd.Series:
    """Datetimes of the values in the given order; NaT where a value is not such a date."""
    values = _arrow(values)
    if order == DateOrder.ISO:
        text = pd.Series(values.to_numpy(zero_copy_only=False), dtype=object)
        parsed = pd.to_datetime(text, errors="coerce", format="ISO8601")
    else:
        first, second, year = _slash_parts(values)
        day, month = (first, second) if order == DateOrder.DMY else (second, first)
        frame = pd.DataFrame({"year": year, "month": month, "day": day})
        parsed = pd.to_datetime(frame, errors="coerce")
    # pandas 3 parses years 1 to 9999 (at microsecond resolution); a profile has always taken a
    # date outside datetime64[ns]'s range (1677-09-21 to 2262-04-11) for a value that is not one.
    instants = parsed.dt.tz_convert(None) if parsed.dt.tz is not None else parsed
    inside = instants.between(pd.Timestamp.min, pd.Timestamp.max)
    return parsed.where(inside).dt.as_unit("ns")


def _numbers(values: pa.Array) -> np.ndarray:
    """The stripped values as numbers (a decimal point or a decimal comma); NaN if not one."""
    point = _matches(values, DECIMAL)
    comma = pc.and_(_matches(values, DECIMAL_COMMA), pc.invert(point))
    text = pc.if_else(comma, pc.replace_substring(values, ",", "."), values)
    text = pc.replace_substring_regex(text, r"^\+", "")
    usable = pc.or_(point, comma)
    out = np.full(len(values), np.nan)
    if _any(usable):
        positions = np.flatnonzero(usable.to_numpy(zero_copy_only=False))
        out[positions] = pc.cast(pc.filter(text, usable), pa.float64()).to_numpy(
            zero_copy_only=False
        )
    return out


def infer_type(
    present: pd.Series | pa.Array,
    distinct: int,
    rows: int | None = None,
    decimal_comma: bool = False,
) -> tuple[str, str]:
    """(type, date order) of a column from its non-missing values (all rows, or the distinct
    values with ``rows`` the number of rows they stand for). ``decimal_comma``: values such as
    ``72,5`` make a decimal column (files whose delimiter is not a comma)."""
    values = _arrow(present)
    if len(values) == 0:
        return ColumnType.CATEGORICAL, ""
    rows = len(values) if rows is None else rows
    sample = pc.utf8_trim_whitespace(values)
    # Leading zeros (ZIP codes, account numbers) make a code, not a number.
    coded = _any(_matches(sample, LEADING_ZERO))
    if not coded and _all(_matches(sample, INTEGER)):
        return ColumnType.INTEGER, ""
    if not coded:
        point = _matches(sample, DECIMAL)
        if _all(point):
            return ColumnType.DECIMAL, ""
        if decimal_comma and _all(pc.or_(point, _matches(sample, DECIMAL_COMMA))):
            return ColumnType.DECIMAL, ""
    order = date_order_of(sample)
    if order is not None:
        return ColumnType.DATE, order[0]
    if distinct <= 50 or distinct <= 0.2 * rows:
        return ColumnType.CATEGORICAL, ""
    return ColumnType.TEXT, ""


def _arrow(values: pd.Series | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        return values
    return pa.array(values.astype(object).to_numpy(), type=pa.string(), from_pandas=True)


# --- Profiles -----------------------------------------------------------------------------


def _histogram(
    numbers: np.ndarray, labels: Callable[[float, float], str], weights: np.ndarray | None = None
) -> list[dict]:
    finite = np.isfinite(numbers)
    numbers = numbers[finite]
    if weights is not None:
        weights = weights[finite]
    if numbers.size == 0:
        return []
    lo, hi = float(numbers.min()), float(numbers.max())
    bins = 1 if lo == hi else min(HISTOGRAM_BINS, max(2, len(np.unique(numbers))))
    counts, edges = np.histogram(
        numbers, bins=bins, range=(lo, hi if hi > lo else lo + 1), weights=weights
    )
    return [
        {"label": labels(float(edges[i]), float(edges[i + 1])), "count": int(c)}
        for i, c in enumerate(counts)
    ]


def _number_label(lo: float, hi: float) -> str:
    def fmt(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:.4g}"

    return f"{fmt(lo)}–{fmt(hi)}"


def column_profile(
    series: pd.Series,
    column_type: str | None = None,
    date_order: str = "",
    decimal_comma: bool = False,
) -> dict:
    """Everything the page shows about one column (all JSON-serializable)."""
    counts = series.value_counts(sort=False, dropna=False)
    values = pa.array([str(v) for v in counts.index], type=pa.string())
    return profile_from_counts(
        values, counts.to_numpy(dtype=np.int64), column_type, date_order, decimal_comma
    )


def profile_from_counts(
    values: pa.Array,
    counts: np.ndarray | pa.Array,
    column_type: str | None = None,
    date_order: str = "",
    decimal_comma: bool = False,
) -> dict:
    """The profile of a column given as its distinct values and how often each occurs (in
    order of first appearance); the same as :func:`column_profile` on the rows themselves."""
    values = _arrow(values)
    counts = np.asarray(counts, dtype=np.int64)
    order = np.argsort(-counts, kind="stable")  # most frequent first, ties by first appearance
    values = values.take(pa.array(order))
    counts = counts[order]
    total = int(counts.sum())
    distinct = len(values)
    stripped = pc.utf8_trim_whitespace(values)
    missing = pc.is_in(stripped, value_set=pa.array(sorted(MISSING_MARKERS))).to_numpy(
        zero_copy_only=False
    )
    present_at = np.flatnonzero(~missing)
    present = values.take(pa.array(present_at))
    present_counts = counts[present_at]
    inferred, inferred_order = infer_type(
        present, len(present), int(present_counts.sum()), decimal_comma
    )
    chosen = column_type or inferred
    order_used = date_order or inferred_order
    markers = stripped.filter(pa.array(missing)).to_pylist() if missing.any() else []
    top = [
        {"value": v, "count": int(c)}
        for v, c in zip(values.slice(0, TOP_VALUES).to_pylist(), counts[:TOP_VALUES], strict=True)
    ]
    profile: dict = {
        "rows": total,
        "distinct": distinct,
        "unique_share": (distinct / total) if total else 0.0,
        "unique_rows": int((counts == 1).sum()),
        "missing": int(counts[missing].sum()),
        "missing_markers": sorted({m if m else "(empty)" for m in markers}),
        "top": top,
        "inferred_type": inferred,
        "date_order": order_used,
        "date_ambiguous": False,
        "single_value": distinct == 1,
        "warnings": [],
    }
    present_stripped = pc.utf8_trim_whitespace(present)
    if inferred == ColumnType.DATE:
        detected = date_order_of(present_stripped)
        profile["date_ambiguous"] = bool(detected and detected[1])
    chart: dict = {"kind": "bars", "bins": []}
    if chosen in (ColumnType.INTEGER, ColumnType.DECIMAL):
        numbers = _numbers(present_stripped)
        unparsed = int(present_counts[np.isnan(numbers)].sum())
        if unparsed:
            profile["warnings"].append(f"{unparsed} values are not numbers.")
        if _any(_matches(present_stripped, DECIMAL_COMMA)):
            profile["decimal_comma"] = True
        chart = {
            "kind": "histogram",
            "bins": _histogram(numbers, _number_label, present_counts),
        }
        finite = numbers[np.isfinite(numbers)]
        if finite.size:
            profile["min"], profile["max"] = (
                int(x) if float(x).is_integer() and abs(x) < 1e15 else float(x)
                for x in (finite.min(), finite.max())
            )
    elif chosen == ColumnType.DATE:
        parsed = parse_dates(present_stripped, order_used or DateOrder.ISO)
        valid = parsed.notna().to_numpy()
        unparsed = int(present_counts[~valid].sum())
        if unparsed:
            profile["warnings"].append(f"{unparsed} values are not dates in this format.")
        if valid.any():
            dates = parsed[valid]
            profile["min"], profile["max"] = (
                dates.min().date().isoformat(),
                dates.max().date().isoformat(),
            )
            seconds = dates.astype("datetime64[ns]").astype("int64").to_numpy() / 1e9

            def label(lo: float, hi: float) -> str:
                a = pd.Timestamp(lo, unit="s").date().isoformat()
                b = pd.Timestamp(hi, unit="s").date().isoformat()
                return f"{a} – {b}"

            chart = {
                "kind": "histogram",
                "bins": _histogram(seconds, label, present_counts[valid]),
            }
    else:
        shown = values.slice(0, CHART_BARS).to_pylist()
        chart = {
            "kind": "bars",
            "bins": [
                {"label": v if v != "" else "(empty)", "count": int(c)}
                for v, c in zip(shown, counts[:CHART_BARS], strict=True)
            ],
        }
        if distinct > CHART_BARS:
            chart["other"] = int(counts[CHART_BARS:].sum())
    profile["chart"] = chart
    if profile["single_value"]:
        profile["warnings"].append(
            "Every row has the same value: the column tells nothing apart and could be dropped."
        )
    return profile
