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


def wide_table_with_missing_values() -> tuple[pd.DataFrame, list[str]]:
    """10 columns (every combination measured), 4 of a few values with missing cells and 6 of
    thousands of values, interleaved; rows repeated so that classes of several rows remain on
    every combination. The whole set's codes in mixed radix need more than 63 bits."""
    rng = np.random.default_rng(23)
    base = 1_500
    columns: dict[str, object] = {}
    for i in range(10):
        if i % 2 == 0 and i < 8:
            values = rng.choice(np.array(["a", "b", "c", None], dtype=object), base)
            values[rng.random(base) < 0.1] = np.nan  # both kinds of missing cell
        else:
            values = rng.integers(0, 5_000, base).astype(str).astype(object)
        columns[f"c{i}"] = values
    distinct = pd.DataFrame(columns)
    frame = distinct.iloc[rng.integers(0, base, 4_000)].reset_index(drop=True)
    return frame, list(frame.columns)


def by_pandas_with_missing(frame: pd.DataFrame, columns: list[str]) -> tuple[int, int, int]:
    """Classes, pairs of rows in the same class, and unique rows, a missing cell a value."""
    sizes = frame.groupby(columns, dropna=False).size().to_numpy()
    return len(sizes), sum(math.comb(int(s), 2) for s in sizes), int((sizes == 1).sum())


def test_many_columns_and_missing_values_match_a_group_by_whatever_the_key_width():
    frame, columns = wide_table_with_missing_values()
    width = math.prod(frame[c].nunique(dropna=False) for c in columns)
    assert width > 2**63  # the whole set's mixed radix key does not fit in int64
    # The same rows three ways: as read, as categoricals (a missing cell's code is -1), and as
    # a frequency table (the distinct rows with their counts, as the risk panel passes them).
    categorical = frame.astype("category")
    counted = frame.groupby(columns, dropna=False, sort=False).size().rename("rows").reset_index()
    assert len(counted) < len(frame)
    results = [
        attribute_risks(frame, columns),
        attribute_risks(categorical, columns),
        attribute_risks(counted[columns], columns, rows=counted["rows"].to_numpy()),
    ]
    n = len(frame)
    pairs = math.comb(n, 2)
    assert len(results[0]) == 2 ** len(columns) - 1
    for r in results[0]:
        classes, same, unique = by_pandas_with_missing(frame, list(r.columns))
        assert r.distinction == pytest.approx(classes / n, rel=1e-12)
        assert r.separation == pytest.approx((pairs - same) / pairs, rel=1e-12)
        assert r.unique_rows == unique
    assert results[1] == results[0] and results[2] == results[0]
    whole = next(r for r in results[0] if len(r.columns) == len(columns))
    assert 0 < whole.unique_rows < n  # repeated rows form classes of several on the whole set
