"""SafePub, (ε, δ)-differentially private microdata: k and β as ARX 3.9.2 derives them, and the
release checked independently with plain numpy and pandas: the sample drawn by the documented
rule (``default_rng(seed).random(n) < β``), the sampled rows generalized with ARX's hierarchy
files and counted with group-bys, every class below k suppressed and no other.

ARX's figures are its own output (``bench/arx/SafePubHarness.java``, stored under
``bench/arx/results/safepub-*.json``; see ``bench/safepub_compare.py``).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, PrivacyModel, anonymize
from releases.engine import safepub as safepub_run
from releases.engine.criteria.safepub import SafePub, parameters, sample_rows, smallest_delta
from releases.engine.subset import ResearchSubset
from tests.conftest import ADULT
from tests.engine.test_cli import call, read_out

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "arx" / "results"
QIS = ["age", "sex", "race", "marital-status", "education"]
LEVELS = {"age": 2, "sex": 0, "race": 1, "marital-status": 1, "education": 2}


def generalize(frame: pd.DataFrame, levels: dict[str, int]) -> pd.DataFrame:
    """The quasi-identifiers at ``levels``, read off ARX's hierarchy files."""
    out = {}
    for q, level in levels.items():
        table = pd.read_csv(
            ADULT / f"adult_hierarchy_{q}.csv", sep=";", header=None, dtype=str,
            keep_default_na=False,
        )  # fmt: skip
        out[q] = frame[q].map(dict(zip(table[0], table[level], strict=True)))
    return pd.DataFrame(out, index=frame.index)


def config(hierarchies, levels=None, **params) -> AnonymizationConfig:
    model = PrivacyModel.from_spec([{"model": "safepub", **params}])
    return AnonymizationConfig(
        quasi_identifiers={q: hierarchies[q] for q in QIS}, model=model, levels=levels
    )


def test_k_and_beta_equal_arxs():
    cases = json.loads((RESULTS / "safepub-parameters.json").read_text())["parameters"]
    assert len(cases) >= 5
    for case in cases:
        k, beta = parameters(float(case["epsilon"]), float(case["delta"]))
        assert (k, beta) == (case["k"], case["beta"]), case


def test_a_smaller_delta_or_epsilon_asks_more():
    k1, b1 = parameters(1.0, 1e-5)
    k2, _ = parameters(1.0, 1e-7)
    k3, b3 = parameters(0.5, 1e-5)
    assert k2 > k1 and b3 < b1
    assert b1 == pytest.approx(1 - np.exp(-1.0), abs=1e-15)


def arx_loop(epsilon: float, delta: float) -> int:
    """k as ARX's ``ParameterCalculation`` loops to it: every k from 1, every n from
    ⌈k/γ - 1⌉ until the running maximum of the binomial tails exceeds the Chernoff bound, each
    tail summed term by term with math.lgamma."""
    beta = np.nextafter(1.0 - np.nextafter(np.exp(np.nextafter(-epsilon, 1)), 2), -1)
    gamma = (np.exp(epsilon) - 1.0 + beta) / np.exp(epsilon)
    exponent = gamma * np.log(gamma / beta) - (gamma - beta)

    def tail(n: int) -> float:
        return sum(
            np.exp(
                math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                + j * np.log(beta) + (n - j) * np.log1p(-beta)
            )
            for j in range(math.floor(n * gamma) + 1, n + 1)
        )  # fmt: skip

    k, delta_k = 1, math.inf
    while not delta_k < delta:
        n, worst, bound = math.ceil(k / gamma - 1.0), -math.inf, math.inf
        while worst <= bound:
            worst, bound = max(worst, tail(n)), np.exp(-n * exponent)
            n += 1
        delta_k, k = worst, k + 1
    return k


@pytest.mark.parametrize("epsilon", [0.2, 0.9, 1.0, 1.5])
@pytest.mark.parametrize("delta", [0.5, 0.05, 1e-3, 1e-5])
def test_k_equals_arxs_loop_over_every_class_size(epsilon, delta):
    assert parameters(epsilon, delta)[0] == arx_loop(epsilon, delta)


def test_a_drawn_seed_of_62_bits_is_kept_exactly():
    seed = 674_609_866_648_906_502  # above 2^53: a float would round it
    spec = {"model": "safepub", "epsilon": 1, "delta": 1e-5, "seed": seed}
    assert PrivacyModel.from_spec([spec]).criteria[0].seed == seed
    assert PrivacyModel.from_spec([{**spec, "seed": str(seed)}]).criteria[0].seed == seed


