"""ARX 3.9.2's optima on an integer-recoded benchmark table: Adult with every value replaced by
its rank and the hierarchies recoded the same way (``bench/integer_table.py``, rows shuffled).

The expected figures are ARX's own output, stored by ``bench/arx_compare.py --arx`` under
``bench/arx/results/integer-adult-*.json``: levels, suppressed records, classes, Loss, and for
microaggregation the released table's SHA-256. Each release is also checked with plain pandas:
the hierarchy files read as CSV, the rows generalized with ``Series.map`` and counted with
group-bys.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, Hierarchy, PrivacyModel, anonymize
from releases.engine.subset import ResearchSubset
from tests.conftest import ADULT
from tests.support.frames import join_rows

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "tests" / "data" / "integer-adult"
RESULTS = ROOT / "bench" / "arx" / "results"
CASES = sorted(p.stem for p in RESULTS.glob("integer-adult-*.json"))
COLUMNS = [
    "sex",
    "age",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
    "salary-class",
]


def stored(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def read_hierarchy(column: str) -> pd.DataFrame:
    return pd.read_csv(
        TABLE / f"integer-adult_hierarchy_{column}.csv", sep=";", header=None, dtype=str,
        keep_default_na=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(TABLE / "integer-adult.csv", sep=";", dtype=str, keep_default_na=False)


@pytest.fixture(scope="module")
def hierarchies() -> dict[str, Hierarchy]:
    return {
        q: Hierarchy.from_arx_csv(TABLE / f"integer-adult_hierarchy_{q}.csv", attribute=q)
        for q in COLUMNS
    }


def subset_rows(case: dict, n: int) -> np.ndarray | None:
    """The case's research subset, by the rule bench/arx_compare.py wrote ARX's file with."""
    rule = case.get("subset")
    if not rule:
        return None
    return np.random.default_rng(rule["seed"]).random(n) < rule["fraction"]


def configure(case: dict, hierarchies: dict[str, Hierarchy], rows) -> AnonymizationConfig:
    model = PrivacyModel.from_spec(
        {
            "criteria": case["criteria"],
            "suppression_limit": case["suppression_limit"],
            "population": case.get("population"),
        }
    )
    limits = case.get("level_limits") or {}
    search = case.get("heuristic")
    options = (
        {"algorithm": "heuristic", "time_limit": search["seconds"], "step_limit": search["steps"]}
        if search
        else {}
    )
    return AnonymizationConfig(
        quasi_identifiers={q: hierarchies[q] for q in case["qis"]},
        model=model,
        research_subset=None if rows is None else ResearchSubset(rows),
        weights=dict(case.get("weights") or {}),
        min_levels={q: lo for q, (lo, _) in limits.items()},
        max_levels={q: hi for q, (_, hi) in limits.items()},
        microaggregate=dict(case.get("microaggregate") or {}),
        **options,
    )


def generalize(frame: pd.DataFrame, levels: dict[str, int]) -> pd.DataFrame:
    """The quasi-identifiers at ``levels``, read off the recoded hierarchy files."""
    out = {}
    for q, level in levels.items():
        h = read_hierarchy(q)
        out[q] = frame[q].map(dict(zip(h[0], h[level], strict=True)))
    return pd.DataFrame(out)


def class_counts(generalized: pd.DataFrame) -> pd.Series:
    return generalized.groupby(list(generalized.columns), sort=False).size()


def java_round(x: float) -> int:
    return math.floor(x + 0.5)


def test_the_table_is_adult_recoded_to_ranks(table):
    """Each value is its rank among the leaves of Adult's hierarchy (ages by number, the rest
    by text); the same rows, shuffled; every hierarchy has Adult's shape."""
    adult = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    recoded = {}
    for column in COLUMNS:
        original = pd.read_csv(
            ADULT / f"adult_hierarchy_{column}.csv", sep=";", header=None, dtype=str,
            keep_default_na=False,
        )  # fmt: skip
        leaves = original[0]
        order = leaves.astype(int).rank(method="first") if column == "age" else leaves.rank()
        rank = dict(zip(leaves, (order - 1).astype(int).astype(str), strict=True))
        recoded[column] = adult[column].map(rank)
        ours = read_hierarchy(column)
        assert ours.shape == original.shape
        assert ours[0].map(dict(zip(rank.values(), rank.keys(), strict=True))).tolist() == list(
            leaves
        )
        # The groups of every level are Adult's groups (same leaves together).
        for level in original.columns[1:]:
            assert (pd.crosstab(original[level], ours[level]).astype(bool).sum(axis=1) == 1).all()
            assert original[level].nunique() == ours[level].nunique()
    expected = pd.DataFrame(recoded)[COLUMNS]
    assert table.columns.tolist() == COLUMNS and len(table) == len(adult)
    assert not table.equals(expected)  # shuffled
    pd.testing.assert_frame_equal(
        table.sort_values(COLUMNS).reset_index(drop=True),
        expected.sort_values(COLUMNS).reset_index(drop=True),
    )


