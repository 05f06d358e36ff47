"""Float sums with the same bits whatever the numpy version.

numpy before 2.3 added a long float array 8192 values at a time (its iterator's buffer):
pairwise inside each block, then the blocks one after the other. numpy 2.3 adds a contiguous
array pairwise as a whole, which changes the last bits of sums over more than 8192 values.
The engine's figures (metrics, risks, distances) are stored with each release and compared
between runs, so its sums over rows, classes or values (whose number grows with the data) go
through here: blocks of 8192 summed by numpy, which gives the same bits in every version,
then added in order.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .arrays import FloatArray

BLOCK = 8192


def block_sum(values: ArrayLike) -> float:
    """The sum of a 1-D float array, added as numpy did before 2.3."""
    a: FloatArray = np.asarray(values, dtype=np.float64).ravel()
    if a.size <= BLOCK:
        return float(np.add.reduce(a))
    whole = a.size - a.size % BLOCK
    parts: list[float] = np.add.reduce(a[:whole].reshape(-1, BLOCK), axis=1).tolist()
    if whole < a.size:
        parts.append(float(np.add.reduce(a[whole:])))
    total = parts[0]
    for part in parts[1:]:
        total += part
    return total


def block_mean(values: ArrayLike) -> float:
    """The mean of a non-empty 1-D float array (:func:`block_sum` over its length)."""
    return block_sum(values) / np.size(values)


def block_sum_rows(values: ArrayLike) -> FloatArray:
    """The sum of each row of a 2-D float array, added as numpy did before 2.3."""
    a: FloatArray = np.asarray(values, dtype=np.float64)
    total: FloatArray = np.add.reduce(a[:, :BLOCK], axis=1)
    for start in range(BLOCK, a.shape[1], BLOCK):
        total = total + np.add.reduce(a[:, start : start + BLOCK], axis=1)
    return total
