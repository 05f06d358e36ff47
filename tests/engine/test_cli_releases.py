"""The command line judges releases together: ``--earlier-report``, ``--protect-earlier``,
``--attacker-file``, the reproduction record and the seeded row order.

Each release is rebuilt here from the input with ``Series.map`` on the hierarchy levels the
report names and a pandas group-by; the written extract must hold exactly those rows, and the
joint classes and the linkage are counted on them independently of the engine.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from releases.engine import Hierarchy
from releases.engine.cli import main
from releases.engine.export import write_csv
from releases.engine.reproduction import Reproduction
from releases.engine.shuffle import order_keys
from tests.conftest import ADULT

ROOT = Path(__file__).resolve().parents[2]
QIS = ["age", "education", "sex", "race", "marital-status"]
INPUT = ADULT / "adult.csv"
FIRST = "age=1,education=3,sex=0,race=0,marital-status=0"
SECOND = "age=4,education=0,sex=0,race=0,marital-status=0"


@pytest.fixture(scope="module")
def hierarchies() -> dict[str, Hierarchy]:
    return {
        q: Hierarchy.from_arx_csv(ADULT / f"adult_hierarchy_{q}.csv", attribute=q)
        for q in [*QIS, "native-country"]
    }


def qi_args(folder: Path = ADULT) -> list[str]:
    return ["--qi", *[f"{q}={folder / f'adult_hierarchy_{q}.csv'}" for q in QIS]]


def anonymize(tmp_path: Path, name: str, *extra: str, source: Path = INPUT, qis=None) -> int:
    return main(
        [
            str(source),
            "--out",
            str(tmp_path / f"{name}.csv"),
            "--report",
            str(tmp_path / f"{name}.json"),
            *(qis or qi_args()),
            "--k",
            "5",
            "--suppression-limit",
            "0.05",
            *extra,
        ]
    )


def written(tmp_path: Path, name: str) -> tuple[pd.DataFrame, dict]:
    data = pd.read_csv(tmp_path / f"{name}.csv", sep=";", dtype=str, keep_default_na=False)
    return data, json.loads((tmp_path / f"{name}.json").read_text())


def generalized(adult: pd.DataFrame, hierarchies, levels: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame({q: adult[q].map(hierarchies[q].mapping(lv)) for q, lv in levels.items()})


def classes_of(adult, hierarchies, levels, fails=None) -> pd.Series:
    """Per input row, its class at ``levels``; -1 for the rows of classes smaller than 5 (or of
    the classes ``fails`` flags)."""
    cls = generalized(adult, hierarchies, levels).groupby(list(levels), sort=False).ngroup()
    bad = cls.map(cls.value_counts()) < 5
    if fails is not None:
        bad |= fails(cls)
    return cls.where(~bad, -1)


def joint_sizes(new: pd.Series, earlier: pd.Series) -> pd.Series:
    frame = pd.DataFrame({"new": new.to_numpy(), "earlier": earlier.to_numpy()})
    return frame[frame["new"] >= 0].groupby(["new", "earlier"]).size()


def same_rows(extract: pd.DataFrame, adult, hierarchies, levels, cls: pd.Series) -> bool:
    """Whether the written extract holds exactly the rows ``cls`` keeps, generalized."""
    expected = generalized(adult, hierarchies, levels)[cls >= 0]
    expected = pd.concat([expected, adult.loc[cls >= 0].drop(columns=QIS)], axis=1)
    columns = list(extract.columns)
    return (
        expected[columns]
        .value_counts()
        .sort_index()
        .equals(extract[columns].value_counts().sort_index())
    )


def test_complementary_extracts_are_reported_together(tmp_path, adult, hierarchies, capsys):
    assert anonymize(tmp_path, "first", "--levels", FIRST, "--seed", "1") == 0
    assert (
        anonymize(
            tmp_path, "second", "--levels", SECOND, "--earlier-report", str(tmp_path / "first.json")
        )
        == 0
    )
    captured = capsys.readouterr()
    first, _ = written(tmp_path, "first")
    second, report = written(tmp_path, "second")
    levels = {n: dict(written(tmp_path, n)[1]["levels"]) for n in ("first", "second")}
    ours = {n: classes_of(adult, hierarchies, levels[n]) for n in levels}
    for name, data in (("first", first), ("second", second)):
        assert data.groupby(QIS).size().min() >= 5  # each 5-anonymous on its own
        assert same_rows(data, adult, hierarchies, levels[name], ours[name])
    expected = joint_sizes(ours["second"], ours["first"])
    [entry] = report["cross_release"]
    assert entry["earlier_report"] == str(tmp_path / "first.json")
    assert entry["joint_classes"] == len(expected)
    assert entry["smallest_joint_class"] == expected.min() == 1
    assert entry["rows_below_k"] == int(expected[expected < 5].sum()) > 0
    assert entry["passed"] is False
    evidence = entry["evidence"]
    assert set(evidence["unchanged"]) == {
        "sex",
        "race",
        "marital-status",
        "native-country",
        "workclass",
        "occupation",
        "salary-class",
    }
    assert evidence["quasi_identifiers"] == [c for c in second.columns if c in QIS]
    assert "Rows can be linked across the two extracts" in report["cross_release_assumption"]
    assert f"{entry['rows_below_k']} rows are in joint classes smaller than k=5" in captured.err


def _entropy_l_and_t(classes: pd.Series, values: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Per class (rows with class -1 left out), its entropy l and equal-distance t."""
    frame = pd.DataFrame({"c": classes.to_numpy(), "s": values.to_numpy()})
    frame = frame[frame["c"] >= 0]
    shares = frame.groupby("c")["s"].value_counts(normalize=True)
    entropy_l = np.exp(-(shares * np.log(shares)).groupby(level=0).sum())
    overall = values.value_counts(normalize=True)
    table = shares.unstack(fill_value=0.0).reindex(columns=overall.index, fill_value=0.0)
    return entropy_l, 0.5 * (table - overall).abs().sum(axis=1)


