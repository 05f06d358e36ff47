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

from .arrays import IntArray

__all__ = ["AttributeRisk", "attribute_risks", "EXHAUSTIVE_COLUMNS"]

#: Up to this many columns every combination is measured (2^10 - 1 = 1,023 of them).
EXHAUSTIVE_COLUMNS = 10
#: Past it, combinations of at most this many columns (and the whole set).
LARGEST_PARTIAL = 3


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


def _codes(values: pd.Series) -> IntArray:
    if isinstance(values.dtype, pd.CategoricalDtype):
        return np.asarray(values.cat.codes, dtype=np.int64)
    codes, _ = pd.factorize(values, use_na_sentinel=False)
    return np.asarray(codes, dtype=np.int64)


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


def _class_sizes(table: IntArray, counts: IntArray, positions: tuple[int, ...]) -> IntArray:
    """Class sizes on ``positions`` of the distinct-row table weighted by ``counts``."""
    key = np.zeros(len(table), dtype=np.int64)
    for p in positions:
        column = table[:, p]
        cardinality = int(column.max()) + 1 if len(column) else 1
        # Re-number before the key could overflow int64.
        if int(key.max(initial=0)) + 1 > np.iinfo(np.int64).max // max(cardinality, 1):
            _, key = np.unique(key, return_inverse=True)
        key = key * cardinality + column
    _, inverse = np.unique(key, return_inverse=True)
    return np.bincount(inverse.ravel(), weights=counts).astype(np.int64)


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
    codes = np.stack([_codes(frame[c]) for c in names], axis=1)
    if weights is None:
        table, counts = np.unique(codes, axis=0, return_counts=True)
    else:
        table, inverse = np.unique(codes, axis=0, return_inverse=True)
        counts = np.bincount(inverse.ravel(), weights=weights).astype(np.int64)
    chosen = combinations(names)
    if max_work is not None:
        largest = max(len(c) for c in chosen)
        while largest > 1 and len(table) * len(chosen) > max_work:
            largest -= 1
            chosen = combinations(names, largest)
    pairs = n * (n - 1) / 2
    out = []
    for positions in chosen:
        sizes = _class_sizes(table, counts.astype(np.int64), positions)
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
