"""The heuristic search (ARX's Lightning): on lattices small enough for the optimal search it
finds the optimum when given room, its releases always satisfy the model (checked on the
written rows with plain pandas), a tiny limit still gives a valid release, and bad limits are
refused with one clear sentence."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, Hierarchy, PrivacyModel, anonymize
from releases.engine.cli import run
from tests.engine.conftest import make_table

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from generate_wide import QUASI_IDENTIFIERS as WIDE_QIS  # noqa: E402
from generate_wide import generate as generate_wide  # noqa: E402

QIS = ["age", "zip", "sex", "marital"]


def _config(hierarchies, model, algorithm="heuristic", **limits) -> AnonymizationConfig:
    return AnonymizationConfig(
        {q: hierarchies[q] for q in QIS},
        model,
        sensitive=["disease"],
        identifiers=["name"],
        algorithm=algorithm,
        **limits,
    )


def _smallest_class(data: pd.DataFrame, qis: list[str]) -> int:
    """The smallest group of released rows with equal quasi-identifiers (plain pandas)."""
    return int(data.groupby(qis, dropna=False).size().min())


MODELS = {
    "k=5, 5 %": lambda: PrivacyModel(k=5, suppression_limit=0.05),
    "k=3, none": lambda: PrivacyModel(k=3, suppression_limit=0.0),
    "k=2, 2-diversity, 10 %": lambda: PrivacyModel(k=2, l=2, suppression_limit=0.1),
}


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", list(MODELS))
def test_with_room_it_finds_the_optimal_searchs_transformation(seed, name):
    data, hierarchies, _ = make_table(seed)
    optimal = anonymize(data, _config(hierarchies, MODELS[name](), algorithm="optimal"))
    found = anonymize(data, _config(hierarchies, MODELS[name](), time_limit=600.0))
    assert found.algorithm == "heuristic"
    assert found.search["proven_optimal"] is True
    assert found.search["stopped"] == "exhausted"
    assert found.levels == optimal.levels
    assert found.metrics["loss"] == pytest.approx(optimal.metrics["loss"], abs=1e-12)
    assert found.suppressed == optimal.suppressed
    assert found.search["loss_gap"] == 0.0
    assert found.search["statement"].startswith("Proven optimal")


@pytest.mark.parametrize("steps", [1, 5, 25])
def test_a_step_limit_returns_a_valid_release_and_states_the_gap(steps):
    data, hierarchies, _ = make_table(4, n=600)
    model = PrivacyModel(k=6, suppression_limit=0.02)
    optimal = anonymize(data, _config(hierarchies, model, algorithm="optimal"))
    found = anonymize(data, _config(hierarchies, model, step_limit=steps))
    # The written rows: k on the released values, the suppression within the limit.
    assert _smallest_class(found.data, QIS) >= 6
    assert len(data) - len(found.data) <= int(0.02 * len(data))
    assert "name" not in found.data.columns
    search = found.search
    assert search["step_limit"] == steps
    assert search["proven_optimal"] is False
    # The optimum is known (the lattice is small): the gap is stated against it.
    assert search["optimum_known"] is True
    assert search["optimum_loss"] == pytest.approx(optimal.metrics["loss"], abs=1e-12)
    gap = found.metrics["loss"] - optimal.metrics["loss"]
    assert gap >= -1e-12
    assert search["loss_gap"] == pytest.approx(max(gap, 0.0), abs=1e-12)
    assert ("Not optimal" in search["statement"]) == (search["loss_gap"] > 0)


def test_a_tiny_time_limit_still_returns_a_valid_release():
    data, hierarchies, _ = make_table(5, n=800)
    model = PrivacyModel(k=10, suppression_limit=0.01)
    found = anonymize(data, _config(hierarchies, model, time_limit=1e-9))
    assert _smallest_class(found.data, QIS) >= 10
    assert len(data) - len(found.data) <= int(0.01 * len(data))
    assert found.search["proven_optimal"] is False
    assert found.search["stopped"].startswith("time limit")


def test_the_same_step_limit_gives_the_same_result():
    data, hierarchies, _ = make_table(6)
    model = PrivacyModel(k=4, suppression_limit=0.05)
    first = anonymize(data, _config(hierarchies, model, step_limit=12))
    second = anonymize(data, _config(hierarchies, model, step_limit=12))
    assert first.levels == second.levels
    assert first.search["steps"] == second.search["steps"]
    assert first.data.equals(second.data)


def test_twenty_quasi_identifiers_beyond_the_optimal_search(tmp_path):
    generate_wide(tmp_path, rows=1500, seed=3)
    data = pd.read_csv(tmp_path / "wide.csv", sep=";", dtype=str, keep_default_na=False)
    hierarchies = {
        q: Hierarchy.from_arx_csv(tmp_path / f"wide_hierarchy_{q}.csv", attribute=q)
        for q in WIDE_QIS
    }
    config = AnonymizationConfig(
        hierarchies,
        PrivacyModel(k=3, suppression_limit=0.05),
        algorithm="heuristic",
        step_limit=150,
    )
    found = anonymize(data, config)
    assert _smallest_class(found.data, WIDE_QIS) >= 3
    assert len(data) - len(found.data) <= int(0.05 * len(data))
    assert found.search["optimum_known"] is False
    assert "optimum is not known" in found.search["statement"]
    # The released values are the hierarchies' values at the reported levels.
    for q in WIDE_QIS:
        level = found.levels[q]
        allowed = {row[level] for row in hierarchies[q].rows} | {"*"}
        assert set(found.data[q]) <= allowed


@pytest.mark.parametrize(
    ("limits", "algorithm", "expected"),
    [
        ({}, "heuristic", "needs a time limit"),
        ({"time_limit": -1.0}, "heuristic", "time limit must be a positive number"),
        ({"time_limit": float("nan")}, "heuristic", "time limit must be a positive number"),
        ({"step_limit": 0}, "heuristic", "step limit must be a whole number of 1 or more"),
        ({"step_limit": 5}, "optimal", "step limit applies to the heuristic search only"),
        ({"time_limit": 5.0, "levels": {"age": 1}}, "heuristic", "Fixed levels apply"),
    ],
)
def test_bad_limits_are_refused_clearly(limits, algorithm, expected):
    data, hierarchies, _ = make_table(1, n=100)
    with pytest.raises(EngineError, match=expected):
        anonymize(data, _config(hierarchies, PrivacyModel(k=2), algorithm=algorithm, **limits))


def _call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run([str(a) for a in argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def test_cli_heuristic_writes_a_k_anonymous_extract_and_states_the_search(tmp_path):
    data, _, _ = make_table(8, n=500)
    source = tmp_path / "in.csv"
    data.to_csv(source, index=False)
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    status, stdout, stderr = _call(
        [source, "--out", out, "--report", report, "--qi", "age", "--qi", "zip", "--qi", "sex"]
        + ["--identifier", "name", "--k", "5", "--suppression-limit", "0.05"]
        + ["--algorithm", "heuristic", "--time-limit", "60"]
    )
    assert status == 0, stderr
    released = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert _smallest_class(released, ["age", "zip", "sex"]) >= 5
    summary = json.loads(report.read_text())
    assert summary["algorithm"] == "heuristic"
    assert summary["search"]["time_limit"] == 60.0
    assert summary["search"]["proven_optimal"] is True
    assert "heuristic search" in stdout and "Proven optimal" in stdout


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--algorithm", "heuristic"], "needs --time-limit"),
        (["--time-limit", "5"], "--time-limit applies to --algorithm heuristic only"),
        (["--algorithm", "heuristic", "--time-limit", "0"], "positive number of seconds"),
        (["--algorithm", "heuristic", "--time-limit", "soon"], "--time-limit"),
        (["--algorithm", "heuristic", "--step-limit", "-3"], "step limit"),
    ],
)
def test_cli_limit_errors_exit_2_with_one_line(tmp_path, extra, expected):
    data, _, _ = make_table(9, n=60)
    source = tmp_path / "in.csv"
    data.to_csv(source, index=False)
    out = tmp_path / "out.csv"
    status, _, stderr = _call([source, "--out", out, "--qi", "age", "--k", "2", *extra])
    assert status == 2
    assert stderr.count("\n") == 1 and stderr.startswith("anonymize: error:")
    assert expected in stderr
    assert not out.exists()