def test_l_and_t_of_the_joint_classes(tmp_path, adult, hierarchies, capsys):
    assert anonymize(tmp_path, "first", "--levels", FIRST) == 0
    extra = ["--sensitive", "occupation", "--l", "2", "--l-variant", "entropy", "--t", "0.6"]
    assert (
        anonymize(tmp_path, "second", *extra, "--earlier-report", str(tmp_path / "first.json")) == 0
    )
    first = classes_of(adult, hierarchies, written(tmp_path, "first")[1]["levels"])
    data, report = written(tmp_path, "second")

    def fails_l_or_t(cls: pd.Series) -> pd.Series:
        entropy_l, t = _entropy_l_and_t(cls, adult["occupation"])
        return cls.map((entropy_l < 2 * (1 - 1e-9)) | (t > 0.6 + 1e-9))

    second = classes_of(adult, hierarchies, report["levels"], fails_l_or_t)
    assert same_rows(data, adult, hierarchies, report["levels"], second)
    frame = pd.DataFrame({"new": second, "earlier": first})
    joint = frame.groupby(["new", "earlier"]).ngroup().where(second >= 0, -1)
    entropy_l, t = _entropy_l_and_t(joint, adult["occupation"])
    distinct = adult["occupation"][joint >= 0].groupby(joint[joint >= 0]).nunique()
    [entry] = report["cross_release"]
    assert entry["l"] == {"occupation": distinct.min()}
    assert entry["entropy_l"]["occupation"] == pytest.approx(entropy_l.min())
    assert entry["t"]["occupation"] == pytest.approx(t.max())
    assert (entry["l_required"], entry["t_required"]) == (2, 0.6)
    assert entry["passed"] is False and entropy_l.min() < 2
    assert "a joint class has l=1 of occupation, l=2 asked" in capsys.readouterr().err


def test_the_protected_search_is_safe_with_the_earlier_extract(tmp_path, adult, hierarchies):
    assert anonymize(tmp_path, "first", "--levels", FIRST) == 0
    earlier_report = str(tmp_path / "first.json")
    assert anonymize(tmp_path, "plain", "--earlier-report", earlier_report) == 0
    assert anonymize(tmp_path, "safe", "--earlier-report", earlier_report, "--protect-earlier") == 0
    first = classes_of(adult, hierarchies, written(tmp_path, "first")[1]["levels"])
    plain = written(tmp_path, "plain")[1]
    safe_data, safe = written(tmp_path, "safe")
    assert plain["cross_release"][0]["rows_below_k"] > 0  # the optimum alone is not safe
    assert safe["levels"] != plain["levels"]
    # The report names the earlier release that constrained the search.
    assert safe["protection"] == {
        "unprotected_levels": plain["levels"],
        "constrained_by": [earlier_report],
    }

    # The protected extract, rebuilt: classes smaller than 5, and classes holding a joint class
    # smaller than 5 with the earlier extract, are suppressed.
    def small_joint(cls: pd.Series) -> pd.Series:
        joint = cls.groupby([cls, first]).transform("size")
        return (joint < 5).groupby(cls).transform("any")

    ours = classes_of(adult, hierarchies, safe["levels"], small_joint)
    assert same_rows(safe_data, adult, hierarchies, safe["levels"], ours)
    assert joint_sizes(ours, first).min() >= 5
    entry = safe["cross_release"][0]
    assert entry["rows_below_k"] == 0 and entry["smallest_joint_class"] >= 5
    assert {"model": "earlier-releases", "k": 5} in safe["privacy_model"]["criteria"]
    # The record of the protected release carries the earlier one's, to be re-applied later.
    assert safe["reproduction"]["earlier"][0]["levels"] == written(tmp_path, "first")[1]["levels"]
    assert anonymize(tmp_path, "third", "--earlier-report", str(tmp_path / "safe.json")) == 0
    third = written(tmp_path, "third")[1]["cross_release"][0]
    second_classes = classes_of(adult, hierarchies, written(tmp_path, "third")[1]["levels"])
    assert third["joint_classes"] == len(joint_sizes(second_classes, ours))