def test_the_recorded_cases_cover_the_models():
    cases = [stored(c) for c in CASES]
    models = {c["model"] for case in cases for c in case["criteria"]}
    assert models == {"k-anonymity", "k-map", "delta-presence"}
    assert any(case.get("subset") for case in cases if case["criteria"][0]["model"] == "k-map")
    assert any(case.get("population") for case in cases)
    assert any(case.get("weights") and case.get("level_limits") for case in cases)
    functions = {f for case in cases for f in (case.get("microaggregate") or {}).values()}
    assert functions == {"mean", "interval"}
    assert any(case.get("heuristic") for case in cases)
    assert all(case["table"] == "integer-adult" and not case.get("differs") for case in cases)


@pytest.mark.parametrize("name", CASES)
def test_the_result_is_arxs(table, hierarchies, name):
    case = stored(name)
    arx = case["arx"]
    micro = case.get("microaggregate") or {}
    qis = [q for q in case["qis"] if q not in micro]
    rows = subset_rows(case, len(table))
    result = anonymize(table, configure(case, hierarchies, rows))

    assert result.levels == {q: arx["levels"][q] for q in qis}
    assert set(arx["levels"]) == set(qis)
    assert result.suppressed == arx["suppressed"]
    assert len(result.classes) == arx["classes"]
    assert result.metrics["loss"] == pytest.approx(arx["loss"], abs=1e-9)
    assert result.rows_in == arx["rows_in"]
    if case.get("heuristic"):
        assert result.search["steps"] == arx["transformations_checked"]
        assert result.search["proven_optimal"] == arx["optimum_proven"]
    if micro:
        # The released table laid out as ARX writes it: every row in order, "*" if suppressed.
        full = table.copy()
        full[case["qis"]] = "*"
        full.iloc[result.source_rows] = result.data[list(table.columns)].to_numpy()
        lines = join_rows(full, ";")
        digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        assert digest == arx["released"]["sha256"]

    # Independently, with pandas: the release holds the (subset's) rows minus the suppressed
    # ones, and those are exactly the rows of the classes that fail the model.
    released_from = table if rows is None else table[rows]
    assert len(result.data) == len(released_from) - result.suppressed
    mine = generalize(released_from, result.levels)
    sizes = class_counts(mine)
    people = class_counts(generalize(table, result.levels)).reindex(sizes.index)
    released = class_counts(result.data[qis])
    assert len(released) == arx["classes"] and released.index.isin(sizes.index).all()
    fails = pd.Series(False, index=sizes.index)
    for criterion in case["criteria"]:
        if criterion["model"] == "k-map" and rows is not None:
            fails |= people < criterion["k"]
            assert (people.reindex(released.index) >= criterion["k"]).all()
        elif criterion["model"] == "k-map":
            fails |= sizes < arx["derived_k"]
            assert released.min() >= arx["derived_k"]
        elif criterion["model"] == "delta-presence":
            presence = sizes / people
            fails |= (presence < criterion["dmin"]) | (presence > criterion["dmax"])
            kept = released / people.reindex(released.index)
            assert kept.between(criterion["dmin"], criterion["dmax"]).all()
        else:
            fails |= sizes < criterion["k"]
            assert released.min() >= criterion["k"]
    assert int(sizes[fails].sum()) == result.suppressed
    assert sorted(released.index) == sorted(sizes.index[~fails])
    assert result.suppressed <= math.floor(case["suppression_limit"] * len(released_from))
    for q, (low, high) in (case.get("level_limits") or {}).items():
        assert low <= result.levels[q] <= high

    # A microaggregated column holds, in each class, the aggregate of its original ranks.
    for column, function in micro.items():
        kept = released_from.iloc[~fails.reindex(pd.MultiIndex.from_frame(mine)).to_numpy()]
        originals = kept[column].astype(int).groupby([mine.loc[kept.index, q] for q in qis])
        shown = result.data.groupby(qis)[column].agg(lambda s: set(s))
        for key, values in originals:
            (value,) = shown[key]
            if function == "mean":
                assert value == str(java_round(values.mean()))
            else:
                assert value == f"[{values.min()}, {values.max()}]"