def test_a_delta_too_small_to_derive_k_is_refused_naming_the_smallest():
    # Near ε = 0 and for large ε the class sizes ARX's loop looks at grow without bound.
    for epsilon in (0.0001, 5.0):
        floor = smallest_delta(epsilon)
        with pytest.raises(EngineError, match=f"For ε={epsilon:g}, δ must be at least {floor:.3g}"):
            parameters(epsilon, floor / 10)
        k, _ = parameters(epsilon, floor * 1.01)
        assert k > 2
    with pytest.raises(EngineError, match="ε=10 is too large"):
        parameters(10.0, 1e-5)
    with pytest.raises(EngineError, match="δ must be at least 1e-100"):
        parameters(1.0, 1e-120)


@pytest.mark.parametrize("seed", [0, 11])
def test_data_independent_release_checked_with_pandas(adult, adult_hierarchies, seed):
    result = anonymize(
        adult, config(adult_hierarchies, LEVELS, epsilon=1, delta=1e-5, search_budget=0, seed=seed)
    )
    k, beta = parameters(1.0, 1e-5)
    report = result.report()["safepub"]
    assert (report["k"], report["beta"], report["seed"]) == (k, beta, seed)
    assert report["mode"] == "data-independent" and result.levels == LEVELS

    # The sample by the documented rule, generalized and counted with pandas.
    sampled = np.random.default_rng(seed).random(len(adult)) < beta
    assert report["sampled_rows"] == int(sampled.sum())
    generalized = generalize(adult, LEVELS)
    in_sample = generalized[sampled]
    sizes = in_sample.groupby(QIS).size()
    small = sizes[sizes < k]
    expected_rows = np.flatnonzero(sampled & ~generalized.set_index(QIS).index.isin(small.index))
    # Released: exactly the sampled rows of classes with at least k sampled rows.
    assert np.array_equal(np.sort(result.source_rows), expected_rows)
    assert result.suppressed == int(small.sum()) and result.suppressed > 0
    # The released rows are the input's rows, generalized.
    released = result.data[QIS].reset_index(drop=True)
    source = generalized.iloc[result.source_rows][QIS].reset_index(drop=True)
    pd.testing.assert_frame_equal(released.astype(str), source.astype(str))
    assert result.data.groupby(QIS).size().min() >= k
    check = result.models[0]["achieved"]
    assert check["smallest_class"] >= k and check["sampled_rows"] == report["sampled_rows"]


def test_sampling_rate_over_seeds_is_beta():
    # 200,000 rows per draw: the share's standard deviation is about 0.0011, so a tolerance of
    # 0.01 per draw (9 standard deviations) cannot flake; the mean of 20 draws is held tighter.
    beta = parameters(1.0, 1e-5)[1]
    shares = [sample_rows(200_000, beta, seed).mean() for seed in range(20)]
    assert all(abs(s - beta) < 0.01 for s in shares)
    assert abs(np.mean(shares) - beta) < 0.003
    assert len({round(s, 6) for s in shares}) > 15  # the seeds draw different samples


def test_a_seed_gives_the_same_release_and_another_a_different_sample(adult, adult_hierarchies):
    make = lambda seed: anonymize(  # noqa: E731
        adult, config(adult_hierarchies, epsilon=1, delta=1e-5, steps=10, seed=seed)
    )
    first, again, other = make(5), make(5), make(6)
    assert np.array_equal(first.source_rows, again.source_rows)
    assert first.levels == again.levels
    pd.testing.assert_frame_equal(first.data, again.data)
    assert not np.array_equal(first.source_rows, other.source_rows)


def test_data_dependent_search_spends_its_budget_and_suppresses_below_k(adult, adult_hierarchies):
    result = anonymize(adult, config(adult_hierarchies, epsilon=1, delta=1e-5, steps=12, seed=2))
    report = result.report()["safepub"]
    # ε_search (ARX's default 0.1) is taken from ε before k and β are derived.
    k, beta = parameters(np.nextafter(1.0 - 0.1, -np.inf), 1e-5)
    assert (report["k"], report["beta"], report["mode"]) == (k, beta, "data-dependent")
    assert report["epsilon_search"] == 0.1
    assert result.data.groupby(QIS).size().min() >= k
    generalized = generalize(adult, result.levels)
    sampled = np.random.default_rng(2).random(len(adult)) < beta
    sizes = generalized[sampled].groupby(QIS).size()
    assert result.suppressed == int(sizes[sizes < k].sum())
    assert result.candidates == []  # no optimum looked at outside the budget


