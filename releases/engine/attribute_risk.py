"""Which combinations of quasi-identifiers single people out: α-distinction and α-separation
(Motwani and Xu, 2007), as ARX 3.9's ``RiskModelAttributes`` computes them.

For a combination of columns, over the n rows:

- *distinction*: the number of distinct value combinations divided by n (1: every row is
  told apart);
- *separation*: the share of the n(n-1)/2 pairs of rows that differ on at least one of the
  columns, ``1 - sum_c s_c(s_c - 1)/2 / (n(n-1)/2)`` for classes of sizes ``s_c``;
- *unique rows*: rows alone in their class on these columns.

ARX measures every non-empty combination (the power set). That grows as 2^d: past
``EXHAUSTIVE_COLUMNS`` columns only the single columns, the pairs, the triples and the whole set
are measured. The rows are first reduced to the distinct combinations of all the columns with
their counts, so that each combination costs the number of distinct rows, not of rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .arrays import IntArray, SmallIntArray

__all__ = ["AttributeRisk", "attribute_risks", "EXHAUSTIVE_COLUMNS"]

#: Up to this many columns every combination is measured (2^10 - 1 = 1,023 of them).
EXHAUSTIVE_COLUMNS = 10
#: Past it, combinations of at most this many columns (and the whole set).
LARGEST_PARTIAL = 3
_LARGEST_KEY = int(np.iinfo(np.int64).max)


@dataclass(frozen=True)
class AttributeRisk:
    columns: tuple[str, ...]
    distinction: float
    separation: float
    unique_rows: int

    def as_dict(self) -> dict[str, object]:
        return {
            "columns": list(self.columns),
            "distinction": self.distinction,
            "separation": self.separation,
            "unique_rows": self.unique_rows,
        }


def _codes(values: pd.Series) -> SmallIntArray:
    """A column's codes from 0 (a missing value has a code of its own) in the narrowest integer
    type that holds them: a table of millions of distinct rows costs a byte or two per cell."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes = np.asarray(values.cat.codes)
        if codes.size and int(codes.min()) < 0:  # a missing value's code is -1: it becomes 0
            codes = codes.astype(np.int64) + 1
    else:
        codes, _ = pd.factorize(values, use_na_sentinel=False)
    return codes.astype(np.min_scalar_type(int(codes.max()) if codes.size else 0), copy=False)


def _key(columns: Sequence[SmallIntArray]) -> IntArray:
    """One int64 per row, equal for two rows exactly when their codes in ``columns`` are: the
    codes in mixed radix (each column's radix its largest code plus one). Before the key could
    overflow int64 it is re-numbered densely (by hashing), so that any number of columns fits."""
    key = np.zeros(len(columns[0]) if columns else 0, dtype=np.int64)
    space = 1  # every key is below this
    for column in columns:
        radix = int(column.max()) + 1 if len(column) else 1
        if space > _LARGEST_KEY // radix:
            key, uniques = pd.factorize(key, sort=False)
            key = np.asarray(key, dtype=np.int64)
            space = max(len(uniques), 1)
        key *= radix
        key += column
        space *= radix
    return key


def _distinct(key: IntArray) -> tuple[IntArray, IntArray]:
    """Each row's class among the distinct keys, and one row of each class."""
    row_class, uniques = pd.factorize(key, sort=False)
    row_class = np.asarray(row_class, dtype=np.int64)
    one = np.empty(len(uniques), dtype=np.int64)
    one[row_class] = np.arange(len(key), dtype=np.int64)  # any of the class's rows will do
    return row_class, one


def combinations(columns: Sequence[str], largest: int | None = None) -> list[tuple[int, ...]]:
    """The combinations measured, as column positions: all of them up to
    ``EXHAUSTIVE_COLUMNS`` columns, else those of at most ``LARGEST_PARTIAL`` and the whole set
    (``largest``: at most that many columns, and the whole set)."""
    d = len(columns)
    if largest is None:
        largest = d if d <= EXHAUSTIVE_COLUMNS else LARGEST_PARTIAL
    largest = min(largest, d)
    out = [c for size in range(1, largest + 1) for c in itertools.combinations(range(d), size)]
    if largest < d:
        out.append(tuple(range(d)))
    return out


def _class_sizes(
    columns: Sequence[SmallIntArray], counts: IntArray, positions: tuple[int, ...]
) -> IntArray:
    """Class sizes on ``positions`` of the distinct-row table (one code array per column)
    weighted by ``counts``, in no particular order. Memory: a few integers per distinct row."""
    classes, _ = pd.factorize(_key([columns[p] for p in positions]), sort=False)
    return np.bincount(classes, weights=counts).astype(np.int64)


def attribute_risks(
    frame: pd.DataFrame,
    columns: Sequence[str],
    max_work: int | None = None,
    rows: IntArray | None = None,
) -> list[AttributeRisk]:
    """α-distinction, α-separation and unique rows of each combination of ``columns`` (see
    :func:`combinations`), in ARX's order: fewer columns first, then lower distinction, lower
    separation, and the names. ``max_work`` bounds the distinct rows times the combinations
    (a page's budget): fewer columns per combination are measured when it would be exceeded,
    singles and the whole set at least. ``rows``: the rows each row of ``frame`` stands for
    (a frequency table's counts; default one each)."""
    names = list(columns)
    weights = None if rows is None else np.asarray(rows, dtype=np.int64)
    n = len(frame) if weights is None else int(weights.sum())
    if not names or n == 0:
        return []
    # The distinct rows on all the columns (a frequency table's rows are already), each
    # column's codes apart and narrow, with their counts: a 1-D key per row, never a 2-D sort.
    codes = [_codes(frame[c]) for c in names]
    row_class, one = _distinct(_key(codes))
    table = [column[one] for column in codes]
    del codes
    counts = np.bincount(row_class, weights=weights, minlength=len(one)).astype(np.int64)
    del row_class
    chosen = combinations(names)
    if max_work is not None:
        largest = max(len(c) for c in chosen)
        while largest > 1 and len(one) * len(chosen) > max_work:
            largest -= 1
            chosen = combinations(names, largest)
    pairs = n * (n - 1) / 2
    out = []
    for positions in chosen:
        sizes = _class_sizes(table, counts, positions)
        same = float((sizes * (sizes - 1) // 2).sum())
        out.append(
            AttributeRisk(
                columns=tuple(names[p] for p in positions),
                distinction=len(sizes) / n,
                # ARX: NaN (a single row) shows as 0.
                separation=(pairs - same) / pairs if pairs else 0.0,
                unique_rows=int((sizes == 1).sum()),
            )
        )
    out.sort(key=lambda r: (len(r.columns), r.distinction, r.separation, str(list(r.columns))))
    return out
