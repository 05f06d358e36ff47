"""α-distinction and α-separation of quasi-identifier combinations, against a pandas group-by
and the pair counts written out here (ARX's definitions, RiskModelAttributes)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from releases.engine.attribute_risk import EXHAUSTIVE_COLUMNS, attribute_risks
from tests.conftest import ADULT

COLUMNS = ["age", "education", "marital-status", "race", "sex", "salary-class"]


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    return pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)


def by_pandas(frame: pd.DataFrame, columns: list[str]) -> tuple[float, float, int]:
    sizes = frame.groupby(columns).size()
    n = len(frame)
    same_pairs = sum(math.comb(int(s), 2) for s in sizes)
    return len(sizes) / n, 1 - same_pairs / math.comb(n, 2), int((sizes == 1).sum())


def test_every_combination_matches_a_group_by(adult):
    risks = attribute_risks(adult, COLUMNS)
    assert len(risks) == 2 ** len(COLUMNS) - 1
    for r in risks:
        distinction, separation, unique = by_pandas(adult, list(r.columns))
        assert r.distinction == pytest.approx(distinction, rel=1e-12)
        assert r.separation == pytest.approx(separation, rel=1e-12)
        assert r.unique_rows == unique
    # ARX's order: fewer columns first, then lower distinction.
    keys = [(len(r.columns), r.distinction) for r in risks]
    assert keys == sorted(keys)
    # Adding a column never tells fewer rows apart.
    found = {frozenset(r.columns): r for r in risks}
    for r in risks:
        for extra in set(COLUMNS) - set(r.columns):
            wider = found[frozenset(r.columns) | {extra}]
            assert wider.distinction >= r.distinction and wider.unique_rows >= r.unique_rows


def test_past_the_exhaustive_limit_only_small_combinations_and_the_whole_set():
    rng = np.random.default_rng(4)
    d = EXHAUSTIVE_COLUMNS + 2
    frame = pd.DataFrame({f"c{i}": rng.integers(0, 3, 400).astype(str) for i in range(d)})
    risks = attribute_risks(frame, list(frame.columns))
    sizes = sorted({len(r.columns) for r in risks})
    assert sizes == [1, 2, 3, d]
    assert len(risks) == sum(math.comb(d, s) for s in (1, 2, 3)) + 1


def test_a_work_bound_measures_fewer_columns_at_a_time(adult):
    bounded = attribute_risks(adult, COLUMNS, max_work=200_000)
    assert max(len(r.columns) for r in bounded) == len(COLUMNS)  # the whole set, always
    largest = max(len(r.columns) for r in bounded if len(r.columns) < len(COLUMNS))
    assert 1 <= largest < len(COLUMNS) - 1
    expected = sum(math.comb(len(COLUMNS), s) for s in range(1, largest + 1)) + 1
    assert len(bounded) == expected
    for r in bounded:
        assert r.unique_rows == by_pandas(adult, list(r.columns))[2]


def test_one_row_and_no_columns():
    assert attribute_risks(pd.DataFrame({"a": ["x"]}), []) == []
    (only,) = attribute_risks(pd.DataFrame({"a": ["x"]}), ["a"])
    assert (only.distinction, only.separation, only.unique_rows) == (1.0, 0.0, 1)
    assert list(itertools.chain(only.columns)) == ["a"]
