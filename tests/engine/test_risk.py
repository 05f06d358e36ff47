"""Prosecutor risk: figures checked by hand on small class-size lists."""

import json

import numpy as np
import pandas as pd
import pytest

from releases.engine.risk import AttackerRisk, class_sizes_of, risk_summary


def test_hand_computed_summary():
    # 20 records in classes of 1, 4, 5 and 10.
    r = risk_summary([1, 4, 5, 10])
    assert r.highest == pytest.approx(1.0)  # 1 / smallest class (1)
    assert r.average == pytest.approx(4 / 20)  # classes / records
    # risk 1/1 and 1/4 exceed 0.2; 1/5 = 0.2 does not (strictly greater, as ARX)
    assert r.records_at_risk == pytest.approx((1 + 4) / 20)
    assert r.sample_uniques == pytest.approx(1 / 20)
    assert r.threshold == 0.2


def test_threshold_is_strict_and_configurable():
    # every record has risk exactly 1/5
    assert risk_summary([5, 5], threshold=0.2).records_at_risk == 0.0
    assert risk_summary([5, 5], threshold=0.19).records_at_risk == pytest.approx(1.0)
    assert risk_summary([5, 5], threshold=0.5).threshold == 0.5


def test_k_anonymous_table_has_no_uniques_and_bounded_highest_risk():
    r = risk_summary(np.array([3, 7, 12]))
    assert r.highest == pytest.approx(1 / 3)
    assert r.sample_uniques == 0.0
    assert r.average == pytest.approx(3 / 22)


def test_all_unique_records():
    r = risk_summary([1] * 8)
    assert (r.highest, r.average, r.records_at_risk, r.sample_uniques) == (1.0, 1.0, 1.0, 1.0)


@pytest.mark.parametrize("empty", [[], np.array([], dtype=int), [0, 0]])
def test_empty_input_gives_zeros(empty):
    r = risk_summary(empty)
    assert (r.highest, r.average, r.records_at_risk, r.sample_uniques) == (0.0, 0.0, 0.0, 0.0)
    assert r.journalist == AttackerRisk(0.0, 0.0, 0.0) and r.marketer == 0.0


def test_as_dict_is_json_with_the_prosecutor_figures_on_top():
    d = risk_summary([2, 3]).as_dict()
    assert {"highest", "average", "records_at_risk", "sample_uniques", "threshold"} <= set(d)
    assert all(isinstance(d[k], float) for k in ("highest", "average", "records_at_risk"))
    assert d["prosecutor"] == {"highest": 0.5, "average": 2 / 5, "records_at_risk": 1.0}
    # Without a population model the released table is taken as the population (as ARX
    # does without a population table): journalist = prosecutor, marketer = classes / rows.
    assert d["journalist"] == d["prosecutor"]
    assert d["marketer"] == {"average": 2 / 5}
    assert d["population"] is None
    json.dumps(d)


def test_class_sizes_treat_missing_as_a_value():
    df = pd.DataFrame(
        {"a": ["x", "x", "", "", "", "y"], "b": ["1", "1", "1", "1", "", "1"]}, dtype=str
    )
    assert sorted(class_sizes_of(df, ["a", "b"]).tolist()) == [1, 1, 2, 2]
    assert sorted(class_sizes_of(df, ["a"]).tolist()) == [1, 2, 3]
    assert class_sizes_of(df, []).tolist() == [6]
    assert class_sizes_of(df.iloc[:0], ["a"]).tolist() == []


def test_summary_of_class_sizes_of_a_table():
    df = pd.DataFrame({"zip": ["1", "1", "1", "2", "3", "3"]})
    r = risk_summary(class_sizes_of(df, ["zip"]))
    assert r.highest == 1.0  # zip 2 is unique
    assert r.average == pytest.approx(3 / 6)
    assert r.sample_uniques == pytest.approx(1 / 6)
    # risks: 1/3 (3 rows), 1 (1 row), 1/2 (2 rows): all above 0.2
    assert r.records_at_risk == 1.0
