"""Every privacy claim of a release, checked on the output independently.

Two independent checkers: pycanon (in its own venv, on the extract written to CSV, see
``tests/support/pycanon.py``) and plain pandas groupby counts, each claim by both. pycanon's t-closeness measures against the distribution of the table it is given (the
extract), so it is used where nothing is suppressed; with suppression we measure against
the input's distribution ourselves. pycanon's entropy l is ``int(min exp(H))``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, PrivacyModel, anonymize
from releases.engine.criteria import Classes, DataContext
from releases.engine.privacy import (
    SensitiveCounts,
    TContext,
    distinct_l,
    entropy_l,
    recursive_cl,
    recursive_l_value,
    t_distance,
)
from tests.support import pycanon

QIS = ["age", "zip", "sex", "marital"]


def equal_t(data: pd.DataFrame, column: str) -> float:
    """Largest equal-distance EMD between a class's distribution and the whole table's."""
    overall = data[column].value_counts(normalize=True)
    worst = 0.0
    for _, rows in data.groupby(QIS):
        p = rows[column].value_counts(normalize=True).reindex(overall.index, fill_value=0)
        worst = max(worst, 0.5 * (p - overall).abs().sum())
    return worst


def ordered_t(data: pd.DataFrame, column: str) -> float:
    """Largest ordered-distance EMD (values in numeric order) against the whole table's."""
    overall = data[column].value_counts(normalize=True).sort_index(key=lambda i: i.astype(int))
    worst = 0.0
    for _, rows in data.groupby(QIS):
        p = rows[column].value_counts(normalize=True).reindex(overall.index, fill_value=0)
        worst = max(worst, (p - overall).cumsum().abs().sum() / (len(overall) - 1))
    return worst


def _run(table, model, sensitive):
    data, hierarchies, disease = table
    config = AnonymizationConfig(
        quasi_identifiers=hierarchies,
        model=model,
        sensitive=sensitive,
        identifiers=["name"],
        sensitive_hierarchies={"disease": disease},
    )
    return anonymize(data, config)


@pytest.mark.parametrize("limit", [0.0, 0.05])
@pytest.mark.parametrize("k", [2, 5, 10])
@pytest.mark.pycanon
def test_k_anonymity_holds_by_pycanon_and_groupby(small_table, k, limit):
    result = _run(small_table, PrivacyModel(k=k, suppression_limit=limit), [])
    extract = result.data
    assert pycanon.measure(extract, QIS)["k"] >= k
    sizes = extract.groupby(QIS).size()
    assert sizes.min() == result.achieved_k >= k
    assert result.suppressed <= math.floor(limit * len(small_table[0]))
    assert len(result.classes) == len(sizes)


@pytest.mark.pycanon
@pytest.mark.parametrize("limit", [0.0, 0.05])
def test_distinct_l_diversity_holds(small_table, limit):
    result = _run(small_table, PrivacyModel(k=2, l=3, suppression_limit=limit), ["disease"])
    extract = result.data
    measured = pycanon.measure(extract, QIS, ["disease"], ("l", "k"))
    assert measured["l"] >= 3
    assert extract.groupby(QIS)["disease"].nunique().min() == result.achieved_l["disease"]
    assert measured["k"] >= 2
    assert extract.groupby(QIS)["disease"].nunique().min() >= 3
    assert extract.groupby(QIS).size().min() >= 2


@pytest.mark.pycanon
@pytest.mark.parametrize("limit", [0.0, 0.05])
def test_entropy_l_diversity_holds(small_table, limit):
    result = _run(
        small_table, PrivacyModel(l=2.5, l_variant="entropy", suppression_limit=limit), ["disease"]
    )
    extract = result.data
    assert pycanon.measure(extract, QIS, ["disease"], ("entropy_l",))["entropy_l"] >= 2

    def entropy(s: pd.Series) -> float:
        p = s.value_counts(normalize=True).to_numpy()
        return float(-(p * np.log(p)).sum())

    h = extract.groupby(QIS)["disease"].apply(entropy)
    assert h.min() >= math.log(2.5) - 1e-9
    assert result.achieved_l["disease"] == pytest.approx(math.exp(h.min()))


@pytest.mark.pycanon
def test_recursive_cl_diversity_holds(small_table):
    c, l = 2.0, 3  # noqa: E741
    result = _run(small_table, PrivacyModel(l=l, l_variant="recursive", c=c), ["disease"])
    for _, rows in result.data.groupby(QIS):
        r = rows["disease"].value_counts().sort_values(ascending=False).to_numpy()
        assert r[0] < c * r[l - 1 :].sum()
    assert pycanon.measure(result.data, QIS, ["disease"], ("l",))["l"] >= l
    assert result.data.groupby(QIS)["disease"].nunique().min() >= l


@pytest.mark.pycanon
def test_equal_distance_t_closeness_holds_by_pycanon(small_table):
    result = _run(small_table, PrivacyModel(t=0.25), ["disease"])
    assert result.suppressed == 0
    t = pycanon.measure(result.data, QIS, ["disease"], ("t",))["t"]
    assert t <= 0.25 + 1e-9
    assert result.achieved_t["disease"] == pytest.approx(t)
    assert equal_t(result.data, "disease") == pytest.approx(t)


@pytest.mark.pycanon
def test_ordered_distance_t_closeness_holds_by_pycanon(small_table):
    result = _run(small_table, PrivacyModel(t=0.15, t_distance="ordered"), ["salary"])
    assert result.suppressed == 0
    # numeric column: ordered EMD
    t = pycanon.measure(result.data, QIS, ["salary"], ("t",), numeric=["salary"])["t"]
    assert t <= 0.15 + 1e-9
    assert result.achieved_t["salary"] == pytest.approx(t)
    assert ordered_t(result.data, "salary") == pytest.approx(t)


