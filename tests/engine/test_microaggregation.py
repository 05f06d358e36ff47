"""Microaggregation of numeric quasi-identifiers: ARX 3.9.2's results, and the written release
checked with plain pandas.

The ARX figures are ARX's own output, stored by ``bench/arx_compare.py --arx`` under
``bench/arx/results/adult-microaggregation-*.json``: levels, suppressed records, classes, Loss,
and ARX's released table (its SHA-256, and the aggregate ARX wrote for every class). The
independent checks generalize Adult with ARX's hierarchy files (``Series.map``), take each
class's mean, median, mode or range of the original ages with a pandas group-by, and compare
with the file the command line wrote.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, Hierarchy, PrivacyModel, anonymize
from releases.engine.cli import run
from releases.engine.microaggregation import parse_microaggregate
from tests.conftest import ADULT
from tests.support.frames import join_rows

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "arx" / "results"
CASES = sorted(p.stem for p in RESULTS.glob("adult-microaggregation-*.json"))


def stored(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def model_of(case: dict) -> PrivacyModel:
    return PrivacyModel.from_spec(
        {"criteria": case["criteria"], "suppression_limit": case["suppression_limit"]}
    )


def java_round(x: float) -> int:
    return math.floor(x + 0.5)


def test_the_recorded_cases_cover_mean_median_mode_and_interval():
    functions = {f for c in CASES for f in stored(c)["microaggregate"].values()}
    assert functions == {"mean", "median", "mode", "interval"}


@pytest.mark.parametrize("name", CASES)
def test_the_release_is_arxs(adult, adult_hierarchies, name):
    case = stored(name)
    arx = case["arx"]
    micro = case["microaggregate"]
    generalized = [q for q in case["qis"] if q not in micro]
    config = AnonymizationConfig(
        quasi_identifiers={q: adult_hierarchies[q] for q in case["qis"]},
        model=model_of(case),
        microaggregate=dict(micro),
    )
    result = anonymize(adult, config)

    assert set(arx["levels"]) == set(generalized)  # ARX does not generalize it either
    assert result.levels == arx["levels"]
    assert result.suppressed == arx["suppressed"]
    assert len(result.classes) == arx["classes"]
    assert result.metrics["loss"] == pytest.approx(arx["loss"], abs=1e-9)
    assert result.report()["utility"]["microaggregate"] == micro

    # The released table laid out as ARX writes it: every row in order, "*" when suppressed.
    full = adult.copy()
    full[case["qis"]] = "*"
    full.iloc[result.source_rows] = result.data[list(adult.columns)].to_numpy()
    lines = join_rows(full, ";")
    assert hashlib.sha256("\n".join(lines).encode()).hexdigest() == arx["released"]["sha256"]
    keys = join_rows(full[generalized], "|")
    for column in micro:
        ours = dict(zip(keys, full[column], strict=True))
        assert ours == arx["released"]["aggregates"][column]


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


def expected_value(ages: pd.Series, function: str) -> set[str]:
    """The aggregates a class's original ages allow, by pandas (a tie of modes allows each)."""
    x = ages.astype(int)
    if function == "mean":
        return {str(java_round(x.mean()))}
    if function == "median":
        return {str(java_round(x.median()))}
    if function == "mode":
        return {str(v) for v in x.mode()}
    return {f"[{x.min()}, {x.max()}]"}


def call(argv: list) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run([str(a) for a in argv], stdout=out, stderr=err)
    return status, err.getvalue()


@pytest.mark.parametrize(
    ("function", "k", "limit"),
    [("mean", 5, 0.05), ("median", 5, 0.05), ("mode", 5, 0.05), ("interval", 10, 0.02)],
)
def test_every_class_of_the_written_file_holds_the_aggregate_of_its_rows(
    adult, tmp_path, function, k, limit
):
    qis = ["age", "education", "marital-status", "native-country", "occupation", "race", "sex"]
    out, rep = tmp_path / "out.csv", tmp_path / "r.json"
    status, stderr = call(
        [
            ADULT / "adult.csv",
            "--out", out, "--report", rep,
            "--qi", *[f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}" for q in qis],
            "--k", k, "--suppression-limit", limit,
            "--microaggregate", f"age={function}",
        ]
    )  # fmt: skip
    assert status == 0, stderr
    report = json.loads(rep.read_text())
    assert report["utility"]["microaggregate"] == {"age": function}
    assert "age" not in report["levels"]
    others = [q for q in qis if q != "age"]
    written = pd.read_csv(out, sep=";", dtype=str, keep_default_na=False)

    # k still holds on the output, the microaggregated column included.
    assert written.groupby(others).size().min() >= k
    assert written.groupby(qis).size().min() >= k
    # One value per class, and it is the aggregate of that class's original rows.
    per_class = written.groupby(others)["age"].agg(["nunique", "first", "size"])
    assert (per_class["nunique"] == 1).all()
    original = generalize(adult, {q: report["levels"][q] for q in others})
    original["age"] = adult["age"]
    groups = original.groupby(others)["age"]
    assert len(written) == len(adult) - report["suppressed"]
    for key, row in per_class.iterrows():
        ages = groups.get_group(key)
        assert row["size"] == len(ages)  # the whole class is released
        assert row["first"] in expected_value(ages, function), (key, row["first"])
    # The suppressed rows are exactly those of the classes that are not released.
    sizes = groups.size()
    assert int(sizes[~sizes.index.isin(per_class.index)].sum()) == report["suppressed"]