def test_the_scheme_degree_gives_arxs_levels(adult, adult_hierarchies):
    result = anonymize(
        adult, config(adult_hierarchies, epsilon=2, delta=1e-6, degree="medium", seed=1)
    )
    heights = {q: adult_hierarchies[q].height for q in QIS}
    # ARX: Math.round(0.5 * (height - 1)), halves up.
    assert result.levels == {q: int(np.floor(0.5 * (h - 1) + 0.5)) for q, h in heights.items()}


@pytest.mark.parametrize("name", sorted(p.stem for p in RESULTS.glob("safepub-adult-*.json")))
def test_with_arxs_sample_the_release_is_arxs(adult, adult_hierarchies, name, monkeypatch):
    case = json.loads((RESULTS / f"{name}.json").read_text())
    arx = case["arx"]["runs"][0]
    shared = np.zeros(len(adult), dtype=bool)
    shared[arx["sample"]] = True
    monkeypatch.setattr(safepub_run, "sample_rows", lambda n, beta, seed: shared)
    result = anonymize(adult, config(adult_hierarchies, case.get("levels"), **case["safepub"]))
    assert result.safepub is not None
    assert (result.safepub["k"], result.safepub["beta"]) == (arx["k"], arx["beta"])
    assert result.levels == {q: arx["levels"][q] for q in QIS}
    assert result.safepub["sampled_rows"] == arx["sampled_rows"]
    assert result.suppressed == arx["suppressed"]
    assert len(result.classes) == arx["classes"]


@pytest.mark.parametrize(
    ("params", "levels", "subset", "message"),
    [
        ({"epsilon": 1, "delta": 1e-5, "search_budget": 1}, None, False, "must be below ε"),
        ({"epsilon": 1, "delta": 1e-5, "search_budget": 0}, None, False, "missing: age"),
        ({"epsilon": 1, "delta": 1e-5}, LEVELS, False, "search budget of 0"),
        ({"epsilon": 1, "delta": 2}, None, False, "δ must be"),
        ({"epsilon": 1, "delta": 1e-5}, None, True, "without a research subset"),
    ],
)
def test_bad_requests_are_refused_clearly(
    adult, adult_hierarchies, params, levels, subset, message
):
    with pytest.raises(EngineError, match=message):
        cfg = config(adult_hierarchies, levels, **params)
        if subset:
            cfg = replace(cfg, research_subset=ResearchSubset(np.ones(len(adult), dtype=bool)))
        anonymize(adult, cfg)


def test_command_line_writes_a_release_with_classes_of_k(tmp_path):
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    qis = [a for q in QIS for a in ("--qi", f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}")]
    levels = ",".join(f"{q}={v}" for q, v in LEVELS.items())
    status, stdout, stderr = call(
        [ADULT / "adult.csv", "--out", out, "--report", report, *qis, "--safepub", "1,0.00001",
         "--safepub-search-budget", "0", "--levels", levels, "--safepub-seed", "4"]
    )  # fmt: skip
    assert status == 0, stderr
    written = read_out(out, sep=";")
    k = parameters(1.0, 1e-5)[0]
    assert written.groupby(QIS).size().min() >= k
    summary = json.loads(report.read_text())
    assert summary["safepub"]["k"] == k and summary["safepub"]["seed"] == 4
    assert summary["safepub"]["sampled_rows"] == int(
        (np.random.default_rng(4).random(30162) < parameters(1.0, 1e-5)[1]).sum()
    )
    assert len(written) == summary["safepub"]["sampled_rows"] - summary["suppressed"]


def test_the_criterion_round_trips_and_describes_its_mode():
    c = SafePub(epsilon=1, delta=1e-5, degree="low")
    assert not c.data_dependent and c.epsilon_search == 0.0
    assert "data-independent" in c.describe()
    assert list(PrivacyModel.from_spec(PrivacyModel(criteria=[c]).to_spec()).criteria) == [c]
