"""The review's figures as data: class sizes on logarithmic bins, distributions in their
natural order. Pure functions (numpy, pandas): the worker computes what it stores with them,
the pages bin what was stored; nothing here reads a file or the database."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

#: A released value that hides everything (suppressed or generalized to the top).
TOP = "*"
OTHER = "(other values)"
#: Bars in a distribution: above this a categorical list shows its most frequent values and
#: "(other values)"; ordered numbers or intervals are merged into this many bins.
MAX_BARS = 20
#: Released values offered in the classes table's filter per column (beyond: typed by hand).
MAX_FILTER_CHOICES = 500


# --- Class sizes ---------------------------------------------------------------------------
#
# Bins on the 1-2-5 series (1, 2–4, 5–9, 10–19, 20–49, 50–99, 100–199, ...): about three bins a
# decade, so classes of 1 and of 10,000 both show, and every bin starts at a round number a
# reader knows (powers of two give edges like 33–64). The request's k is made an edge too, so
# the k line falls between bins: everything left of it is smaller than k.


_SERIES = [m * 10**e for e in range(19) for m in (1, 2, 5)]


def size_edges(max_size: int, k: int = 1) -> list[int]:
    """The bins' lower edges, then one past the last bin's upper edge (all ints >= 1)."""
    top = max(int(max_size), int(k), 1)
    edges = {e for e in _SERIES if e <= top}
    if k > 1:
        edges.add(int(k))
    end = next(e for e in _SERIES if e > top)
    return [*sorted(edges), end]


def size_counts(sizes: Iterable[int]) -> list[list[int]]:
    """``[[size, classes], ...]`` by size: what the worker stores (a few hundred pairs at most,
    since distinct sizes sum to at most the rows)."""
    sizes = np.asarray(list(sizes) if not isinstance(sizes, np.ndarray) else sizes, np.int64)
    sizes = sizes[sizes > 0]
    if not sizes.size:
        return []
    values, counts = np.unique(sizes, return_counts=True)
    return [[int(v), int(c)] for v, c in zip(values, counts, strict=True)]


def _label(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}–{high}"


def _compact(n: int) -> str:
    for unit, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def size_bins(after: Sequence, before: Sequence | None = None, k: int = 1) -> dict:
    """Class sizes (``[[size, classes], ...]`` after release and, if known, before) on the
    same logarithmic bins, with the k line's position.

    Each bin: low, high, label, and per side classes, rows and the share of that side's rows
    (the shares of a side sum to 1). ``k_edge``: the index of the first bin at or above k (the
    line is drawn on its left edge; None when k <= 1: every class passes)."""
    sides = {"after": after or [], "before": before or []}
    largest = max((int(s) for pairs in sides.values() for s, _ in pairs), default=1)
    edges = size_edges(largest, k)
    bins: list[dict[str, Any]] = [
        {
            "low": low,
            "high": high - 1,
            "label": _label(low, high - 1),
            "tick": _compact(low),
        }
        for low, high in zip(edges, edges[1:], strict=False)
    ]
    lows = np.asarray(edges[:-1], dtype=np.int64)
    for side, pairs in sides.items():
        classes = np.zeros(len(bins), dtype=np.int64)
        rows = np.zeros(len(bins), dtype=np.int64)
        if pairs:
            array = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
            where = np.searchsorted(lows, array[:, 0], side="right") - 1
            np.add.at(classes, where, array[:, 1])
            np.add.at(rows, where, array[:, 0] * array[:, 1])
        total = int(rows.sum())
        for i, b in enumerate(bins):
            b[side] = {
                "classes": int(classes[i]),
                "rows": int(rows[i]),
                "share": float(rows[i]) / total if total else 0.0,
            }
    k_edge = None
    if k > 1:
        k_edge = next((i for i, b in enumerate(bins) if b["low"] >= k), len(bins))
    return {
        "bins": bins,
        "k": int(k),
        "k_edge": k_edge,
        "end_tick": _compact(edges[-1]),
        "has_before": bool(before),
        "rows": {side: sum(b[side]["rows"] for b in bins) for side in sides},
        "classes": {side: sum(b[side]["classes"] for b in bins) for side in sides},
    }


def size_chart_from_bins(bins: Sequence[dict], k: int) -> dict:
    """A chart (as :func:`size_bins` gives) from bins stored with their figures after release
    (``low``, ``high``, ``classes``, ``rows``, ``share_of_rows``: the release report's)."""
    chart_bins = [
        {
            "low": b["low"],
            "high": b["high"],
            "label": _label(b["low"], b["high"]),
            "tick": _compact(b["low"]),
            "after": {"classes": b["classes"], "rows": b["rows"], "share": b["share_of_rows"]},
        }
        for b in bins
    ]
    k_edge = None
    if k > 1 and chart_bins:
        k_edge = next((i for i, b in enumerate(chart_bins) if b["low"] >= k), len(chart_bins))
    return {
        "bins": chart_bins,
        "k": int(k),
        "k_edge": k_edge,
        "k_label": "smallest allowed",
        "end_tick": _compact(chart_bins[-1]["high"] + 1) if chart_bins else "",
        "has_before": False,
    }


# --- Natural order -------------------------------------------------------------------------

_CODE = re.compile(r"^\s*-?0\d")
_LEADING_NUMBER = re.compile(r"^\s*[\[(]?\s*(-?\d+(?:\.\d+)?)")
_CHUNKS = re.compile(r"(\d+(?:\.\d+)?)")


def leading_number(label: str) -> float | None:
    """The number an interval or a number starts with ("20-39" → 20, "[0.5, 1[" → 0.5)."""
    match = _LEADING_NUMBER.match(str(label))
    return float(match.group(1)) if match else None


def natural_key(label: str) -> tuple:
    """Sort key reading the numbers inside a label as numbers ("item 9" before "item 10")."""
    parts = _CHUNKS.split(str(label))
    return tuple(
        (0, float(p), "") if i % 2 else (1, 0.0, p.casefold()) for i, p in enumerate(parts)
    )


def _last(label: str) -> bool:
    """Hidden values and "(other values)" come after the values they stand beside."""
    return label in (TOP, OTHER, "")


def natural_order(labels: Iterable[str], rank: dict[str, int] | None = None) -> list[str]:
    """``labels`` in their natural order: by ``rank`` (a hierarchy's order) when it knows them
    all, else by leading number when every label starts with one (numbers, intervals), else
    by :func:`natural_key`; "*", empty and "(other values)" last."""
    labels = list(labels)
    shown = [label for label in labels if not _last(label)]
    tail = [label for label in (TOP, "", OTHER) if label in labels]
    if rank and all(label in rank for label in shown):
        shown.sort(key=lambda label: rank[label])
    elif shown and all(leading_number(label) is not None for label in shown):
        shown.sort(key=lambda label: (leading_number(label), natural_key(label)))
    else:
        shown.sort(key=natural_key)
    return shown + tail


def ordered_pairs(pairs: Sequence, rank: dict[str, int] | None = None) -> list[list]:
    """``[[label, count], ...]`` in natural order (a stored list made before it was)."""
    counts = {str(label): count for label, count in pairs}
    return [[label, counts[label]] for label in natural_order(counts, rank)]


def hierarchy_rank(rows: Sequence[Sequence[str]]) -> dict[str, int]:
    """Each label of a hierarchy → the first row that holds it at any level: the order the
    hierarchy's author gave its values, and its generalizations in the order of theirs."""
    rank: dict[str, int] = {}
    for level in range(len(rows[0]) if rows else 0):
        for i, row in enumerate(rows):
            rank.setdefault(row[level], i)
    return rank


# --- Distributions -------------------------------------------------------------------------


def _codes(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), [str(v) for v in column.cat.categories]
    codes, uniques = pd.factorize(column, sort=False, use_na_sentinel=False)
    return codes, [str(v) for v in uniques]


def _side(column: pd.Series) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(codes, labels, rows per label) of a column; a missing cell (code -1) is the empty value
    at the last index."""
    codes, labels = _codes(column)
    size = len(labels)
    valid = codes[codes >= 0]
    counts = np.bincount(valid, minlength=size) if valid.size else np.zeros(size, np.int64)
    counts = np.append(counts, int((codes < 0).sum())).astype(np.int64)
    return np.where(codes >= 0, codes, size), [*labels, ""], counts


def _as_numbers(labels: Sequence[str], counts: np.ndarray) -> np.ndarray | None:
    """The labels as numbers (NaN for the empty value) when every value that occurs is a
    number or empty, and two or more numbers differ; else None. A code written with leading
    zeros (a ZIP code, "02139") is not a number."""
    # A copy: written below (NaN for the empty value).
    values = pd.to_numeric(pd.Series(list(labels), dtype=object), errors="coerce").to_numpy(
        dtype=float, copy=True
    )
    occurs = counts > 0
    empty = np.array([str(label).strip() == "" for label in labels], dtype=bool)
    if np.isnan(values[occurs & ~empty]).any():
        return None
    if any(_CODE.match(str(label)) for label, c in zip(labels, counts, strict=True) if c):
        return None
    if len(np.unique(values[occurs & ~empty])) < 2:
        return None
    values[empty] = np.nan
    return values


def _nice_edges(lo: float, hi: float, integral: bool, bins: int = 16) -> np.ndarray:
    """Edges of equal bins of a round width (1, 2 or 5 times a power of ten) over [lo, hi]."""
    raw = max(hi - lo, 1e-9) / bins
    exponent = math.floor(math.log10(raw))
    width = next(m * 10.0**exponent for m in (1, 2, 5, 10) if m * 10.0**exponent >= raw)
    if integral:
        width = max(1.0, float(math.ceil(width)))
    start = math.floor(lo / width) * width
    count = int(math.floor((hi - start) / width)) + 1
    return start + width * np.arange(count + 1)


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else format(float(x), "g")


def _edge_labels(edges: np.ndarray, integral: bool) -> list[str]:
    pairs = zip(edges, edges[1:], strict=False)
    if integral:
        return [_label(int(a), int(b) - 1) for a, b in pairs]
    return [f"[{_number_text(a)}, {_number_text(b)}[" for a, b in pairs]


def _binned(values: np.ndarray, counts: np.ndarray, lows: np.ndarray) -> np.ndarray:
    """Rows per bin (bins given by their sorted lower edges; below the first: the first)."""
    where = np.clip(np.searchsorted(lows, values, side="right") - 1, 0, len(lows) - 1)
    out = np.zeros(len(lows), dtype=np.int64)
    np.add.at(out, where, counts)
    return out


def _top(labels: list[str], counts: np.ndarray, rank: dict | None, limit: int) -> dict:
    """A list of categories: every value in natural order when few, else the most frequent
    ``limit`` and "(other values)" (how many values and rows that holds is kept)."""
    present = {label: int(c) for label, c in zip(labels, counts, strict=True) if c > 0}
    if len(present) <= limit:
        pairs = [[label, present[label]] for label in natural_order(present, rank)]
        return {"pairs": pairs, "order": "natural", "other": None}
    ranked = sorted(present.items(), key=lambda pair: -pair[1])
    kept, rest = ranked[:limit], ranked[limit:]
    other = {"values": len(rest), "rows": sum(c for _, c in rest)}
    pairs = [list(p) for p in kept] + [[OTHER, other["rows"]]]
    return {"pairs": pairs, "order": "count", "other": other}


def _merge(bins: list[list], limit: int) -> list[list]:
    """Ordered bins ``[[label, original, released], ...]`` merged, neighbours together, into
    at most ``limit`` bins."""
    if len(bins) <= limit:
        return bins
    size = math.ceil(len(bins) / limit)
    out = []
    for start in range(0, len(bins), size):
        group = bins[start : start + size]
        label = group[0][0] if len(group) == 1 else f"{group[0][0]} … {group[-1][0]}"
        out.append([label, sum(b[1] for b in group), sum(b[2] for b in group)])
    return out


def distribution(
    original: pd.Series,
    released: pd.Series | None,
    source_rows: np.ndarray | None = None,
    rank: dict[str, int] | None = None,
    mapping: dict[str, str] | None = None,
    limit: int = MAX_BARS,
) -> dict:
    """A column's original and released distribution, for the page's chart.

    Numbers (``kind`` "histogram", ``bins``: ``[[label, original rows, released rows], ...]``
    in numeric order): the original on the released values' bins. A generalized column's
    bins are its released intervals, ordered by the original values they hold (``source_rows[i]``
    is the original row of released row ``i``), each original value counted in the interval
    holding it; numbers released as they are share equal bins of a round width (or a bar per
    value when few). Hidden ("*") and empty values come last.

    Categories (``kind`` "categories", ``original`` and ``released``: ``[[label, rows], ...]``):
    in the hierarchy's order (``rank``) or their natural order; a list longer than ``limit``
    shows its most frequent values, then "(other values)" (``*_other``: values and rows it
    holds). Counted on codes: microseconds per distinct value, one pass over the rows."""
    r_side = _side(released) if released is not None else None
    return _distribution(_side(original), r_side, source_rows, rank, mapping, limit)


def distribution_of_counts(
    original: Mapping[str, int],
    released: Mapping[str, int] | None,
    rank: dict[str, int] | None = None,
    mapping: dict[str, str] | None = None,
    limit: int = MAX_BARS,
) -> dict:
    """:func:`distribution` from each side's rows per value (a missing cell is the value ""),
    counted batch by batch or on a frequency table: the same chart, for full-domain
    generalization (``mapping``) and columns released as they are."""

    def side(counts: Mapping[str, int]) -> tuple[np.ndarray, list[str], np.ndarray]:
        labels = [str(label) for label in counts]
        rows = np.fromiter((int(c) for c in counts.values()), dtype=np.int64, count=len(labels))
        return np.arange(len(labels)), labels, rows

    r_side = side(released) if released is not None else None
    return _distribution(side(original), r_side, None, rank, mapping, limit)


def _distribution(
    o_side: tuple[np.ndarray, list[str], np.ndarray],
    r_side: tuple[np.ndarray, list[str], np.ndarray] | None,
    source_rows: np.ndarray | None,
    rank: dict[str, int] | None,
    mapping: dict[str, str] | None,
    limit: int,
) -> dict:
    o_codes, o_labels, o_counts = o_side
    o_numbers = _as_numbers(o_labels, o_counts)
    if o_numbers is not None:
        bins = _numeric_bins(
            o_numbers, o_labels, o_codes, o_counts, r_side, source_rows, mapping, limit
        )
        if bins is not None:
            return {"kind": "histogram", "shared_bins": True, "bins": bins}
    out: dict = {"kind": "categories", "shared_bins": False}
    side = _top(o_labels, o_counts, rank, limit)
    out.update(original=side["pairs"], original_order=side["order"], original_other=side["other"])
    if r_side is None:
        out.update(released=[], released_order="natural", released_other=None)
        return out
    _, r_labels, r_counts = r_side
    side = _top(r_labels, r_counts, rank, limit)
    out.update(released=side["pairs"], released_order=side["order"], released_other=side["other"])
    return out


def _numeric_bins(
    o_numbers, o_labels, o_codes, o_counts, r_side, source_rows, mapping, limit
) -> list | None:
    """``[[label, original rows, released rows], ...]`` on shared bins, or None when the
    released values cannot be matched with the original ones."""
    valid = (o_counts > 0) & ~np.isnan(o_numbers)
    integral = bool(np.all(np.mod(o_numbers[valid], 1) == 0))
    o_missing = int(o_counts[(o_counts > 0) & np.isnan(o_numbers)].sum())
    r_numbers = None
    if r_side is not None:
        r_codes, r_labels, r_counts = r_side
        r_numbers = _as_numbers(r_labels, r_counts)
    if r_side is None or r_numbers is not None:
        # Numbers released as they are (or no release): equal bins, or a bar per value.
        distinct = np.unique(o_numbers[valid])
        if len(distinct) <= limit:
            # A bar per value, labelled as the data writes it ("2.50" stays "2.50").
            text: dict[float, str] = {}
            for label, number, count in zip(o_labels, o_numbers, o_counts, strict=True):
                if count and not np.isnan(number):
                    text.setdefault(float(number), label)
            lows, labels = distinct, [text[float(x)] for x in distinct]
        else:
            edges = _nice_edges(distinct[0], distinct[-1], integral)
            lows, labels = edges[:-1], _edge_labels(edges, integral)
        hist_o = _binned(o_numbers[valid], o_counts[valid], lows)
        hist_r = np.zeros(len(lows), dtype=np.int64)
        r_missing = 0
        if r_numbers is not None:
            r_valid = (r_counts > 0) & ~np.isnan(r_numbers)
            hist_r = _binned(r_numbers[r_valid], r_counts[r_valid], lows)
            r_missing = int(r_counts[(r_counts > 0) & np.isnan(r_numbers)].sum())
        bins = [[lb, int(o), int(r)] for lb, o, r in zip(labels, hist_o, hist_r, strict=True)]
        if o_missing or r_missing:
            bins.append(["", o_missing, r_missing])
        return bins
    released_rows = dict(zip(r_labels, r_counts.tolist(), strict=True))
    if mapping is not None:
        # Full-domain generalization: each original value's interval is the hierarchy's.
        target = [mapping.get(label, label) for label in o_labels]
        frame = pd.DataFrame({"label": target, "value": o_numbers, "rows": o_counts})
        frame = frame[frame["rows"] > 0]
        per_label = (
            frame.dropna()
            .groupby("label")
            .agg(min=("value", "min"), max=("value", "max"), rows=("rows", "sum"))
        )
        intervals = sorted(
            (float(row["min"]), float(row["max"]), str(label))
            for label, row in per_label.iterrows()
            if not _last(str(label))
        )
        original_rows = per_label["rows"].to_dict()
        hidden_original = int(sum(c for lb, c in original_rows.items() if _last(str(lb))))
        bins = [
            [lb, int(original_rows.get(lb, 0)), int(released_rows.get(lb, 0))]
            for *_, lb in intervals
        ]
    else:
        if source_rows is None or len(source_rows) != len(r_codes):
            return None
        # Local recoding: each released interval spans the original values of its rows,
        # ordered by the smallest of them (then the largest).
        frame = pd.DataFrame({"code": r_codes, "value": o_numbers[o_codes[source_rows]]})
        spans = frame.dropna().groupby("code")["value"].agg(["min", "max"])
        intervals = sorted(
            (float(row["min"]), float(row["max"]), r_labels[code])
            for code, row in spans.iterrows()
            if not _last(r_labels[code])
        )
        lows = np.asarray([low for low, _, _ in intervals])
        hist_o = _binned(o_numbers[valid], o_counts[valid], lows) if intervals else np.zeros(0)
        hidden_original = 0
        bins = [
            [label, int(o), int(released_rows.get(label, 0))]
            for (_, _, label), o in zip(intervals, hist_o, strict=True)
        ]
    if not intervals:
        return None
    bins = _merge(bins, limit)
    hidden = {label: int(c) for label, c in released_rows.items() if c and _last(label)}
    if o_missing or hidden.get(""):
        bins.append(["", o_missing, hidden.pop("", 0)])
    if hidden_original and TOP not in hidden:
        hidden[TOP] = 0
    for label, count in hidden.items():
        bins.append([label, hidden_original if label == TOP else 0, count])
    return bins


def class_value_choices(
    classes: pd.DataFrame, qis: Sequence[str], ranks: dict[str, dict[str, int] | None]
) -> dict[str, list[list]]:
    """Per quasi-identifier, its released values with how many classes and rows hold each
    (``[[value, classes, rows], ...]``), in natural order: the classes table's filter offers
    them. A column with more than :data:`MAX_FILTER_CHOICES` values gets none (its filter is
    typed)."""
    out: dict[str, list[list]] = {}
    sizes = classes["size"].to_numpy(dtype=np.int64)
    for name in qis:
        codes, labels = _codes(classes[name].astype(str))
        if len(labels) > MAX_FILTER_CHOICES:
            out[name] = []
            continue
        n_classes = np.bincount(codes, minlength=len(labels))
        n_rows = np.bincount(codes, weights=sizes, minlength=len(labels))
        by_label = {
            label: [label, int(c), int(r)]
            for label, c, r in zip(labels, n_classes, n_rows, strict=True)
        }
        out[name] = [by_label[label] for label in natural_order(by_label, ranks.get(name))]
    return out
