"""k-map, δ-presence, attribute weights and level limits on Adult give ARX 3.9.2's optima.

The expected figures are ARX's own output, stored by ``bench/arx_compare.py --arx`` under
``bench/arx/results/`` (the harness ``bench/arx/Harness.java`` runs ARX built from its source):
levels, suppressed records, equivalence classes and Loss. Each release is also checked here
with plain pandas against the population: the hierarchies read as CSV, the population and the
research subset generalized with ``Series.map`` and counted with group-bys.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, PrivacyModel, anonymize
from releases.engine.criteria.k_map import derived_k
from releases.engine.subset import ResearchSubset
from tests.conftest import ADULT

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "arx" / "results"
# Microaggregation's cases are checked in test_microaggregation.py (a column is not generalized).
CASES = sorted(
    p.stem for p in RESULTS.glob("adult-*.json") if not p.stem.startswith("adult-microaggregation")
)
SAME = [c for c in CASES if not json.loads((RESULTS / f"{c}.json").read_text()).get("differs")]


def stored(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def subset_rows(case: dict, n: int) -> np.ndarray | None:
    """The case's research subset, by the rule bench/arx_compare.py wrote ARX's file with."""
    rule = case.get("subset")
    if not rule:
        return None
    return np.random.default_rng(rule["seed"]).random(n) < rule["fraction"]


def configure(case: dict, hierarchies, rows, levels=None) -> AnonymizationConfig:
    model = PrivacyModel.from_spec(
        {
            "criteria": case["criteria"],
            "suppression_limit": case["suppression_limit"],
            "population": case.get("population"),
        }
    )
    limits = case.get("level_limits") or {}
    return AnonymizationConfig(
        quasi_identifiers={q: hierarchies[q] for q in case["qis"]},
        model=model,
        research_subset=None if rows is None else ResearchSubset(rows),
        levels=levels,
        weights=dict(case.get("weights") or {}),
        min_levels={q: lo for q, (lo, _) in limits.items()},
        max_levels={q: hi for q, (_, hi) in limits.items()},
    )


def generalize(frame: pd.DataFrame, levels: dict[str, int]) -> pd.DataFrame:
    """The quasi-identifiers at ``levels``, read off ARX's hierarchy files."""
    out = {}
    for q, level in levels.items():
        table = pd.read_csv(
            ADULT / f"adult_hierarchy_{q}.csv", sep=";", header=None, dtype=str,
            keep_default_na=False,
        )  # fmt: skip
        out[q] = frame[q].map(dict(zip(table[0], table[level], strict=True)))
    return pd.DataFrame(out)


def class_counts(generalized: pd.DataFrame, qis: list[str]) -> pd.Series:
    return generalized.groupby(qis, sort=False).size()


@pytest.mark.parametrize("name", SAME)
def test_the_optimum_is_arxs(adult, adult_hierarchies, name):
    case = stored(name)
    arx = case["arx"]
    qis = case["qis"]
    rows = subset_rows(case, len(adult))
    result = anonymize(adult, configure(case, adult_hierarchies, rows))

    assert result.levels == {q: arx["levels"][q] for q in qis}
    assert result.suppressed == arx["suppressed"]
    assert len(result.classes) == arx["classes"]
    assert result.metrics["loss"] == pytest.approx(arx["loss"], abs=1e-9)
    assert result.rows_in == arx["rows_in"]
    assert result.heuristic is False

    # Independently: the release holds the (subset's) rows minus the suppressed ones, and
    # those are exactly the rows of the classes that fail the model, counted with pandas.
    released_from = adult if rows is None else adult[rows]
    assert len(result.data) == len(released_from) - result.suppressed
    if rows is not None:
        assert rows[result.source_rows].all()
    mine = generalize(released_from, result.levels)
    population = generalize(adult, result.levels)
    sizes = class_counts(mine, qis)
    people = class_counts(population, qis).reindex(sizes.index)
    released = class_counts(result.data, qis)
    assert released.index.isin(sizes.index).all() and len(released) == arx["classes"]

    fails = pd.Series(False, index=sizes.index)
    for criterion in case["criteria"]:
        if criterion["model"] == "k-map" and rows is not None:
            # Every released class matches at least k people of the population table.
            fails |= people < criterion["k"]
            assert (people.reindex(released.index) >= criterion["k"]).all()
        elif criterion["model"] == "k-map":
            # Estimated: classes of at least ARX's derived k in the sample.
            k = arx["derived_k"]
            fails |= sizes < k
            assert released.min() >= k
            entry = next(m for m in result.report()["models"] if m["model"] == "k-map")
            assert entry["achieved"]["derived_k"] == k
        elif criterion["model"] == "delta-presence":
            presence = sizes / people
            fails |= (presence < criterion["dmin"]) | (presence > criterion["dmax"])
            kept = released / people.reindex(released.index)
            assert kept.between(criterion["dmin"], criterion["dmax"]).all()
            if criterion["dmin"] > 0:  # no class of the population is absent from the release
                assert class_counts(population, qis).index.isin(sizes.index).all()
        else:
            fails |= sizes < criterion["k"]
    assert int(sizes[fails].sum()) == result.suppressed
    assert sorted(released.index) == sorted(sizes.index[~fails])
    for q, (low, high) in (case.get("level_limits") or {}).items():
        assert low <= result.levels[q] <= high


