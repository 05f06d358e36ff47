"""A linkage attack on an extract: identified external records (a voter list, a population
register) linked to the released rows on every column the two share.

A released value matches an attacker's value when:

* the column was generalized (a quasi-identifier): the attacker's original value generalizes
  to the released label through the hierarchy (at the released level when it is known, at any
  level for local recoding), or lies in the released interval (``35-39``, ``[35-39]``,
  ``[0.5, 1[``); a suppressed value (``*``) matches anything;
* the column was released unchanged: the two are equal.

Each attacker record is matched by some number of released records: none (not found), exactly
one (re-identified), fewer than k (singled out among few). The matching runs on the distinct
attacker combinations against the distinct released combinations, never row by row: each
column turns an attacker value into the released labels it matches, and the candidate
combinations are expanded column by column, keeping only prefixes that some released
combination has.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .arrays import IntArray
from .constants import SUPPRESSED_VALUE
from .errors import EngineError
from .hierarchy import Hierarchy

__all__ = ["ColumnRule", "LinkageResult", "link"]

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
# "35-39" (inclusive, the interval builder's and ARX's), "[35-39]" (Mondrian's),
# "[0.5, 1[" (half-open, the interval builder's for fractions).
_INCLUSIVE = re.compile(rf"^\[?\s*({_NUMBER})\s*-\s*({_NUMBER})\s*\]?$")
_HALF_OPEN = re.compile(rf"^\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\[$")


@dataclass(frozen=True)
class ColumnRule:
    """How one generalized column of the extract is matched: through ``hierarchy`` at the
    released ``level`` (None: any level, for local recoding). Columns without a rule are
    matched by equality."""

    hierarchy: Hierarchy | None = None
    level: int | None = None


@dataclass(frozen=True)
class LinkageResult:
    """The attacker's records matched against the extract.

    ``matched_below_k`` counts the records matched by at least one and fewer than ``k``
    released records (those matched by exactly one, ``matched_one``, among them);
    ``expected_reidentifications`` is the sum of 1/matches over the matched records (an
    attacker who picks one of the matching released records at random re-identifies that
    many people, on average)."""

    attacker_records: int
    extract_records: int
    matched_columns: list[str]
    matched_none: int
    matched_one: int
    matched_below_k: int
    expected_reidentifications: float
    k: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "attacker_records": self.attacker_records,
            "extract_records": self.extract_records,
            "matched_columns": list(self.matched_columns),
            "matched_none": self.matched_none,
            "matched_one": self.matched_one,
            "matched_below_k": self.matched_below_k,
            "expected_reidentifications": self.expected_reidentifications,
            "k": self.k,
        }


def _text(column: pd.Series) -> pd.Series:
    """Cells as strings, a missing cell as "" (the engine's missing value)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = column.cat.categories
        if pd.api.types.infer_dtype(categories, skipna=False) == "string":
            if column.isna().any():
                if "" not in categories:
                    column = column.cat.add_categories([""])
                column = column.fillna("")
            return column
        return column.astype(object).where(column.notna(), "").astype(str)
    return column.where(column.notna(), "").astype(str)


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and text.strip() != "" else None


def _interval(label: str) -> tuple[float, float, bool] | None:
    """(low, high, high included) of an interval label, or None."""
    match = _INCLUSIVE.match(label)
    if match:
        low, high = float(match.group(1)), float(match.group(2))
        return (low, high, True) if low <= high else None
    match = _HALF_OPEN.match(label)
    if match:
        low, high = float(match.group(1)), float(match.group(2))
        return (low, high, False) if low < high else None
    return None


def _column_pairs(
    values: Sequence[str], labels: Sequence[str], rule: ColumnRule | None
) -> tuple[IntArray, IntArray]:
    """Every (attacker value code, released label code) that match, sorted by value code."""
    lookup = {label: j for j, label in enumerate(labels)}
    left: list[int] = []
    right: list[int] = []
    if rule is None:  # released unchanged: equal values only
        for i, value in enumerate(values):
            j = lookup.get(value)
            if j is not None:
                left.append(i)
                right.append(j)
        return np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    star = lookup.get(SUPPRESSED_VALUE)
    intervals = [(j, _interval(label)) for j, label in enumerate(labels)]
    ranges = [(j, iv) for j, iv in intervals if iv is not None]
    hierarchy = rule.hierarchy
    index = hierarchy.index if hierarchy is not None else {}
    for i, value in enumerate(values):
        found: set[int] = set()
        row = hierarchy.rows[index[value]] if hierarchy is not None and value in index else None
        if row is not None and rule.level is not None:
            j = lookup.get(row[min(rule.level, len(row) - 1)])
            if j is not None:
                found.add(j)
        elif row is not None:
            found.update(lookup[lab] for lab in row if lab in lookup)
        else:
            j = lookup.get(value)
            if j is not None:
                found.add(j)
        x = _number(value)
        if x is not None and (row is None or rule.level is None):
            for j, (low, high, closed) in ranges:
                if low <= x and (x <= high if closed else x < high):
                    found.add(j)
        if star is not None:
            found.add(star)
        left.extend([i] * len(found))
        right.extend(sorted(found))
    return np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)


