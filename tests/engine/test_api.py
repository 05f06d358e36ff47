"""``anonymize``: configuration errors, the extract, the classes table, metrics and risk."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from releases.engine import (
    AnonymizationConfig,
    EngineError,
    Hierarchy,
    HierarchyError,
    PrivacyModel,
    anonymize,
)

QIS = ["age", "zip", "sex", "marital"]
REPO = Path(__file__).resolve().parents[2]


def _config(table, **kwargs):
    data, hierarchies, disease = table
    kwargs.setdefault("identifiers", ["name"])
    return AnonymizationConfig(
        quasi_identifiers=hierarchies, sensitive_hierarchies={"disease": disease}, **kwargs
    )


@pytest.fixture(scope="module")
def released(table_factory):
    table = table_factory(7)
    model = PrivacyModel(k=5, l=2, suppression_limit=0.05)
    return table, anonymize(table[0], _config(table, model=model, sensitive=["disease"]))


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(identifiers=["nope"]), r"Column 'nope', given as an identifier, is not in the data"),
        (dict(identifiers=["age"]), r"'age' cannot be both an identifier and a quasi-identifier"),
        (dict(sensitive=["zip"]), r"'zip' cannot be both a quasi-identifier and a sensitive"),
        (dict(model=PrivacyModel(l=2)), r"l-diversity needs at least one sensitive attribute"),
        (dict(model=PrivacyModel(k=10_000)), r"k=10000 is larger than the number of rows"),
        (dict(model=PrivacyModel(k=0)), r"k must be a whole number"),
        (dict(min_levels={"salary": 1}), r"'salary', which is not a quasi-identifier"),
        (dict(max_levels={"age": 9}), r"maximum level of 'age' must be between 0 and 3"),
        (dict(algorithm="magic"), r"Unknown algorithm"),
        (
            dict(model=PrivacyModel(t=0.2, t_distance="hierarchical"), sensitive=["salary"]),
            r"needs a hierarchy for the sensitive attribute 'salary'",
        ),
    ],
)
def test_configuration_errors_are_one_clear_sentence(small_table, change, message):
    with pytest.raises(EngineError, match=message):
        anonymize(small_table[0], _config(small_table, **change))


def test_a_hierarchy_that_misses_a_value_is_named(small_table):
    data, hierarchies, disease = small_table
    partial = Hierarchy(tuple(r for r in hierarchies["marital"].rows if r[0] != "widowed"))
    config = AnonymizationConfig(quasi_identifiers={**hierarchies, "marital": partial})
    with pytest.raises(HierarchyError, match=r"'marital'.*'widowed' is not covered"):
        anonymize(data, config)


def test_impossible_model_raises_instead_of_returning(small_table):
    # Only 5 distinct diseases: 6-diversity is impossible even with everything generalized.
    config = _config(small_table, model=PrivacyModel(l=6), sensitive=["disease"])
    with pytest.raises(EngineError, match=r"No generalization satisfies distinct 6-diversity"):
        anonymize(small_table[0], config)


# ---------------------------------------------------------------------------- extract
def test_extract_columns_rows_and_values(released):
    (data, hierarchies, _), result = released
    extract = result.data
    assert list(extract.columns) == [c for c in data.columns if c != "name"]
    # Original row order among kept rows; non-QI columns unchanged.
    kept = data.set_index("row").loc[extract["row"]]
    assert extract["row"].astype(int).is_monotonic_increasing
    for col in ("disease", "salary"):
        assert extract[col].tolist() == kept[col].tolist()
    # Quasi-identifiers replaced by their generalization at the reported level.
    for q in QIS:
        expected = kept[q].map(hierarchies[q].mapping(result.levels[q]))
        assert extract[q].tolist() == expected.tolist()
    assert result.rows_in == len(data)
    assert result.rows_out == len(extract) == len(data) - result.suppressed
    assert 0 < result.suppressed <= math.floor(0.05 * len(data))
    assert result.heights == {q: hierarchies[q].height for q in QIS}


def test_suppressed_rows_are_exactly_the_failing_classes(released):
    (data, hierarchies, _), result = released
    generalized = data.assign(
        **{q: data[q].map(hierarchies[q].mapping(result.levels[q])) for q in QIS}
    )
    groups = generalized.groupby(QIS)
    bad = (groups["row"].transform("size") < 5) | (groups["disease"].transform("nunique") < 2)
    assert sorted(generalized.loc[bad, "row"]) == sorted(set(data["row"]) - set(result.data["row"]))


def test_classes_table(released):
    _, result = released
    classes = result.classes
    assert list(classes.columns) == QIS + [
        "size",
        "disease:distinct_l",
        "disease:entropy_l",
        "disease:t",
        "fails",
        "borderline",
    ]
    by_groupby = result.data.groupby(QIS).agg(size=("row", "size"), distinct=("disease", "nunique"))
    assert len(classes) == len(by_groupby)
    merged = classes.merge(by_groupby.reset_index(), on=QIS)
    assert (merged["size_x"] == merged["size_y"]).all()
    assert (merged["disease:distinct_l"] == merged["distinct"]).all()
    # Smallest first, then by the quasi-identifier values.
    keys = list(zip(classes["size"], *(classes[q] for q in QIS), strict=True))
    assert keys == sorted(keys)
    assert (classes["fails"] == "").all()
    assert result.achieved_k == classes["size"].min()
    assert result.achieved_l == {"disease": float(merged["distinct"].min())}
    assert result.achieved_t["disease"] == pytest.approx(classes["disease:t"].max())


def test_metrics_recomputed_independently(released):
    (data, hierarchies, _), result = released
    n, s = len(data), result.suppressed
    m = result.metrics
    per_attribute = {}
    for q in QIS:
        h, lv = hierarchies[q], result.levels[q]
        labels = [r[lv] for r in h.rows]
        share = {lab: labels.count(lab) / len(labels) for lab in labels}
        total = result.data[q].map(share).sum() + s
        low = n / len(h.rows)
        per_attribute[q] = max(0.0, (total - low) / (n - low))
    assert m["loss_per_attribute"] == pytest.approx(per_attribute)
    values = np.array(list(per_attribute.values()))
    assert m["loss"] == pytest.approx(np.prod((values + 1) ** (1 / 4)) - 1)
    # Granularity as ARX aggregates it: mean shares (suppressed rows count 1) averaged over
    # the attributes first, then normalised between 1/D and 1.
    mean_share = []
    low = []
    for q in QIS:
        h, lv = hierarchies[q], result.levels[q]
        labels = [r[lv] for r in h.rows]
        share = {lab: labels.count(lab) / len(labels) for lab in labels}
        mean_share.append((result.data[q].map(share).sum() + s) / n)
        low.append(1 / len(h.rows))
    assert m["granularity"] == pytest.approx(
        (np.mean(mean_share) - np.mean(low)) / (1 - np.mean(low))
    )
    precision = np.mean(
        [((n - s) * result.levels[q] / (hierarchies[q].height - 1) + s) / n for q in QIS]
    )
    assert m["precision"] == pytest.approx(precision)
    sizes = result.data.groupby(QIS).size()
    assert m["discernibility"] == int((sizes**2).sum()) + s * n
    assert m["average_class_size"] == pytest.approx(len(result.data) / len(sizes))
    # Non-uniform entropy as ARX computes it (QualityModelColumnOrientedNonUniformEntropy):
    # every row first loses -log2(f(original) / f(generalized)) over ALL rows, then each
    # suppressed row loses -log2(f_S(generalized) / S) over the S suppressed rows; the total
    # is normalised by the columns' entropy (-sum log2 f(v)/n over rows).
    released_values = data[["row"] + QIS].merge(
        result.data[["row"]].assign(kept=True), on="row", how="left"
    )
    suppressed_rows = released_values["kept"].isna()
    bits = maxima = 0.0
    for q in QIS:
        generalized = data[q].map(hierarchies[q].mapping(result.levels[q]))
        f_v = data[q].map(data[q].value_counts())
        f_g = generalized.map(generalized.value_counts())
        bits += float(-np.log2(f_v / f_g).sum())
        g_s = generalized[suppressed_rows]
        if len(g_s) and result.levels[q] < hierarchies[q].height - 1:
            bits += float(-np.log2(g_s.map(g_s.value_counts()) / len(g_s)).sum())
        maxima += float(-np.log2(f_v / n).sum())
    assert m["non_uniform_entropy_bits"] == pytest.approx(bits)
    assert m["non_uniform_entropy"] == pytest.approx(bits / maxima)
    json.dumps(result.report())


def test_risk_before_and_after(released):
    (data, _, _), result = released
    before = data.groupby(QIS).size()
    after = result.data.groupby(QIS).size()
    assert result.risk_before.highest == pytest.approx(1 / before.min())
    assert result.risk_before.average == pytest.approx(len(before) / len(data))
    assert result.risk_after.highest == pytest.approx(1 / after.min())
    assert result.risk_after.average == pytest.approx(len(after) / len(result.data))
    assert result.risk_after.highest <= 1 / 5


def test_progress_is_reported_within_0_and_1(small_table):
    seen = []
    anonymize(
        small_table[0],
        _config(small_table, model=PrivacyModel(k=4)),
        progress=lambda f, stage: seen.append((f, stage)),
    )
    assert seen and all(0.0 <= f <= 1.0 and isinstance(stage, str) for f, stage in seen)
    assert seen[-1][0] == 1.0


def test_non_string_cells_are_coerced(small_table):
    data = small_table[0].copy()
    data["salary"] = data["salary"].astype(int)
    data.loc[0, "marital"] = None
    hierarchies = dict(small_table[1])
    hierarchies["marital"] = Hierarchy(hierarchies["marital"].rows + (("", "", "*"),))
    result = anonymize(
        data, AnonymizationConfig(quasi_identifiers=hierarchies, model=PrivacyModel(k=3))
    )
    assert result.data.groupby(QIS).size().min() >= 3


def test_mondrian_is_dispatched(small_table):
    config = _config(small_table, model=PrivacyModel(k=5), algorithm="mondrian")
    result = anonymize(small_table[0], config)
    assert result.algorithm == "mondrian"
    assert result.data.groupby(QIS).size().min() >= 5


@pytest.mark.process
def test_engine_imports_without_django():
    code = (
        "import sys; import releases.engine as e; "
        "from releases.engine import api, lattice, privacy, metrics, hierarchy; "
        "assert 'django' not in sys.modules, sorted(m for m in sys.modules if 'django' in m)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_empty_extract_when_everything_may_be_suppressed():
    data = pd.DataFrame({"a": ["1", "2", "3"], "b": ["x", "y", "z"]})
    config = AnonymizationConfig(
        quasi_identifiers={"a": Hierarchy.categorical(data["a"])},
        model=PrivacyModel(k=3, l=2, suppression_limit=1.0),
        sensitive=["b"],
    )
    result = anonymize(data, config)
    # Suppressing all 3 rows costs the same Loss as generalizing a to "*" (gs-factor 0.5
    # weighs both alike) and has the lower levels, so the tie goes to suppression.
    assert result.metrics["loss"] == pytest.approx(1.0)
    assert result.suppressed == 3 and result.rows_out == 0
    assert list(result.data.columns) == ["a", "b"] and len(result.data) == 0
    assert result.achieved_k == 0 and len(result.classes) == 0
    assert result.achieved_l == {"b": 0.0}
    json.dumps(result.report())


def test_extract_rows_keep_their_input_positions():
    """``source_rows`` points each released row back to its row in the input."""
    rng = np.random.default_rng(3)
    data = pd.DataFrame(
        {
            "age": [str(v) for v in rng.integers(20, 60, 200)],
            "sex": rng.choice(["F", "M"], 200).tolist(),
            "note": [f"row {i}" for i in range(200)],
        }
    )
    hierarchies = {
        "age": Hierarchy.intervals(data["age"].unique(), widths=[5, 10, 20]),
        "sex": Hierarchy.categorical(data["sex"].unique()),
    }
    for algorithm, limit in (("optimal", 0.1), ("mondrian", 0.0)):
        config = AnonymizationConfig(
            quasi_identifiers=hierarchies,
            model=PrivacyModel(k=8, suppression_limit=limit),
            algorithm=algorithm,
        )
        result = anonymize(data, config)
        # "note" is released unchanged, so it names the input row each extract row came from.
        assert [f"row {i}" for i in result.source_rows] == result.data["note"].tolist()
        assert isinstance(result.data.index, pd.RangeIndex)