def test_decimals_and_missing_values(tmp_path):
    """A decimal column: the mean written as ARX writes a double; an empty cell is left out of
    the aggregate (a class of empty cells only stays empty)."""
    data = pd.DataFrame(
        {
            "zone": ["a"] * 4 + ["b"] * 4 + ["c"] * 3,
            "score": ["1.5", "2.5", "", "4.25", "10", "20.5", "0.5", "7", "", "", ""],
        }
    )
    config = AnonymizationConfig(
        quasi_identifiers={
            "zone": Hierarchy.automatic(data["zone"].tolist(), attribute="zone"),
            "score": Hierarchy.automatic(data["score"].tolist(), attribute="score"),
        },
        model=PrivacyModel.from_spec({"criteria": [{"model": "k-anonymity", "k": 3}]}),
        microaggregate={"score": "mean"},
    )
    result = anonymize(data, config)
    assert result.levels == {"zone": 0}
    by_zone = result.data.groupby("zone")["score"].agg(set).to_dict()
    numbers = pd.to_numeric(data["score"].replace("", None))
    means = numbers.groupby(data["zone"]).mean()
    assert by_zone["a"] == {"2.75"} and float("2.75") == pytest.approx(means["a"])
    assert float(next(iter(by_zone["b"]))) == pytest.approx(means["b"])
    assert by_zone["c"] == {""}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"microaggregate": {"occupation": "mean"}}, "needs numbers"),
        ({"microaggregate": {"occupation": "interval"}}, "needs numbers"),
        ({"microaggregate": {"workclass": "mode"}}, "not a quasi-identifier"),
        ({"microaggregate": {"age": "average"}}, "Unknown microaggregation"),
        ({"microaggregate": {"age": "mean"}, "algorithm": "mondrian"}, "not to Mondrian"),
        ({"microaggregate": {"age": "mean"}, "min_levels": {"age": 1}}, "microaggregated"),
    ],
)
def test_unusable_microaggregation_is_refused_with_a_sentence(
    adult, adult_hierarchies, overrides, message
):
    config = AnonymizationConfig(
        quasi_identifiers=dict(adult_hierarchies),
        model=PrivacyModel.from_spec({"criteria": [{"model": "k-anonymity", "k": 5}]}),
        **overrides,
    )
    with pytest.raises(EngineError, match=message):
        anonymize(adult, config)


def test_mode_is_accepted_for_text_and_every_quasi_identifier_cannot_be_aggregated(
    adult, adult_hierarchies
):
    qis = {q: adult_hierarchies[q] for q in ("occupation", "sex")}
    model = PrivacyModel.from_spec({"criteria": [{"model": "k-anonymity", "k": 5}]})
    result = anonymize(
        adult, AnonymizationConfig(qis, model=model, microaggregate={"occupation": "mode"})
    )
    modes = adult.groupby("sex")["occupation"].agg(lambda s: set(s.mode()))
    for sex, values in result.data.groupby("sex")["occupation"].agg(set).items():
        assert len(values) == 1 and values <= modes[sex]
    with pytest.raises(EngineError, match="At least one quasi-identifier must be generalized"):
        anonymize(
            adult,
            AnonymizationConfig(
                qis, model=model, microaggregate={"occupation": "mode", "sex": "mode"}
            ),
        )


def test_the_command_line_parses_and_refuses(tmp_path):
    assert parse_microaggregate("age=Mean, hours=interval") == {
        "age": "mean",
        "hours": "interval",
    }
    for text, message in (
        ("age", "COLUMN=mean|median|mode|interval"),
        ("age=mean,age=mode", "given twice"),
        ("age=sum", "Unknown microaggregation"),
    ):
        with pytest.raises(EngineError, match=message):
            parse_microaggregate(text)
    status, stderr = call(
        [
            ADULT / "adult.csv", "--out", tmp_path / "o.csv",
            "--qi", "occupation", "--qi", "sex", "--k", "5",
            "--microaggregate", "occupation=median",
        ]
    )  # fmt: skip
    assert status == 2 and "needs numbers" in stderr and "Traceback" not in stderr
    assert not (tmp_path / "o.csv").exists()
