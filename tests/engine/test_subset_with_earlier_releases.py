"""A research subset meets releases judged together.

In the engine, the joint classes with earlier releases are counted in the subset's rows only
(the population's other rows are not released); checked against pandas group-bys. The command
line does not judge a research subset together with earlier releases: the combination is
refused in one line, and the reproduction record of a subset's release names the subset's file
and SHA-256, and is refused as an earlier report rather than re-applied without its subset.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, PrivacyModel, anonymize
from releases.engine.cli import run
from releases.engine.criteria import EarlierReleases, KAnonymity
from releases.engine.cross_release import NOT_IN, release_membership
from releases.engine.reproduction import record
from releases.engine.subset import ResearchSubset

QIS = ["age", "zip", "sex", "marital"]
LEVELS = {"age": 2, "zip": 2, "sex": 0, "marital": 1}
K = 3


@pytest.fixture(scope="module")
def setting(table_factory):
    data, hierarchies, _ = table_factory(21, n=400)
    rows = np.random.default_rng(3).random(len(data)) < 0.5
    # The earlier release: classes of age in 10-year bands and marital status; the rows of
    # zip 15001 left out of it.
    earlier = (
        pd.DataFrame({"age": data["age"].map(hierarchies["age"].mapping(1)), "m": data["marital"]})
        .groupby(["age", "m"], sort=False)
        .ngroup()
        .where(data["zip"] != "15001", -1)
        .to_numpy()
    )
    return data, hierarchies, rows, earlier


def expected_release(data, hierarchies, in_rows: np.ndarray, earlier: np.ndarray) -> np.ndarray:
    """Per input row, released or not at LEVELS, counting classes and joint classes in the rows
    ``in_rows`` marks (pandas group-bys)."""
    gen = pd.DataFrame({q: data[q].map(hierarchies[q].mapping(lv)) for q, lv in LEVELS.items()})
    cls = gen.groupby(QIS, sort=False).ngroup().to_numpy()
    frame = pd.DataFrame({"cls": cls[in_rows], "earlier": earlier[in_rows]})
    sizes = frame.groupby("cls").size()
    smallest = frame.groupby(["cls", "earlier"]).size().groupby(level="cls").min()
    good = set(sizes.index[(sizes >= K) & (smallest.reindex(sizes.index) >= K)])
    return in_rows & np.isin(cls, list(good))


def config_of(hierarchies, rows, earlier) -> AnonymizationConfig:
    return AnonymizationConfig(
        quasi_identifiers={q: hierarchies[q] for q in QIS},
        model=PrivacyModel(criteria=[KAnonymity(k=K), EarlierReleases(k=K)], suppression_limit=1.0),
        levels=dict(LEVELS),
        research_subset=ResearchSubset(rows),
        earlier_releases={"earlier": earlier},
    )


def test_joint_classes_are_counted_in_the_subset_rows(setting):
    data, hierarchies, rows, earlier = setting
    result = anonymize(data, config_of(hierarchies, rows, earlier))
    released = np.zeros(len(data), dtype=bool)
    released[np.asarray(result.source_rows)] = True
    expected = expected_release(data, hierarchies, rows, earlier)
    assert released.sum() > 0
    assert (released == expected).all()
    # Counting the whole population's rows would release other rows: the subset matters.
    population_counted = expected_release(data, hierarchies, np.ones_like(rows), earlier) & rows
    assert (population_counted != expected).any()
    # Every joint class of the released rows with the earlier release holds k rows.
    joint = pd.DataFrame(
        {
            **{q: result.data[q].to_numpy() for q in QIS},
            "earlier": earlier[np.asarray(result.source_rows)],
        }
    )
    assert joint.groupby([*QIS, "earlier"]).size().min() >= K


def test_a_subset_release_is_re_applied_to_its_rows_only(setting):
    data, hierarchies, rows, earlier = setting
    config = config_of(hierarchies, rows, earlier)
    membership = release_membership(data, config)
    released = np.zeros(len(data), dtype=bool)
    released[np.asarray(anonymize(data, config).source_rows)] = True
    assert ((membership != NOT_IN) == released).all()
    assert (membership[~rows] == NOT_IN).all()


# ---------------------------------------------------------------------------- command line


def call(argv: list) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run([str(a) for a in argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture()
def files(tmp_path, setting) -> tuple[Path, Path]:
    data, _, rows, _ = setting
    population, subset = tmp_path / "population.csv", tmp_path / "subset.csv"
    data.to_csv(population, index=False)
    data[rows].to_csv(subset, index=False)
    return population, subset


def release(tmp_path: Path, population: Path, name: str, *extra) -> tuple[int, str]:
    argv = [population, "--out", tmp_path / f"{name}.csv", "--report", tmp_path / f"{name}.json"]
    status, _, stderr = call([*argv, "--qi", "age", "zip", "sex", "--suppression-limit", "0.1",
                              *extra])  # fmt: skip
    return status, stderr


@pytest.mark.parametrize("protect", [[], ["--protect-earlier"]])
def test_a_research_subset_with_earlier_reports_is_refused(tmp_path, files, protect):
    population, subset = files
    assert release(tmp_path, population, "first", "--k", "3")[0] == 0
    status, stderr = release(
        tmp_path, population, "second", "--k", "3", "--research-subset", subset,
        "--earlier-report", tmp_path / "first.json", *protect,
    )  # fmt: skip
    assert status == 2 and stderr.count("\n") == 1 and stderr.startswith("anonymize: error:")
    assert "--research-subset cannot be combined with --earlier-report" in stderr
    assert not (tmp_path / "second.csv").exists() and not (tmp_path / "second.json").exists()


def test_the_record_names_the_subset_and_is_not_re_applied(tmp_path, files, setting):
    population, subset = files
    status, stderr = release(tmp_path, population, "study", "--k-map", "3",
                             "--research-subset", subset)  # fmt: skip
    assert status == 0, stderr
    report = json.loads((tmp_path / "study.json").read_text())
    recorded = report["reproduction"]["research_subset"]
    assert recorded["sha256"] == hashlib.sha256(subset.read_bytes()).hexdigest()
    assert Path(recorded["file"]) == subset.resolve()
    assert (
        report["reproduction"]["input_sha256"]
        == hashlib.sha256(population.read_bytes()).hexdigest()
    )
    # Re-applied without its subset, the release would hold other rows: refused.
    status, stderr = release(tmp_path, population, "next", "--k", "3",
                             "--earlier-report", tmp_path / "study.json")  # fmt: skip
    assert status == 2 and stderr.count("\n") == 1
    assert "released a research subset" in stderr and str(tmp_path / "study.json") in stderr
    assert not (tmp_path / "next.csv").exists()
    # A release without a subset records none.
    assert release(tmp_path, population, "plain", "--k", "3")[0] == 0
    plain = json.loads((tmp_path / "plain.json").read_text())
    assert plain["reproduction"]["research_subset"] is None


def test_a_record_of_a_subset_release_needs_the_subset_file(setting):
    _, hierarchies, rows, earlier = setting
    config = config_of(hierarchies, rows, earlier)
    with pytest.raises(EngineError, match="needs the subset's file"):
        record(config, {}, "0" * 64, len(rows), LEVELS, "optimal", 1, QIS, 10)
