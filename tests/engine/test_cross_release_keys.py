"""Memberships of another version carried onto a new version's rows by a key column."""

from __future__ import annotations

import numpy as np
import pytest

from releases.engine import EngineError
from releases.engine.cross_release import NOT_IN, align_by_key


def test_rows_are_linked_by_their_key_not_their_position():
    earlier = np.array([0, 1, NOT_IN, 1])  # classes of rows a, b, c, d
    aligned = align_by_key(earlier, ["a", "b", "c", "d"], ["d", "x", "a", "c"])
    # d is in class 1, x was not in the earlier version, a in class 0, c was suppressed.
    assert aligned.tolist() == [1, NOT_IN, 0, NOT_IN]


def test_a_key_repeated_in_either_version_is_refused():
    with pytest.raises(EngineError, match="repeat in the earlier version"):
        align_by_key(np.array([0, 0]), ["a", "a"], ["a"])
    with pytest.raises(EngineError, match="repeat in the new version"):
        align_by_key(np.array([0]), ["a"], ["a", "a"])


def test_the_membership_must_describe_the_earlier_version():
    with pytest.raises(EngineError, match="describes 1 rows"):
        align_by_key(np.array([0]), ["a", "b"], ["a"])
