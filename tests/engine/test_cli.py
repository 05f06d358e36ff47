"""The anonymize command line: files in, files out, one-line errors with status 2."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from releases.engine.cli import run
from releases.engine.export import neutralise_formulas
from tests.support import pycanon

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT / "tests" / "data" / "adult"


def people(n: int = 600, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "name": [f"Person {i}" for i in range(n)],
            "age": rng.integers(20, 70, n).astype(str),
            "city": rng.choice(["Lyon", "Paris", "Nice", "Metz", "Brest"], n),
            "sex": rng.choice(["F", "M"], n),
            "diagnosis": rng.choice(["flu", "cold", "asthma", "ulcer"], n),
            "note": rng.choice(["=1+1", "-5", "@x", "ok"], n),
        }
    )


def write_csv(df: pd.DataFrame, path: Path, sep: str = ",", encoding: str = "utf-8") -> Path:
    df.to_csv(path, sep=sep, index=False, encoding=encoding)
    return path


def read_out(path: Path, sep: str = ",") -> pd.DataFrame:
    return pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False)


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run([str(a) for a in argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.pycanon
@pytest.mark.parametrize("algorithm", ["optimal", "mondrian"])
def test_success_writes_a_k_anonymous_extract_and_a_report(tmp_path, algorithm):
    src = people()
    inp = write_csv(src, tmp_path / "in.csv")
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    status, stdout, stderr = call(
        [
            inp,
            "--out",
            out,
            "--report",
            rep,
            "--qi",
            "age",
            "city",
            "--qi",
            "sex",
            "--identifier",
            "name",
            "--sensitive",
            "diagnosis",
            "--k",
            "10",
            "--l",
            "2",
            "--suppression-limit",
            "0.05",
            "--algorithm",
            algorithm,
        ]
    )
    assert (status, stderr) == (0, "")
    assert "rows released" in stdout
    res = read_out(out)
    assert list(res.columns) == ["age", "city", "sex", "diagnosis", "note"]  # name dropped
    measured = pycanon.measure(out, ["age", "city", "sex"], ["diagnosis"], ("k", "l"))
    assert measured["k"] >= 10
    assert measured["l"] >= 2
    assert res.groupby(["age", "city", "sex"]).size().min() >= 10
    assert res.groupby(["age", "city", "sex"])["diagnosis"].nunique().min() >= 2
    report = json.loads(rep.read_text())
    assert report["algorithm"] == algorithm
    assert report["rows_in"] == len(src) and report["rows_out"] == len(res)
    assert report["achieved"]["k"] == res.groupby(["age", "city", "sex"]).size().min()
    assert report["rows_out"] >= 0.95 * len(src)
    # formula-looking cells are neutralised, plain numbers are not
    assert set(res["note"]) <= {"'=1+1", "-5", "'@x", "ok"}
    assert "'=1+1" in set(res["note"])
    # no temporary files left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.csv", "report.json"]


def _splitmix64(x: int) -> int:
    mask = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


@pytest.mark.pycanon
def test_hierarchy_file_semicolons_and_unnamed_columns_unchanged(tmp_path):
    adult = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    small = adult.iloc[:3000].copy()
    small.insert(0, "rid", [str(i) for i in range(len(small))])  # not named: kept as is
    inp = write_csv(small, tmp_path / "adult.csv", sep=";")
    out = tmp_path / "out.csv"
    status, _, err = call(
        [
            inp,
            "--out",
            out,
            "--qi",
            f"age={ADULT / 'adult_hierarchy_age.csv'}",
            f"education={ADULT / 'adult_hierarchy_education.csv'}",
            "--k",
            "5",
            "--suppression-limit",
            "0.02",
            "--seed",
            "11",
        ]
    )
    assert status == 0, err
    res = read_out(out, sep=";")  # the input's delimiter is kept
    assert pycanon.measure(out, ["age", "education"], sep=";")["k"] >= 5
    assert res.groupby(["age", "education"]).size().min() >= 5
    assert len(res) >= 0.98 * len(small)
    # Rows are written in the order the seed gives: by the keyed hash of each row's input
    # position (SplitMix64 of SplitMix64(11) XOR the position, written here in Python
    # integers), not in the input's order.
    key = _splitmix64(11)
    released = res["rid"].astype(int).tolist()
    assert released == sorted(released, key=lambda row: _splitmix64(key ^ row))
    assert not res["rid"].astype(int).is_monotonic_increasing
    # Rows keep their unnamed columns; each released age is an ancestor of the original age
    # in the hierarchy file.
    chains = {
        r[0]: set(r)
        for r in pd.read_csv(
            ADULT / "adult_hierarchy_age.csv", sep=";", header=None, dtype=str
        ).itertuples(index=False)
    }
    original = small.set_index("rid").loc[res["rid"]]
    assert (res["workclass"].to_numpy() == original["workclass"].to_numpy()).all()
    assert all(r in chains[o] for o, r in zip(original["age"], res["age"], strict=True))


@pytest.mark.parametrize(
    ("sep", "encoding"), [(";", "utf-8-sig"), ("\t", "latin-1"), (",", "utf-8")]
)
def test_delimiter_and_encoding_detected(tmp_path, sep, encoding):
    df = pd.DataFrame({"ville": ["Besançon", "Orléans"] * 5, "âge": ["30", "40"] * 5})
    inp = write_csv(df, tmp_path / "in.csv", sep=sep, encoding=encoding)
    out = tmp_path / "out.csv"
    status, _, err = call([inp, "--out", out, "--qi", "ville", "âge", "--k", "5"])
    assert status == 0, err
    res = pd.read_csv(out, sep=sep, dtype=str, keep_default_na=False, encoding="utf-8")
    assert list(res.columns) == ["ville", "âge"]  # no BOM glued to the first name
    assert set(res["ville"]) == {"Besançon", "Orléans"}


def _bad_hierarchy(tmp_path: Path) -> Path:
    path = tmp_path / "city.csv"
    path.write_text("Lyon;South;*\nParis;North;*\n")  # Nice, Metz, Brest missing
    return path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--qi", "age", "--k", "5", "--out", "{out}"], "not_there"),  # input is missing
        (["--qi", "zip", "--k", "5"], "'zip'"),
        (["--qi", "age", "--k", "five"], "--k"),
        (["--qi", "age"], "--k"),
        (["--qi", "city={hier}", "--k", "2"], "Nice"),
        (["--qi", "city={tmp}/nope.csv", "--k", "2"], "nope.csv"),
        (["--qi", "age", "--k", "2", "--l", "9", "--sensitive", "diagnosis"], "9-diversity"),
        (
            [
                "--qi",
                "age",
                "--k",
                "2",
                "--l",
                "9",
                "--sensitive",
                "diagnosis",
                "--algorithm",
                "mondrian",
            ],
            "l-diversity",
        ),
        (["--qi", "age", "--k", "2", "--l-variant", "bogus"], "bogus"),
        (["--qi", "age", "--k", "0"], "k must be"),
        (["--qi", "age", "--k", "500"], "500"),
        (["--qi", "age", "--k", "2", "--l", "2"], "sensitive"),
        (
            [
                "--qi",
                "age",
                "--k",
                "2",
                "--t",
                "0.1",
                "--sensitive",
                "diagnosis",
                "--t-distance",
                "hierarchical",
            ],
            "hierarch",
        ),
    ],
)
def test_errors_exit_2_with_one_line_and_no_output(tmp_path, args, expected):
    inp = write_csv(people(60), tmp_path / "in.csv")
    out = tmp_path / "out.csv"
    fill = {"out": str(out), "hier": str(_bad_hierarchy(tmp_path)), "tmp": str(tmp_path)}
    args = [a.format(**fill) for a in args]
    source = str(tmp_path / "not_there.csv") if expected == "not_there" else str(inp)
    status, stdout, stderr = call([source, "--out", str(out), *args])
    assert status == 2
    assert stderr.count("\n") == 1 and stderr.startswith("anonymize: error:")
    assert expected in stderr
    assert not out.exists()
    assert {p.name for p in tmp_path.iterdir()} <= {"in.csv", "city.csv"}


def test_missing_output_folder(tmp_path):
    inp = write_csv(people(60), tmp_path / "in.csv")
    status, _, err = call([inp, "--out", tmp_path / "no" / "out.csv", "--qi", "age", "--k", "2"])
    assert status == 2 and "does not exist" in err
    # the report cannot be written: the extract is not written either
    out = tmp_path / "out.csv"
    status, _, err = call(
        [inp, "--out", out, "--report", tmp_path / "no" / "r.json", "--qi", "age", "--k", "2"]
    )
    assert status == 2 and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def test_help_exits_0(capsys):
    assert run(["--help"]) == 0
    assert "--qi" in capsys.readouterr().out


def test_neutralise_formulas():
    df = pd.DataFrame(
        {"a": ["=HYPERLINK(1)", "+1+1", "-2", "+3.5", "@SUM", "a=b", "", "\tx"], "n": range(8)}
    )
    out = neutralise_formulas(df)
    assert out["a"].tolist() == [
        "'=HYPERLINK(1)",
        "'+1+1",
        "-2",
        "+3.5",
        "'@SUM",
        "a=b",
        "",
        "'\tx",
    ]
    assert out["n"].tolist() == list(range(8))
    assert df["a"][0] == "=HYPERLINK(1)"  # the input is not modified
    assert list(neutralise_formulas(pd.DataFrame({"=x": ["1"]})).columns) == ["'=x"]


# ----------------------------------------------------------------------- through manage.py


def _manage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "anonymize", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.process
def test_manage_py_error_exits_2_without_output(tmp_path):
    inp = write_csv(people(60), tmp_path / "in.csv")
    out = tmp_path / "out.csv"
    proc = _manage(str(inp), "--out", str(out), "--qi", "nope", "--k", "2")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "'nope'" in proc.stderr
    assert not out.exists()
    proc = _manage(str(inp), "--out", str(out), "--qi", "age")  # argparse error: no --k
    assert proc.returncode == 2 and not out.exists()


@pytest.mark.process
@pytest.mark.pycanon
def test_manage_py_success_checked_with_pycanon(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    qis = [
        "age",
        "education",
        "marital-status",
        "native-country",
        "occupation",
        "race",
        "salary-class",
        "sex",
    ]
    proc = _manage(
        str(ADULT / "adult.csv"),
        "--out",
        str(out),
        "--report",
        str(rep),
        "--qi",
        *[f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}" for q in qis],
        "--k",
        "5",
        "--algorithm",
        "mondrian",
    )
    assert proc.returncode == 0, proc.stderr
    res = read_out(out, sep=";")
    assert len(res) == 30162
    assert pycanon.measure(out, qis, sep=";")["k"] >= 5
    assert res.groupby(qis).size().min() >= 5
    assert json.loads(rep.read_text())["achieved"]["k"] >= 5


@pytest.mark.pycanon
def test_call_command_raises_command_error_with_status_2(tmp_path):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    inp = write_csv(people(60), tmp_path / "in.csv")
    out = tmp_path / "out.csv"
    with pytest.raises(CommandError) as info:
        call_command("anonymize", str(inp), "--out", str(out), "--qi", "zip", "--k", "2")
    assert info.value.returncode == 2 and not out.exists()
    call_command(
        "anonymize", str(inp), "--out", str(out), "--qi", "age", "--k", "2", stdout=io.StringIO()
    )
    assert pycanon.measure(out, ["age"])["k"] >= 2
    assert read_out(out).groupby("age").size().min() >= 2


@pytest.mark.pycanon
def test_repeated_hierarchy_rows_are_a_warning_on_stderr_not_an_error(tmp_path):
    # ARX's FARS hierarchy for ``iage`` lists 99 twice; ARX accepts it, so do we.
    rng = np.random.default_rng(5)
    ages = rng.choice(["97", "98", "99"], 60)
    inp = write_csv(pd.DataFrame({"iage": ages, "x": ["a"] * 60}), tmp_path / "in.csv")
    hierarchy = tmp_path / "iage.csv"
    hierarchy.write_text("97;95-99;*\n98;95-99;*\n99;95-99;*\n99;95-99;*\n")
    out = tmp_path / "out.csv"
    status, stdout, stderr = call([inp, "--out", out, "--qi", f"iage={hierarchy}", "--k", "5"])
    assert status == 0, stderr
    assert stderr == (
        "anonymize: warning: Hierarchy of 'iage': value '99' is listed twice with the same "
        "generalizations (rows 3 and 4); the repeated row is ignored.\n"
    )
    assert pycanon.measure(out, ["iage"])["k"] >= 5
    assert read_out(out).groupby("iage").size().min() >= 5
    # Two different rows for one value are still refused, naming them.
    hierarchy.write_text("97;95-99;*\n98;95-99;*\n99;95-99;*\n99;90-99;*\n")
    status, _, stderr = call([inp, "--out", out, "--qi", f"iage={hierarchy}", "--k", "5"])
    assert status == 2
    assert "'99' appears twice with different generalizations (rows 3 and 4)" in stderr


# ----------------------------------------------------------------------- the other privacy models

QIS3 = ["age", "city", "sex"]


def _run_model(tmp_path, *options, rows=600):
    src = people(rows)
    inp = write_csv(src, tmp_path / "in.csv")
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    status, stdout, stderr = call(
        [inp, "--out", out, "--report", rep, "--qi", *QIS3, "--identifier", "name", *options]
    )
    assert status == 0, stderr
    return src, read_out(out), json.loads(rep.read_text()), stdout


def class_shares(res: pd.DataFrame) -> pd.DataFrame:
    """Each (class, diagnosis): its share in the class ("proportion") and in the table ("p")."""
    within = res.groupby(QIS3)["diagnosis"].value_counts(normalize=True).reset_index()
    return within.assign(p=within["diagnosis"].map(res["diagnosis"].value_counts(normalize=True)))


@pytest.mark.pycanon
def test_delta_disclosure_checked_with_pycanon(tmp_path):
    src, res, report, stdout = _run_model(
        tmp_path, "--sensitive", "diagnosis", "--delta-disclosure", "0.8"
    )
    # ARX's δ uses log2, pycanon's the natural log; without suppression both measure against
    # the same table, so pycanon's value is ours times ln 2.
    assert report["suppressed"] == 0
    ours = report["models"][0]["achieved"]["delta"]["diagnosis"]
    theirs = pycanon.measure(tmp_path / "out.csv", QIS3, ["diagnosis"], ("delta",))["delta"]
    assert theirs == pytest.approx(ours * math.log(2))
    assert theirs < 0.8 * math.log(2)
    # Counted: the largest |log2(share in a class / share in the table)|.
    counted = class_shares(res)
    delta = np.log2(counted["proportion"] / counted["p"]).abs().max()
    assert delta == pytest.approx(ours) and delta < 0.8
    assert "0.8-disclosure privacy" in stdout


def test_delta_disclosure_with_suppression_is_measured_against_the_input(tmp_path):
    src, res, report, _ = _run_model(
        tmp_path,
        "--sensitive",
        "diagnosis",
        "--delta-disclosure",
        "0.5",
        "--k",
        "3",
        "--suppression-limit",
        "0.1",
    )
    input_share = src["diagnosis"].value_counts(normalize=True)
    shares = res.groupby(QIS3)["diagnosis"].value_counts(normalize=True).reset_index()
    ratio = np.log2(shares["proportion"] / shares["diagnosis"].map(input_share)).abs()
    assert ratio.max() < 0.5
    assert ratio.max() == pytest.approx(report["models"][1]["achieved"]["delta"]["diagnosis"])


@pytest.mark.pycanon
@pytest.mark.parametrize("variant", ["basic", "enhanced"])
def test_beta_likeness_checked_with_pycanon(tmp_path, variant):
    src, res, report, _ = _run_model(
        tmp_path, "--sensitive", "diagnosis", "--beta", "0.6", "--beta-variant", variant
    )
    assert report["suppressed"] == 0
    ours = report["models"][0]["achieved"]["beta"]["diagnosis"]
    measured = pycanon.measure(
        tmp_path / "out.csv", QIS3, ["diagnosis"], ("basic_beta", "enhanced_beta")
    )
    assert measured["basic_beta"] == pytest.approx(ours)
    assert ours <= 0.6
    # Counted: the largest gain (share in a class - share in the table) / share in the table.
    counted = class_shares(res)
    assert ((counted["proportion"] - counted["p"]) / counted["p"]).max() == pytest.approx(ours)
    if variant == "enhanced":
        # pycanon's enhanced value is min(largest gain, -ln p_min), weaker than ARX's test of
        # every value against min(β, -ln p): check that one by counting.
        assert measured["enhanced_beta"] <= 0.6
        p = src["diagnosis"].value_counts(normalize=True)
        shares = res.groupby(QIS3)["diagnosis"].value_counts(normalize=True).reset_index()
        base = shares["diagnosis"].map(p)
        gain = (shares["proportion"] - base) / base
        assert (gain <= np.minimum(0.6, -np.log(base)) + 1e-12).all()


def test_risk_models_and_population_on_the_command_line(tmp_path):
    src, res, report, _ = _run_model(
        tmp_path,
        "--highest-risk",
        "0.1",
        "--average-risk",
        "0.04",
        "--population-uniqueness",
        "0.02",
        "--population-model",
        "zayatz",
        "--sampling-fraction",
        "0.05",
        "--suppression-limit",
        "0.05",
    )
    sizes = res.groupby(QIS3).size()
    assert sizes.min() >= 10 and len(sizes) / len(res) <= 0.04
    assert report["rows_out"] == len(res) >= 0.95 * len(src)
    # The report's population-uniqueness figures, before and after, and the attacker models.
    for when in ("risk_before", "risk_after"):
        risk = report[when]
        assert risk["population"]["population_size"] == 12_000
        assert risk["population"]["dankar_model"] in ("pitman", "zayatz", "snb", "none")
        assert set(risk) >= {"prosecutor", "journalist", "marketer"}
    assert report["risk_after"]["highest"] == pytest.approx(1 / sizes.min())
    assert report["description"].endswith("at most 5% of rows suppressed, sampling fraction 0.05")


@pytest.mark.pycanon
def test_fixed_levels_on_the_command_line(tmp_path):
    src = people()
    inp = write_csv(src, tmp_path / "in.csv")
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    base = [inp, "--out", out, "--report", rep, "--qi", *QIS3, "--k", "5"]
    assert call([*base, "--suppression-limit", "0.05"])[0] == 0
    report = json.loads(rep.read_text())
    other = next(c for c in report["candidates"] if not c["optimum"])
    levels = ",".join(f"{q}={v}" for q, v in other["levels"].items())
    status, stdout, stderr = call([*base, "--suppression-limit", "0.05", "--levels", levels])
    assert status == 0, stderr
    fixed = json.loads(rep.read_text())
    assert fixed["levels"] == other["levels"] and fixed["levels_fixed"] is True
    assert fixed["suppressed"] == other["suppressed"]
    assert fixed["optimum"]["levels"] == report["levels"]
    assert f"levels {levels} as given" in stdout
    assert pycanon.measure(out, QIS3)["k"] >= 5
    assert read_out(out).groupby(QIS3).size().min() >= 5
    # Levels the model cannot accept: one line, status 2, nothing written.
    out.unlink()
    status, _, stderr = call([*base, "--levels", "age=0,city=0,sex=0"])
    assert status == 2 and not out.exists()
    assert "do not satisfy k=5 with at most 0% of rows suppressed" in stderr
    assert call([*base, "--levels", "age=zero"])[0] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--qi", "age", "--beta-variant", "enhanced"], "--beta-variant refines β-likeness"),
        (["--qi", "age", "--population-uniqueness", "0.1"], "needs the population size"),
        (
            ["--qi", "age", "--k", "2", "--population-size", "10", "--sampling-fraction", "0.1"],
            "either the population size or the sampling fraction",
        ),
        (["--qi", "age", "--delta-disclosure", "1"], "needs at least one sensitive attribute"),
        (["--qi", "age", "--k", "2", "--levels", "zip=1"], "'zip', which is not a quasi"),
        (["--qi", "age", "--k", "2", "--weights", "age=heavy"], "weight of 'age' must be"),
        (["--qi", "age", "--k", "2", "--weights", "age=-1"], "0 or more"),
        (["--qi", "age", "--k", "2", "--weights", "city=1"], "'city', which is not a quasi"),
        (["--qi", "age", "--k", "2", "--level-limits", "age=1"], "MIN:MAX"),
        (["--qi", "age", "--k", "2", "--level-limits", "age=2:1"], "above its maximum"),
        (["--qi", "age", "--k", "2", "--level-limits", "age=0:9"], "between 0 and"),
        (
            ["--qi", "age", "--k", "2", "--level-limits", "age=0:1", "--algorithm", "mondrian"],
            "Level limits apply to the optimal search",
        ),
    ],
)
def test_model_option_errors(tmp_path, args, message):
    inp = write_csv(people(60), tmp_path / "in.csv")
    status, _, stderr = call([inp, "--out", tmp_path / "o.csv", *args])
    assert status == 2 and message in stderr, stderr


def test_weights_and_level_limits_give_arxs_optimum_on_adult(tmp_path):
    """The stored ARX 3.9.2 result of the same case (bench/arx_compare.py), through the
    command line; k checked on the written file with a pandas group-by."""
    case = json.loads(
        (ROOT / "bench/arx/results/adult-k-anonymity-weights-and-limits.json").read_text()
    )
    qis = case["qis"]
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    weights = ",".join(f"{q}={w}" for q, w in case["weights"].items())
    limits = ",".join(f"{q}={lo}:{hi}" for q, (lo, hi) in case["level_limits"].items())
    status, _, stderr = call(
        [
            ADULT / "adult.csv",
            "--out", out, "--report", rep,
            "--qi", *[f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}" for q in qis],
            "--k", str(case["criteria"][0]["k"]),
            "--suppression-limit", str(case["suppression_limit"]),
            "--weights", weights, "--level-limits", limits,
        ]
    )  # fmt: skip
    assert status == 0, stderr
    report = json.loads(rep.read_text())
    assert report["levels"] == case["arx"]["levels"]
    assert report["suppressed"] == case["arx"]["suppressed"]
    assert report["metrics"]["loss"] == pytest.approx(case["arx"]["loss"], abs=1e-9)
    assert report["utility"]["weights"] == case["weights"]
    assert report["utility"]["level_limits"] == case["level_limits"]
    released = pd.read_csv(out, sep=";", dtype=str, keep_default_na=False)
    assert released.groupby(qis).size().min() >= case["criteria"][0]["k"]
    assert len(released) == 30162 - case["arx"]["suppressed"]


def test_help_lists_every_model_option(capsys):
    assert run(["--help"]) == 0
    text = capsys.readouterr().out
    for flag in (
        "--delta-disclosure",
        "--beta",
        "--beta-variant",
        "--average-risk",
        "--highest-risk",
        "--population-uniqueness",
        "--population-model",
        "--population-size",
        "--sampling-fraction",
        "--levels",
    ):
        assert flag in text
