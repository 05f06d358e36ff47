"""The released rows' order: random, from a recorded seed.

An extract written in the input's order (by date, ID or place) can be lined up row by row with
another extract of the same rows, or with the input itself (Sweeney's unsorted-matching
attack). Every extract is therefore written in a random order drawn from a seed; the seed is
recorded with the run (never given to a recipient: it undoes the order), so that the same
input, configuration and seed write the same bytes.
"""

from __future__ import annotations

import secrets

import numpy as np

from .arrays import IntArray

__all__ = ["new_seed", "permutation"]


def new_seed() -> int:
    """A fresh seed (62 bits: fits a signed 64-bit database column)."""
    return secrets.randbits(62)


def permutation(rows: int, seed: int) -> IntArray:
    """The order to write ``rows`` released rows in: row ``permutation[i]`` of the extract
    goes ``i``-th. The same for the same seed."""
    if seed < 0:
        raise ValueError(f"a shuffle seed is a non-negative integer, not {seed}")
    return np.random.default_rng(seed).permutation(rows).astype(np.int64)