def weighted_loss(per_attribute: dict[str, float], weights: dict[str, float]) -> float:
    """ARX's weighted Loss written out: weights divided by the largest (0.5 when not given),
    then prod_i (w_i * loss_i + 1)^(1/d) - 1."""
    given = {q: weights.get(q, 0.5) for q in per_attribute}
    top = max(given.values())
    product = 1.0
    for q, value in per_attribute.items():
        product *= (given[q] / top * value + 1) ** (1 / len(per_attribute))
    return product - 1


@pytest.mark.parametrize("name", [c for c in SAME if stored(c).get("weights")])
def test_weights_choose_the_optimum_of_the_weighted_loss(adult, adult_hierarchies, name):
    case = stored(name)
    weighted = anonymize(adult, configure(case, adult_hierarchies, None))
    shown = weighted.metrics["loss"]
    assert shown == pytest.approx(
        weighted_loss(weighted.metrics["loss_per_attribute"], case["weights"]), abs=1e-12
    )
    assert weighted.report()["utility"]["weights"] == case["weights"]
    # The optimum without weights, judged by the weighted Loss, is no better.
    plain = anonymize(adult, configure({**case, "weights": {}}, adult_hierarchies, None))
    assert plain.levels != weighted.levels
    again = anonymize(adult, configure(case, adult_hierarchies, None, levels=plain.levels))
    assert again.metrics["loss"] > shown


def test_the_research_subset_matched_by_content_gives_the_same_release(adult, adult_hierarchies):
    case = stored("adult-k-map-subset")
    rows = subset_rows(case, len(adult))
    matched = ResearchSubset.match(adult, adult[rows].sample(frac=1.0, random_state=3))
    # Adult repeats rows: a copy may take another identical row, never another content.
    columns = list(adult.columns)
    assert matched.size == int(rows.sum())
    pd.testing.assert_frame_equal(
        adult[matched.rows].sort_values(columns).reset_index(drop=True),
        adult[rows].sort_values(columns).reset_index(drop=True),
    )
    result = anonymize(adult, configure(case, adult_hierarchies, matched.rows))
    assert [result.levels[q] for q in case["qis"]] == [
        case["arx"]["levels"][q] for q in case["qis"]
    ]
    assert result.suppressed == case["arx"]["suppressed"]


def test_derived_k_is_arxs_over_a_grid():
    grid = json.loads((RESULTS / "k-map-derived-k.json").read_text())
    n = grid["sample_size"]
    assert len(grid["derived"]) > 500
    for row in grid["derived"]:
        k, error = derived_k(
            row["k"], row["significance"], n, row["population_size"], row["estimator"]
        )
        assert k == row["derived_k"], row
        assert error == pytest.approx(row["type1_error"], abs=1e-12), row


def test_where_arx_ignores_delta_min_the_engine_does_not(adult, adult_hierarchies):
    """With k-anonymity beside δ-presence, ARX checks the class size first and so never
    judges the population's classes without a released row by δ-presence: its optimum leaves
    people of the population whose class is absent from the release (presence 0 < δmin)."""
    case = stored("adult-delta-presence-with-k")
    qis = case["qis"]
    rows = subset_rows(case, len(adult))
    arx_levels = case["arx"]["levels"]
    dmin = next(c["dmin"] for c in case["criteria"] if c["model"] == "delta-presence")
    population = class_counts(generalize(adult, arx_levels), qis)
    in_subset = class_counts(generalize(adult[rows], arx_levels), qis)
    absent = population[~population.index.isin(in_subset.index)]
    assert dmin > 0 and len(absent) > 0  # ARX's release violates δmin for these people

    with pytest.raises(EngineError, match="do not satisfy"):
        anonymize(adult, configure(case, adult_hierarchies, rows, levels=arx_levels))
    result = anonymize(adult, configure(case, adult_hierarchies, rows))
    ours = class_counts(generalize(adult[rows], result.levels), qis)
    assert class_counts(generalize(adult, result.levels), qis).index.isin(ours.index).all()
    assert result.suppressed <= math.floor(case["suppression_limit"] * rows.sum())
