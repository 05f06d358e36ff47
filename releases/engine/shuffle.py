"""The released rows' order: random, from a recorded seed.

An extract written in the input's order (by date, ID or place) can be lined up row by row with
another extract of the same rows, or with the input itself (Sweeney's unsorted-matching
attack). Every extract is therefore written in a random order drawn from a seed; the seed is
recorded with the run (never given to a recipient: it undoes the order), so that the same
input, configuration and seed write the same bytes.

Two schemes give that order:

* :data:`KEYED` (the default for new releases): each released row's place is its *order key*,
  a keyed hash of (seed, the row's 0-based input row index) (:func:`order_keys`); the rows are
  written by ascending key. A row's key depends on nothing but its own index, so the order can
  be computed batch by batch, on several machines, and written in bounded memory
  (:mod:`.streaming`).
* :data:`PERMUTATION` (releases made before): numpy's permutation of the released rows drawn
  from the seed (:func:`permutation`). Kept so that those releases reproduce byte for byte.
"""

from __future__ import annotations

import secrets

import numpy as np
from numpy.typing import NDArray

from .arrays import IntArray

__all__ = ["KEYED", "PERMUTATION", "SCHEMES", "new_seed", "order", "order_keys", "permutation"]

#: The keyed hash order (:func:`order_keys`): the default for new releases.
KEYED = "keyed-hash"
#: numpy's permutation of the released rows (releases made before the keyed hash).
PERMUTATION = "permutation"
SCHEMES = (KEYED, PERMUTATION)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def new_seed() -> int:
    """A fresh seed (62 bits: fits a signed 64-bit database column)."""
    return secrets.randbits(62)


def _check_seed(seed: int) -> None:
    if seed < 0:
        raise ValueError(f"a shuffle seed is a non-negative integer, not {seed}")


def permutation(rows: int, seed: int) -> IntArray:
    """The order to write ``rows`` released rows in: row ``permutation[i]`` of the extract
    goes ``i``-th. The same for the same seed."""
    _check_seed(seed)
    return np.random.default_rng(seed).permutation(rows).astype(np.int64)


def _splitmix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finaliser: a bijection of 64-bit integers that mixes every bit."""
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        return z ^ (z >> np.uint64(31))


def order_keys(seed: int, row_index: NDArray[np.integer]) -> NDArray[np.uint64]:
    """Each row's order key: SplitMix64 of (SplitMix64 of the seed) XOR the row's input index.

    For one seed, distinct row indexes get distinct keys (both steps are bijections), so
    sorting by key orders the rows without ties; another seed gives an unrelated order."""
    _check_seed(seed)
    key = _splitmix64(np.array([seed], dtype=np.uint64))[0]
    return _splitmix64(np.asarray(row_index).astype(np.uint64, copy=False) ^ key)


def order(indexes: NDArray[np.integer], seed: int, scheme: str = KEYED) -> IntArray:
    """The order to write released rows in: ``indexes`` holds each released row's input row
    index (in the extract's unshuffled order); row ``order[i]`` of the extract goes ``i``-th.
    ``scheme``: :data:`KEYED` (by :func:`order_keys`) or :data:`PERMUTATION` (as releases
    before the keyed hash were written)."""
    if scheme == PERMUTATION:
        return permutation(len(indexes), seed)
    if scheme != KEYED:
        raise ValueError(f"unknown row order scheme {scheme!r}; use {' or '.join(SCHEMES)}")
    return np.argsort(order_keys(seed, indexes), kind="stable").astype(np.int64)
