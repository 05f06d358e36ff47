"""Float sums over rows, classes or values: the same bits whatever numpy's own blocking."""

from __future__ import annotations

import math

import numpy as np
import pytest

from releases.engine.summation import BLOCK, block_mean, block_sum, block_sum_rows


@pytest.mark.parametrize("n", [1, 7, BLOCK - 1, BLOCK])
def test_up_to_a_block_the_sum_is_numpys(n):
    x = np.random.default_rng(n).random(n) - 0.3
    assert block_sum(x) == float(np.add.reduce(x))


@pytest.mark.parametrize("n", [BLOCK + 1, 3 * BLOCK, 30_162, 1_000_003])
def test_longer_arrays_add_their_blocks_in_order(n):
    x = np.random.default_rng(n).random(n) * 1e3 - 300
    total = float(np.add.reduce(x[:BLOCK]))
    for start in range(BLOCK, n, BLOCK):
        total += float(np.add.reduce(x[start : start + BLOCK]))
    assert block_sum(x) == total
    assert block_mean(x) == total / n
    assert block_sum(x) == pytest.approx(math.fsum(x.tolist()), rel=1e-12)
    # A strided view is added as its values are, not as the memory under it.
    assert block_sum(x[::3]) == block_sum(x[::3].copy())


def test_each_row_is_added_as_one_array():
    a = np.random.default_rng(5).random((4, 2 * BLOCK + 17))
    assert block_sum_rows(a).tolist() == [block_sum(row) for row in a]
    small = a[:, :100]
    assert block_sum_rows(small).tolist() == np.add.reduce(small, axis=1).tolist()