@pytest.mark.parametrize("distance", ["equal", "ordered", "hierarchical"])
def test_t_closeness_with_suppression_against_input_distribution(small_table, distance):
    data = small_table[0]
    column = "salary" if distance == "ordered" else "disease"
    result = _run(
        small_table, PrivacyModel(t=0.2, t_distance=distance, suppression_limit=0.05), [column]
    )
    overall = data[column].value_counts(normalize=True)
    for _, rows in result.data.groupby(QIS):
        p = rows[column].value_counts(normalize=True).reindex(overall.index, fill_value=0)
        if distance == "equal":
            emd = 0.5 * (p - overall).abs().sum()
        elif distance == "ordered":
            diff = (p - overall).sort_index(key=lambda i: i.astype(int))
            emd = diff.cumsum().abs().sum() / (len(diff) - 1)
        else:
            # Two-level tree: respiratory {flu, cold, bronchitis}, severe {hiv, cancer}.
            diff = p - overall
            groups = [["flu", "cold", "bronchitis"], ["hiv", "cancer"]]
            emd = 0.0
            for g in groups:
                d = diff[g]
                emd += 0.5 * min(d[d > 0].sum(), -d[d < 0].sum())
            top = [diff[g].sum() for g in groups]
            emd += 1.0 * min(sum(x for x in top if x > 0), -sum(x for x in top if x < 0))
        assert emd <= 0.2 + 1e-9


@pytest.mark.pycanon
def test_several_sensitive_attributes_each_hold(small_table):
    result = _run(small_table, PrivacyModel(k=2, l=2, t=0.3), ["disease", "salary"])
    for s in ("disease", "salary"):
        assert result.data.groupby(QIS)[s].nunique().min() >= 2
        assert pycanon.measure(result.data, QIS, [s], ("t",))["t"] <= 0.3 + 1e-9
        assert equal_t(result.data, s) <= 0.3 + 1e-9
    assert pycanon.measure(result.data, QIS, ["disease", "salary"], ("l",))["l"] >= 2


# ---------------------------------------------------------------------------- primitives
def test_primitives_on_a_hand_made_example():
    # class 0: a a a b ; class 1: a b c d ; class 2: c
    group = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2])
    value = np.array([0, 0, 0, 1, 0, 1, 2, 3, 2])
    sc = SensitiveCounts.from_codes(group, value)
    assert distinct_l(sc).tolist() == [2, 4, 1]
    h0 = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert entropy_l(sc) == pytest.approx([math.exp(h0), 4.0, 1.0])
    # (c=2, l=2): class 0: 3 < 2*1 fails; class 1: 1 < 2*3 passes; class 2 has 1 value: fails.
    assert recursive_cl(sc, 2.0, 2).tolist() == [False, True, False]
    # Largest l with r_1 < c * (r_l + ...): l = 1 compares r_1 with c times the class size.
    assert recursive_l_value(sc, 2.0).tolist() == [1, 4, 1]
    assert recursive_l_value(sc, 0.5).tolist() == [0, 2, 0]  # class 1: 1 < 0.5 * (1 + 1 + 1)
    # Overall: a 4/9, b 2/9, c 2/9, d 1/9.
    ctx = TContext.build(value, "equal")
    q = np.array([4, 2, 2, 1]) / 9
    expected = [
        0.5 * np.abs(np.array([0.75, 0.25, 0, 0]) - q).sum(),
        0.5 * np.abs(np.full(4, 0.25) - q).sum(),
        0.5 * np.abs(np.array([0, 0, 1, 0]) - q).sum(),
    ]
    assert t_distance(sc, ctx) == pytest.approx(expected)
    ordered = TContext.build(value, "ordered", labels=["1", "2", "10", "3"])
    # numeric order: 1 (code 0), 2 (code 1), 3 (code 3), 10 (code 2)
    p = np.array([0.75, 0.25, 0, 0])
    order = [0, 1, 3, 2]
    expected0 = np.abs(np.cumsum((p - q)[order])).sum() / 3
    assert t_distance(sc, ordered)[0] == pytest.approx(expected0)
    sizes = np.array([4, 4, 1])
    model = PrivacyModel(k=2, l=2)
    data = DataContext(9, {"s": value}, {"s": ["1", "2", "10", "3"]})
    assert model.class_fails(Classes(sizes, {"s": sc}), data).tolist() == [False, False, True]


def test_smallest_t_close_class_size():
    from releases.engine.privacy import min_class_size_for_t

    codes = np.repeat([0, 1, 2, 3], [4, 3, 2, 1])  # q = .4 .3 .2 .1
    # Equal distance: a class of s rows misses at least the mass of all but s values:
    # s=1 -> .6, s=2 -> .3, s=3 -> .1.
    assert min_class_size_for_t(TContext.build(codes, "equal"), 0.25) == 3
    assert min_class_size_for_t(TContext.build(codes, "equal"), 0.6) == 1
    # Ordered: each moved unit costs at least 1/(m-1) = 1/3: s=1 -> .2.
    ordered = TContext.build(codes, "ordered", labels=["1", "2", "3", "4"])
    assert min_class_size_for_t(ordered, 0.25) == 1
    assert min_class_size_for_t(ordered, 0.15) == 2
    # The bound is sound: no class of 2 rows is within 0.25 under equal distance.
    ctx = TContext.build(codes, "equal")
    for a in range(4):
        for b in range(4):
            sc = SensitiveCounts.from_codes(np.array([0, 0]), np.array([a, b]), n_values=4)
            assert t_distance(sc, ctx)[0] > 0.25
