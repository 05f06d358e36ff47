"""A privacy model added to the registry, and to nothing else, is searched for, enforced by
Mondrian, stored as JSON, offered and applied by the command line and checked for the review
(the model, α-deassociation, is in ``tests/support/added_model.py``; the release is counted
here with pandas)."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, PrivacyModel, anonymize
from releases.engine.cli import run
from releases.engine.criteria import checks, criterion_from_spec
from tests.support.added_model import AlphaDeassociation, register

QIS = ["age", "zip", "sex", "marital"]


def largest_shares(release: pd.DataFrame, qis: list[str], sensitive: str) -> pd.Series:
    """Per class of the release, the share of its most frequent sensitive value."""
    return release.groupby(qis)[sensitive].value_counts(normalize=True).groupby(qis).max()


def _config(table, model: PrivacyModel, algorithm: str = "optimal") -> AnonymizationConfig:
    data, hierarchies, _ = table
    return AnonymizationConfig(
        quasi_identifiers=hierarchies,
        model=model,
        sensitive=["disease"],
        identifiers=["name"],
        algorithm=algorithm,
    )


def test_a_model_is_known_by_its_registry_entry(monkeypatch):
    with pytest.raises(EngineError, match="Unknown privacy model 'alpha-deassociation'"):
        criterion_from_spec({"model": "alpha-deassociation", "alpha": 0.5})
    register(monkeypatch)
    assert criterion_from_spec({"model": "alpha-deassociation", "alpha": 0.5}) == (
        AlphaDeassociation(alpha=0.5)
    )
    with pytest.raises(EngineError, match="α must be above 0 and at most 1, not 1.5"):
        PrivacyModel.from_spec([{"model": "alpha-deassociation", "alpha": 1.5}])


@pytest.mark.parametrize("algorithm", ["optimal", "mondrian"])
def test_the_search_enforces_an_added_model_and_the_release_shows_it(
    monkeypatch, small_table, algorithm
):
    register(monkeypatch)
    model = PrivacyModel(k=2, criteria=[AlphaDeassociation(alpha=0.5)], suppression_limit=0.05)
    assert PrivacyModel.from_spec(json.loads(json.dumps(model.to_spec()))) == model
    assert PrivacyModel.from_fields(model.fields()) == model

    result = anonymize(small_table[0], _config(small_table, model, algorithm))
    counted = largest_shares(result.data, QIS, "disease")
    assert counted.max() <= 0.5 and result.suppressed <= 0.05 * result.rows_in
    # k=2 alone releases classes with a value above half: the added model changed the result.
    only_k = anonymize(small_table[0], _config(small_table, PrivacyModel(k=2), algorithm))
    assert largest_shares(only_k.data, QIS, "disease").max() > 0.5

    # The classes table holds its measure, counted the same way.
    table = result.classes.set_index(QIS)["disease:alpha"]
    assert len(table) == len(counted)
    assert table.sort_index().to_numpy() == pytest.approx(counted.sort_index().to_numpy())
    assert ("disease:alpha", "largest value share (disease)") in model.class_column_labels(
        ["disease"]
    )

    report = json.loads(json.dumps(result.report()))
    entry = next(m for m in report["models"] if m["model"] == "alpha-deassociation")
    assert entry["description"] == "0.5-deassociation"
    assert entry["achieved"]["alpha"]["disease"] == pytest.approx(counted.max())
    line = next(c for c in checks(report) if c.name == "α-deassociation of disease")
    assert line.passed and f"largest value share {counted.max():.4f}" in line.detail
    entry["achieved"]["alpha"]["disease"] = 0.6
    assert not next(c for c in checks(report) if c.name == "α-deassociation of disease").passed


def test_the_command_line_offers_and_applies_an_added_model(monkeypatch, tmp_path, small_table):
    register(monkeypatch)
    out = io.StringIO()
    assert run(["--help"], stdout=out) == 0
    assert "--alpha A" in out.getvalue()
    assert "α-deassociation: largest share of a class" in " ".join(out.getvalue().split())

    data = small_table[0]
    data.to_csv(tmp_path / "in.csv", index=False)
    err = io.StringIO()
    argv = [str(tmp_path / "in.csv"), "--out", str(tmp_path / "out.csv")]
    argv += ["--report", str(tmp_path / "report.json"), "--qi", *QIS[:3], "--identifier", "name"]
    argv += ["--sensitive", "disease", "--k", "2", "--alpha", "0.5"]
    argv += ["--suppression-limit", "0.05"]
    assert run(argv, stdout=io.StringIO(), stderr=err) == 0, err.getvalue()

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["privacy_model"]["criteria"] == [
        {"model": "k-anonymity", "k": 2},
        {"model": "alpha-deassociation", "alpha": 0.5},
    ]
    release = pd.read_csv(tmp_path / "out.csv", dtype=str, keep_default_na=False)
    assert largest_shares(release, QIS[:3], "disease").max() <= 0.5
    assert release.groupby(QIS[:3]).size().min() >= 2
    assert all(c.passed for c in checks(report))