def test_the_report_records_what_reproduces_the_release(tmp_path):
    assert anonymize(tmp_path, "one", "--seed", "42") == 0
    _, report = written(tmp_path, "one")
    record = report["reproduction"]
    assert record["input_sha256"] == hashlib.sha256(INPUT.read_bytes()).hexdigest()
    assert record["input_rows"] == 30162 and record["seed"] == 42
    age = next(h for h in record["quasi_identifiers"] if h["column"] == "age")
    path = ADULT / "adult_hierarchy_age.csv"
    assert Path(age["hierarchy"]) == path.resolve()
    assert age["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert record["levels"] == report["levels"] and record["suppression_limit"] == 0.05
    assert record["privacy_model"]["criteria"] == [{"model": "k-anonymity", "k": 5}]
    assert record["rows_out"] == report["rows_out"]


def test_rows_are_written_in_the_seeded_order(tmp_path, adult, hierarchies):
    assert anonymize(tmp_path, "a", "--seed", "7") == 0
    assert anonymize(tmp_path, "b", "--seed", "7") == 0
    assert anonymize(tmp_path, "c") == 0
    same = (tmp_path / "a.csv").read_bytes()
    assert same == (tmp_path / "b.csv").read_bytes()
    drawn = written(tmp_path, "c")[1]["reproduction"]["seed"]
    assert isinstance(drawn, int) and drawn >= 0
    assert anonymize(tmp_path, "d", "--seed", str(drawn)) == 0
    assert (tmp_path / "c.csv").read_bytes() == (tmp_path / "d.csv").read_bytes()
    # Not the input's order: the released rows ordered by the keyed hash of their input
    # positions (what the seed keys), as the record says.
    data, report = written(tmp_path, "a")
    assert report["reproduction"]["row_order"] == "keyed-hash"
    cls = classes_of(adult, hierarchies, report["levels"])
    in_order = generalized(adult, hierarchies, report["levels"])[cls >= 0]
    in_order = pd.concat([in_order, adult.loc[cls >= 0].drop(columns=QIS)], axis=1)
    in_order = in_order[list(data.columns)].reset_index(drop=True)
    positions = np.flatnonzero(cls >= 0)
    keyed = np.argsort(order_keys(7, positions), kind="stable")
    assert data.equals(in_order.iloc[keyed].reset_index(drop=True))
    assert not data.equals(in_order)
    # A release made before the keyed hash (numpy's permutation of the released rows, its
    # record without a row order) is written again byte for byte with --row-order permutation,
    # in memory; the record says so.
    assert anonymize(tmp_path, "old", "--seed", "7", "--row-order", "permutation") == 0
    old, old_report = written(tmp_path, "old")
    assert old_report["reproduction"]["row_order"] == "permutation"
    drawn_order = np.random.default_rng(7).permutation(len(in_order))
    assert old.equals(in_order.iloc[drawn_order].reset_index(drop=True))
    before = io.BytesIO()
    write_csv(in_order.iloc[drawn_order].reset_index(drop=True), before, ";")
    assert (tmp_path / "old.csv").read_bytes() == before.getvalue()
    # A record from before the row order was recorded reads as the permutation.
    record = {k: v for k, v in old_report["reproduction"].items() if k != "row_order"}
    assert Reproduction.from_dict(record).row_order == "permutation"


def test_another_input_is_refused_in_one_line_and_nothing_is_written(tmp_path, adult, capsys):
    assert anonymize(tmp_path, "first") == 0
    other = tmp_path / "other.csv"
    adult.iloc[:-1].to_csv(other, sep=";", index=False)
    capsys.readouterr()
    status = anonymize(
        tmp_path, "second", "--earlier-report", str(tmp_path / "first.json"), source=other
    )
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1
    assert "was made from another input" in err and str(tmp_path / "first.json") in err
    assert not (tmp_path / "second.csv").exists() and not (tmp_path / "second.json").exists()


def test_a_changed_hierarchy_file_is_refused(tmp_path, capsys):
    folder = tmp_path / "h"
    folder.mkdir()
    for q in QIS:
        shutil.copy(ADULT / f"adult_hierarchy_{q}.csv", folder)
    assert anonymize(tmp_path, "first", qis=qi_args(folder)) == 0
    age = folder / "adult_hierarchy_age.csv"
    age.write_text(age.read_text().replace("0-4", "0-04"))
    capsys.readouterr()
    assert anonymize(tmp_path, "second", "--earlier-report", str(tmp_path / "first.json")) == 2
    assert "hierarchy file of 'age'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--protect-earlier"], "--protect-earlier needs at least one --earlier-report"),
        (["--seed", "-1"], "--seed must be a whole number of at least 0"),
        (["--earlier-report", "missing.json"], "cannot read missing.json"),
    ],
)
def test_option_errors(tmp_path, capsys, extra, message):
    assert anonymize(tmp_path, "x", *extra) == 2
    assert message in capsys.readouterr().err


