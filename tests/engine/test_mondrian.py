"""Mondrian: privacy checked by pycanon (in its own venv) and by independent groupby counts,
values by hand."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from releases.engine.hierarchy import Hierarchy
from releases.engine.mondrian import anonymize_mondrian
from releases.engine.types import (
    AnonymizationConfig,
    EngineError,
    HierarchyError,
    PrivacyModel,
)
from tests.conftest import ADULT
from tests.conftest import ADULT_QUASI_IDENTIFIERS as ADULT_QIS
from tests.support import pycanon

RANGE = re.compile(r"^\[(.+)-(.+)\]$")


def hierarchy_rows(path: Path) -> dict[str, list[str]]:
    """value -> its chain of generalizations, read straight from the ARX file."""
    with path.open(newline="", encoding="utf-8") as f:
        return {r[0]: r for r in csv.reader(f, delimiter=";") if r}


def flat(values) -> Hierarchy:
    return Hierarchy(tuple((v, "*") for v in dict.fromkeys(values)))


def assert_covers(original: pd.Series, released: pd.Series, chains=None) -> None:
    """Each original value lies in its released range or under its released ancestor."""
    pairs = pd.DataFrame({"o": original.to_numpy(), "r": released.to_numpy()}).drop_duplicates()
    for o, r in pairs.itertuples(index=False):
        if r == "*" or r == o:
            continue
        m = RANGE.match(r)
        if m:
            assert float(m.group(1)) <= float(o) <= float(m.group(2)), (o, r)
        else:
            assert chains is not None and r in chains[o], (o, r)


def groupby_sizes(df: pd.DataFrame, qis: list[str]) -> np.ndarray:
    return df.groupby(qis, dropna=False).size().to_numpy()


@pytest.fixture(scope="module")
def adult_k5(adult, adult_hierarchies):
    cfg = AnonymizationConfig(adult_hierarchies, PrivacyModel(k=5), algorithm="mondrian")
    return anonymize_mondrian(adult, cfg)


@pytest.mark.pycanon
def test_adult_k5_is_5_anonymous_and_keeps_every_row(adult, adult_k5):
    out = adult_k5.data
    assert len(out) == len(adult) == 30162
    assert adult_k5.rows_in == adult_k5.rows_out == 30162 and adult_k5.suppressed == 0
    assert pycanon.measure(out, ADULT_QIS)["k"] >= 5
    sizes = groupby_sizes(out, ADULT_QIS)
    assert sizes.min() >= 5
    assert adult_k5.achieved_k == sizes.min()
    # Mondrian is local recoding: it must do better than one big class.
    assert len(sizes) > 1000
    assert len(adult_k5.classes) == len(sizes)
    assert sorted(adult_k5.classes["size"]) == sorted(sizes.tolist())
    assert adult_k5.risk_after.highest == pytest.approx(1 / sizes.min())
    assert adult_k5.risk_before.sample_uniques > 0  # Adult has unique records
    # Columns that are not quasi-identifiers are released unchanged and in order.
    assert list(out.columns) == list(adult.columns)
    assert (out["workclass"] == adult["workclass"]).all()
    assert adult_k5.levels is None and adult_k5.algorithm == "mondrian"
    assert adult_k5.transformations_checked >= len(sizes)


def test_adult_released_values_cover_originals(adult, adult_k5):
    for q in ADULT_QIS:
        chains = None if q == "age" else hierarchy_rows(ADULT / f"adult_hierarchy_{q}.csv")
        assert_covers(adult[q], adult_k5.data[q], chains)
    # age is numeric: released as ranges or single values, never a hierarchy label
    ages = adult_k5.data["age"]
    assert ages.str.match(r"^(\[\d+-\d+\]|\d+)$").all()


def test_adult_classes_table_matches_released_data(adult_k5):
    classes = adult_k5.classes
    assert set(ADULT_QIS) | {"size", "fails"} <= set(classes.columns)
    assert (classes["fails"] == "").all()
    merged = adult_k5.data.groupby(ADULT_QIS).size().rename("n").reset_index()
    joined = classes.merge(merged, on=ADULT_QIS, how="outer", indicator=True)
    assert (joined["_merge"] == "both").all()
    assert (joined["size"] == joined["n"]).all()


def test_adult_metrics_are_present_and_consistent(adult_k5):
    m = adult_k5.metrics
    sizes = adult_k5.classes["size"].to_numpy()
    assert m["discernibility"] == pytest.approx(float((sizes**2).sum()))
    assert m["average_class_size"] == pytest.approx(30162 / len(sizes))
    assert set(m["loss_per_attribute"]) == set(ADULT_QIS)
    per = np.array(list(m["loss_per_attribute"].values()))
    assert 0 < m["loss"] < 1
    # ARX: Loss is the geometric mean of (1 + loss_i), minus 1.
    assert m["loss"] == pytest.approx(np.prod(1 + per) ** (1 / len(per)) - 1)
    assert 0 < m["granularity"] < 1
    assert 0 <= m["precision"] <= 1 and 0 < m["non_uniform_entropy"] < 1
    assert adult_k5.report()["classes"] == len(sizes)


def test_adult_metrics_keep_the_bits_releases_stored(adult_k5):
    # Means over 30,162 rows: numpy 2.3 changed how it adds more than 8192 floats, and the
    # figures stored with releases before must come out the same (releases.engine.summation).
    m = adult_k5.metrics
    assert m["loss_per_attribute"]["age"] == 0.06661062227442133
    assert m["loss_per_attribute"]["marital-status"] == 0.036436575823884355
    assert m["granularity"] == 0.057935442695612176


@pytest.mark.pycanon
def test_adult_distinct_l_diversity(adult, adult_hierarchies):
    cfg = AnonymizationConfig(
        adult_hierarchies,
        PrivacyModel(k=5, l=3),
        sensitive=["workclass"],
        algorithm="mondrian",
    )
    res = anonymize_mondrian(adult, cfg)
    assert len(res.data) == len(adult)
    assert pycanon.measure(res.data, ADULT_QIS, ["workclass"], ("l",))["l"] >= 3
    distinct = res.data.groupby(ADULT_QIS)["workclass"].nunique()
    assert distinct.min() >= 3
    assert res.achieved_l["workclass"] == distinct.min()
    assert groupby_sizes(res.data, ADULT_QIS).min() >= 5


# ----------------------------------------------------------------------- generated tables


@pytest.fixture(scope="module")
def generated() -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    rng = np.random.default_rng(7)
    n = 4000
    regions = ["N", "S", "E", "W"]
    zips = [f"{r}{i}{j}" for r in regions for i in range(3) for j in range(4)]
    df = pd.DataFrame(
        {
            "id": [f"p{i}" for i in range(n)],
            "age": rng.integers(18, 90, n).astype(str),
            "zip": rng.choice(zips, n),
            "sex": rng.choice(["F", "M", ""], n, p=[0.45, 0.45, 0.1]),
            "disease": rng.choice(["flu", "cold", "hiv", "cancer", "ulcer", "none"], n),
            "income": rng.integers(0, 8, n).astype(str),
        }
    )
    hierarchies = {
        "age": Hierarchy.intervals(sorted(set(df["age"]), key=int)),
        # region / district / zip: a three-level hierarchy to split along
        "zip": Hierarchy(tuple((z, z[:2] + "*", z[0] + "**", "*") for z in zips)),
        "sex": flat(["F", "M", ""]),
    }
    return df, hierarchies


GEN_QIS = ["age", "zip", "sex"]


def run_generated(generated, **model) -> tuple[pd.DataFrame, object]:
    df, hierarchies = generated
    cfg = AnonymizationConfig(
        hierarchies,
        PrivacyModel(**model),
        sensitive=["disease"],
        identifiers=["id"],
        algorithm="mondrian",
    )
    return df, anonymize_mondrian(df, cfg)


@pytest.mark.pycanon
def test_generated_k_anonymity_and_coverage(generated):
    df, res = run_generated(generated, k=10)
    out = res.data
    assert "id" not in out.columns
    assert list(out.columns) == ["age", "zip", "sex", "disease", "income"]
    assert len(out) == len(df)
    assert pycanon.measure(out, GEN_QIS)["k"] >= 10
    assert groupby_sizes(out, GEN_QIS).min() >= 10
    zip_chains = {z: [z, z[:2] + "*", z[0] + "**", "*"] for z in set(df["zip"])}
    assert_covers(df["age"], out["age"])
    assert_covers(df["zip"], out["zip"], zip_chains)
    assert_covers(df["sex"], out["sex"], {"F": ["F", "*"], "M": ["M", "*"], "": ["", "*"]})
    # "" is a value of its own: a class can keep it ungeneralized.
    assert "" in set(out["sex"]) or "*" in set(out["sex"])
    assert (out["disease"] == df["disease"]).all() and (out["income"] == df["income"]).all()


@pytest.mark.pycanon
def test_generated_entropy_l_diversity(generated):
    df, res = run_generated(generated, k=3, l=4.5, l_variant="entropy")
    entropy = res.data.groupby(GEN_QIS)["disease"].agg(
        lambda s: math.exp(-sum(p * math.log(p) for p in s.value_counts(normalize=True)))
    )
    assert entropy.min() >= 4.5 - 1e-9
    assert res.achieved_l["disease"] == pytest.approx(entropy.min())
    assert pycanon.measure(res.data, GEN_QIS, ["disease"], ("entropy_l",))["entropy_l"] >= 4


def test_generated_recursive_cl_diversity(generated):
    ell, c = 3, 2.0
    df, res = run_generated(generated, k=2, l=ell, l_variant="recursive", c=c)

    def holds(s: pd.Series) -> bool:
        r = sorted(s.value_counts().tolist(), reverse=True)
        return len(r) >= ell and r[0] < c * sum(r[ell - 1 :])

    assert res.data.groupby(GEN_QIS)["disease"].agg(holds).all()
    assert groupby_sizes(res.data, GEN_QIS).min() >= 2


@pytest.mark.pycanon
def test_generated_equal_t_closeness(generated):
    df, res = run_generated(generated, k=2, t=0.15)
    assert pycanon.measure(res.data, GEN_QIS, ["disease"], ("t",))["t"] <= 0.15 + 1e-9
    # Counted as pycanon measures it: each class against the whole released table.
    overall = res.data["disease"].value_counts(normalize=True)
    for _, g in res.data.groupby(GEN_QIS):
        p = g["disease"].value_counts(normalize=True).reindex(overall.index, fill_value=0)
        assert 0.5 * (p - overall).abs().sum() <= 0.15 + 1e-9
    assert res.achieved_t["disease"] <= 0.15 + 1e-9
    assert len(res.classes) > 1


def test_generated_ordered_t_closeness(generated):
    df, hierarchies = generated
    cfg = AnonymizationConfig(
        hierarchies,
        PrivacyModel(k=2, t=0.05, t_distance="ordered"),
        sensitive=["income"],
        algorithm="mondrian",
    )
    res = anonymize_mondrian(df, cfg)
    values = [str(i) for i in range(8)]
    q = df["income"].value_counts(normalize=True).reindex(values, fill_value=0).to_numpy()
    worst = 0.0
    for _, g in res.data.groupby(GEN_QIS):
        p = g["income"].value_counts(normalize=True).reindex(values, fill_value=0).to_numpy()
        worst = max(worst, np.abs(np.cumsum(p - q)).sum() / (len(values) - 1))
    assert worst <= 0.05 + 1e-9
    assert res.achieved_t["income"] == pytest.approx(worst)
    assert len(res.classes) > 1


# ----------------------------------------------------------------------- by hand


def test_numeric_median_splits_and_metrics_by_hand():
    df = pd.DataFrame({"age": ["1", "2", "3", "4"], "x": ["a", "b", "c", "d"]})
    res = anonymize_mondrian(
        df, AnonymizationConfig({"age": flat(["1", "2", "3", "4"])}, PrivacyModel(k=2))
    )
    assert res.data["age"].tolist() == ["[1-2]", "[1-2]", "[3-4]", "[3-4]"]
    assert res.data["x"].tolist() == ["a", "b", "c", "d"]
    # each cell covers a range of 1 out of a domain range of 3
    assert res.metrics["loss_per_attribute"]["age"] == pytest.approx(1 / 3)
    assert res.metrics["discernibility"] == 8  # 2^2 + 2^2
    assert res.metrics["average_class_size"] == 2
    assert res.risk_after.highest == 0.5 and res.risk_before.highest == 1.0
    # k=1: every value stays as it is
    res1 = anonymize_mondrian(
        df, AnonymizationConfig({"age": flat(["1", "2", "3", "4"])}, PrivacyModel(k=1))
    )
    assert res1.data["age"].tolist() == ["1", "2", "3", "4"]
    assert res1.metrics["loss"] == 0 and res1.metrics["discernibility"] == 4


def test_categorical_split_along_hierarchy_by_hand():
    # e and f are in the hierarchy but not in the data: they still count as leaves (as in ARX)
    h = Hierarchy(
        tuple(
            (v, p, "*")
            for v, p in [("a", "X"), ("b", "X"), ("e", "X"), ("c", "Y"), ("d", "Y"), ("f", "Y")]
        )
    )
    df = pd.DataFrame({"v": list("aabbccdd")})
    k2 = anonymize_mondrian(df, AnonymizationConfig({"v": h}, PrivacyModel(k=2)))
    assert k2.data["v"].tolist() == list("aabbccdd")
    assert k2.metrics["loss"] == 0 and k2.metrics["precision"] == 0
    k3 = anonymize_mondrian(df, AnonymizationConfig({"v": h}, PrivacyModel(k=3)))
    assert k3.data["v"].tolist() == list("XXXXYYYY")
    # X covers 3 of the 6 leaves: loss (3 - 1) / (6 - 1); its level is 1 of 2
    assert k3.metrics["loss_per_attribute"]["v"] == pytest.approx(2 / 5)
    assert k3.metrics["precision"] == pytest.approx(1 / 2)
    # P(a | X) = 2/4 for every row: 8 rows * 1 bit, out of 8 rows * 2 bits (4 equal values)
    assert k3.metrics["non_uniform_entropy_bits"] == pytest.approx(8.0)
    assert k3.metrics["non_uniform_entropy"] == pytest.approx(0.5)
    # Granularity: mean share 3/6 against the bounds 1/6 and 1
    assert k3.metrics["granularity"] == pytest.approx((3 / 6 - 1 / 6) / (1 - 1 / 6))
    k5 = anonymize_mondrian(df, AnonymizationConfig({"v": h}, PrivacyModel(k=5)))
    assert set(k5.data["v"]) == {"*"}
    assert k5.metrics["loss"] == pytest.approx(1.0)


def test_hierarchical_t_closeness_by_hand():
    # Sensitive tree: a, b under X; c, d under Y. Whole table uniform over a, b, c, d.
    # Class {a, c}: extras +1/4 (a, c), -1/4 (b, d); X and Y each cost 1/2 * 1/4, root 0
    # -> hierarchical EMD 1/4, while the equal-distance EMD is 1/2.
    sh = Hierarchy((("a", "X", "*"), ("b", "X", "*"), ("c", "Y", "*"), ("d", "Y", "*")))
    df = pd.DataFrame({"g": ["g1"] * 4 + ["g2"] * 4, "s": list("acacbdbd")})

    def run(t: float, distance: str):
        cfg = AnonymizationConfig(
            {"g": flat(["g1", "g2"])},
            PrivacyModel(k=2, t=t, t_distance=distance),
            sensitive=["s"],
            sensitive_hierarchies={"s": sh},
        )
        return anonymize_mondrian(df, cfg)

    hier = run(0.3, "hierarchical")
    assert hier.data["g"].tolist() == df["g"].tolist()
    assert hier.classes["s:t"].tolist() == pytest.approx([0.25, 0.25])
    equal = run(0.3, "equal")
    assert set(equal.data["g"]) == {"*"}
    assert equal.achieved_t["s"] == pytest.approx(0.0)


def test_missing_value_is_a_category():
    h = Hierarchy((("", "*"), ("x", "*")))
    df = pd.DataFrame({"v": ["", "", "x", "x"]})
    res = anonymize_mondrian(df, AnonymizationConfig({"v": h}, PrivacyModel(k=2)))
    assert res.data["v"].tolist() == ["", "", "x", "x"]


def test_impossible_models_raise_engine_error():
    df = pd.DataFrame({"age": ["1", "2", "3", "4"], "s": ["a", "b", "a", "b"]})
    hs = {"age": flat(["1", "2", "3", "4"])}
    with pytest.raises(EngineError, match="l-diversity"):
        anonymize_mondrian(df, AnonymizationConfig(hs, PrivacyModel(k=1, l=3), sensitive=["s"]))
    with pytest.raises(EngineError, match="k = 5"):
        anonymize_mondrian(df, AnonymizationConfig(hs, PrivacyModel(k=5)))
    with pytest.raises(EngineError):
        anonymize_mondrian(df, AnonymizationConfig({"nope": flat(["1"])}, PrivacyModel(k=1)))


def test_hierarchy_not_covering_the_data():
    df = pd.DataFrame({"v": ["a", "b", "zz"]})
    with pytest.raises(HierarchyError, match="zz"):
        anonymize_mondrian(df, AnonymizationConfig({"v": flat(["a", "b"])}, PrivacyModel(k=1)))


def test_engine_entry_point_dispatches_to_mondrian(generated):
    from releases.engine import anonymize

    df, hierarchies = generated
    res = anonymize(
        df,
        AnonymizationConfig(
            hierarchies, PrivacyModel(k=4), algorithm="mondrian", identifiers=["id"]
        ),
    )
    assert res.algorithm == "mondrian" and res.levels is None
    assert groupby_sizes(res.data, GEN_QIS).min() >= 4 and len(res.data) == len(df)


def test_progress_reports_fractions_up_to_done(generated):
    df, hierarchies = generated
    seen: list[float] = []
    anonymize_mondrian(
        df,
        AnonymizationConfig(hierarchies, PrivacyModel(k=2)),
        progress=lambda f, stage: seen.append(f),
    )
    assert seen and seen[-1] == 1.0
    assert all(0.0 <= f <= 1.0 for f in seen) and seen == sorted(seen)