def _codes(column: pd.Series) -> tuple[IntArray, list[str]]:
    codes, uniques = pd.factorize(_text(column), sort=False, use_na_sentinel=False)
    return codes.astype(np.int64), [str(u) for u in uniques]


def _distinct(columns: list[IntArray], cards: list[int]) -> tuple[IntArray, IntArray]:
    """The distinct rows of code columns (a matrix, a row per combination) and how many times
    each occurs: one integer key per row (mixed radix, compacted before it could overflow)."""
    n = len(columns[0])
    key = np.zeros(n, dtype=np.int64)
    space = 1
    for column, card in zip(columns, cards, strict=True):
        if space * card >= 1 << 62:
            _, key = np.unique(key, return_inverse=True)
            key = key.astype(np.int64).reshape(-1)
            space = int(key.max()) + 1
        key = key * card + column
        space *= card
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    combos = np.stack(columns, axis=1)[first]
    return combos.astype(np.int64), counts.astype(np.int64)


def _expand(starts: IntArray, lengths: IntArray) -> IntArray:
    """The concatenation of ``range(starts[i], starts[i] + lengths[i])`` for every i."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    shifted = np.repeat(starts - offsets, lengths)
    return np.asarray(shifted + np.arange(total), dtype=np.int64)


def link(
    attacker: pd.DataFrame,
    extract: pd.DataFrame,
    k: int,
    rules: Mapping[str, ColumnRule],
) -> LinkageResult:
    """Link every record of ``attacker`` to the records of ``extract`` on the columns both
    have (by name). ``rules``: the extract's generalized columns and how to match them (see
    :class:`ColumnRule`); other shared columns match by equality."""
    shared = [c for c in extract.columns if c in set(attacker.columns)]
    if not shared:
        raise EngineError("The attacker file shares no column with the extract.")
    if k < 1:
        raise EngineError(f"k must be at least 1, not {k}.")
    n_attacker = len(attacker)
    attacker_codes: list[IntArray] = []
    extract_codes: list[IntArray] = []
    pairs: list[tuple[IntArray, IntArray]] = []
    cards: list[int] = []
    for name in shared:
        a_codes, values = _codes(attacker[name])
        e_codes, labels = _codes(extract[name])
        attacker_codes.append(a_codes)
        extract_codes.append(e_codes)
        pairs.append(_column_pairs(values, labels, rules.get(name)))
        cards.append(max(len(labels), 1))
    matches = np.zeros(0, dtype=np.int64)
    weights = np.zeros(0, dtype=np.int64)
    if n_attacker and len(extract):
        attacker_cards = [int(c.max()) + 1 for c in attacker_codes]
        combos, weights = _distinct(attacker_codes, attacker_cards)
        released, released_count = _distinct(extract_codes, cards)
        matches = _count_matches(combos, released, released_count, pairs, cards)
    matched = matches > 0
    return LinkageResult(
        attacker_records=n_attacker,
        extract_records=len(extract),
        matched_columns=shared,
        matched_none=n_attacker - int(weights[matched].sum()),
        matched_one=int(weights[matches == 1].sum()),
        matched_below_k=int(weights[matched & (matches < k)].sum()),
        expected_reidentifications=float((weights[matched] / matches[matched]).sum()),
        k=int(k),
    )


def _count_matches(
    combos: IntArray,
    released: IntArray,
    released_count: IntArray,
    pairs: list[tuple[IntArray, IntArray]],
    cards: list[int],
) -> IntArray:
    """Per attacker combination, the released records matching it on every column."""
    n_combos = len(combos)
    candidate = np.arange(n_combos, dtype=np.int64)  # the attacker combination
    prefix = np.zeros(n_combos, dtype=np.int64)  # rank of the released labels so far
    released_prefix = np.zeros(len(released), dtype=np.int64)
    for j, ((left, right), card) in enumerate(zip(pairs, cards, strict=True)):
        # The labels each attacker value matches, as runs of ``right`` (``left`` is sorted).
        n_values = int(combos[:, j].max()) + 1 if n_combos else 0
        per_value = np.bincount(left, minlength=n_values).astype(np.int64)
        first = np.cumsum(per_value) - per_value
        value = combos[candidate, j]
        take = _expand(first[value], per_value[value])
        reps = per_value[value]
        candidate = np.repeat(candidate, reps)
        key = np.repeat(prefix, reps) * card + right[take]
        # Keep the candidates some released combination starts with; number prefixes densely
        # so that the key never overflows.
        released_key = released_prefix * card + released[:, j]
        known, released_prefix = np.unique(released_key, return_inverse=True)
        position = np.searchsorted(known, key)
        position = np.minimum(position, max(len(known) - 1, 0))
        keep = (known[position] == key) if len(known) else np.zeros(len(key), dtype=bool)
        candidate, prefix = candidate[keep], position[keep].astype(np.int64)
        released_prefix = released_prefix.astype(np.int64).reshape(-1)
    per_prefix = np.bincount(released_prefix, weights=released_count, minlength=1)
    return np.rint(np.bincount(candidate, weights=per_prefix[prefix], minlength=n_combos)).astype(
        np.int64
    )