def test_a_report_without_a_reproduction_record_is_refused(tmp_path, capsys):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"levels": {}}))
    assert anonymize(tmp_path, "x", "--earlier-report", str(old)) == 2
    assert "has no reproduction record" in capsys.readouterr().err


def test_the_attacker_file_is_linked_to_the_extract(tmp_path, adult, hierarchies):
    known = ["age", "sex", "race", "native-country", "workclass"]
    attacker = adult.sample(3000, random_state=0)[known]
    attacker.insert(0, "name", [f"person {i}" for i in range(len(attacker))])
    path = tmp_path / "voters.parquet"
    attacker.to_parquet(path, index=False)
    assert anonymize(tmp_path, "e", "--attacker-file", str(path)) == 0
    data, report = written(tmp_path, "e")
    levels = report["levels"]
    ours = attacker[known].copy()
    for q in ("age", "sex", "race"):
        ours[q] = ours[q].map(hierarchies[q].mapping(levels[q]))
    counts = data[known].value_counts().rename("m").reset_index()
    m = ours.merge(counts, on=known, how="left")["m"].fillna(0)
    linkage = report["linkage"]
    assert linkage["attacker_records"] == 3000
    assert sorted(linkage["matched_columns"]) == sorted(known)
    assert linkage["matched_none"] == int((m == 0).sum())
    assert linkage["matched_one"] == int((m == 1).sum()) > 0
    assert linkage["matched_below_k"] == int(((m > 0) & (m < 5)).sum())
    assert linkage["expected_reidentifications"] == pytest.approx((1 / m[m > 0]).sum())


@pytest.mark.process
def test_the_command_as_typed(tmp_path, adult):
    def manage(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", "anonymize", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )

    common = [*qi_args(), "--k", "5", "--suppression-limit", "0.05"]
    first = manage(
        str(INPUT),
        "--out",
        str(tmp_path / "1.csv"),
        "--report",
        str(tmp_path / "1.json"),
        *common,
        "--levels",
        FIRST,
    )
    assert first.returncode == 0, first.stderr
    voters = tmp_path / "voters.csv"
    adult.sample(500, random_state=1)[["age", "sex", "workclass"]].to_csv(voters, index=False)
    second = manage(
        str(INPUT),
        "--out",
        str(tmp_path / "2.csv"),
        "--report",
        str(tmp_path / "2.json"),
        *common,
        "--earlier-report",
        str(tmp_path / "1.json"),
        "--protect-earlier",
        "--attacker-file",
        str(voters),
        "--seed",
        "3",
    )
    assert second.returncode == 0, second.stderr
    report = json.loads((tmp_path / "2.json").read_text())
    assert report["cross_release"][0]["rows_below_k"] == 0
    assert report["linkage"]["attacker_records"] == 500
    assert report["reproduction"]["seed"] == 3
    assert "joint classes" in second.stdout and "attacker file" in second.stdout
    other = tmp_path / "other.csv"
    adult.iloc[:100].to_csv(other, sep=";", index=False)
    refused = manage(
        str(other),
        "--out",
        str(tmp_path / "3.csv"),
        *common,
        "--earlier-report",
        str(tmp_path / "1.json"),
    )
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "was made from another input" in refused.stderr
    assert not (tmp_path / "3.csv").exists()


def test_the_engine_draws_the_same_order_as_the_web_package():
    from releases.engine.shuffle import permutation
    from releases.requests import package

    frame = pd.DataFrame({"a": range(1000)})
    for seed in (0, 7, 2**61 + 5):
        assert (permutation(len(frame), seed) == package.shuffle(frame, seed)).all()
    assert not (permutation(1000, 1) == permutation(1000, 2)).all()
