"""The classes of a release plan, numbered, and each row's class from its cells.

A row's class is its quasi-identifiers' class codes at the plan's levels (:func:`codes_of`);
:class:`Classes` numbers the classes a release holds and looks rows up, whether they come from
the column store batch by batch in process or from a Spark partition (this module imports no
Django, so Spark's executors can run it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .api import Chosen
from .cross_release import NOT_IN
from .streaming import ReleasePlan

__all__ = ["Classes", "codes_of", "released_classes"]


def codes_of(plan: ReleasePlan, name: str, values: pa.Array) -> np.ndarray:
    """Each value's class code at the plan's level (-1: a value the plan does not know)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    codes = np.asarray(plan.codes[name], dtype=np.int64)
    if pa.types.is_dictionary(values.type):
        # The dictionary is looked up (a few thousand values), then taken per row.
        at = codes_of(plan, name, values.dictionary)
        indices = values.indices.fill_null(len(at)).to_numpy(zero_copy_only=False)
        return np.asarray(np.append(at, -1)[indices], dtype=np.int64)
    if not pa.types.is_string(values.type):
        values = values.cast(pa.string())
    found = pc.index_in(values.fill_null(""), value_set=pa.array(plan.values[name], pa.string()))
    positions = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where(positions >= 0, codes[positions], -1)


@dataclass
class Classes:
    """The released classes of a plan, each numbered (its row in ``codes``), and a lookup from
    class codes (one per quasi-identifier) to that number."""

    plan: ReleasePlan
    codes: np.ndarray  # (classes, quasi-identifiers): each kept class's codes
    _keys: np.ndarray | None = field(init=False, default=None)
    _sorted: np.ndarray | None = field(init=False, default=None)
    _index: pd.MultiIndex | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        cards = [max(self.plan.cardinalities[q], 1) for q in self.plan.quasi_identifiers]
        if math.prod(cards) < 1 << 62:
            keys = self._key([self.codes[:, i] for i in range(self.codes.shape[1])])
            self._sorted = np.argsort(keys, kind="stable")
            self._keys = keys[self._sorted]
        else:  # no integer holds a class: look the codes up as tuples
            self._index = pd.MultiIndex.from_arrays(
                [self.codes[:, i] for i in range(self.codes.shape[1])]
            )

    def _key(self, codes: list[np.ndarray]) -> np.ndarray:
        key = np.zeros(len(codes[0]) if codes else 0, dtype=np.int64)
        for q, column in zip(self.plan.quasi_identifiers, codes, strict=True):
            key = key * max(self.plan.cardinalities[q], 1) + column
        return key

    def of(self, codes: list[np.ndarray]) -> np.ndarray:
        """Each row's class number (given its codes per quasi-identifier), :data:`NOT_IN`
        for a row of a suppressed class."""
        rows = len(codes[0]) if codes else 0
        if not len(self.codes):
            return np.full(rows, NOT_IN, dtype=np.int64)
        if self._index is not None:
            found = self._index.get_indexer(pd.MultiIndex.from_arrays(codes))
            return np.where(found >= 0, found, NOT_IN).astype(np.int64)
        assert self._keys is not None and self._sorted is not None
        key = self._key(codes)
        at = np.clip(np.searchsorted(self._keys, key), 0, len(self._keys) - 1)
        hit = self._keys[at] == key
        known = np.all([c >= 0 for c in codes], axis=0) if codes else np.ones(rows, bool)
        return np.where(hit & known, self._sorted[at], NOT_IN).astype(np.int64)


def released_classes(plan: ReleasePlan, chosen: Chosen) -> Classes:
    """The classes a release holds (neither suppressed nor empty)."""
    table = chosen.table
    kept = ~chosen.fails & (table.counts > 0)
    return Classes(plan, np.asarray(table.codes[kept], dtype=np.int64))
