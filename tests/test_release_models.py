"""Releases under l-diversity, t-closeness and Mondrian, run by the worker's code and checked
independently on the written extract (pycanon, in its own venv, and plain counts)."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.engine import Hierarchy
from releases.models import ReleaseRequest, Role
from tests.conftest import ADULT
from tests.support import factories, pycanon
from tests.support.workflow import request_release, run, tag

pytestmark = pytest.mark.django_db

# The releases on Adult's 30,162 rows (the checks count them) are in the full tier (slow).
QIS = ["age", "education", "marital-status", "native-country", "race", "salary-class", "sex"]


@pytest.fixture
def adult(steward, adult_dataset):
    dataset = adult_dataset
    tag(
        steward,
        dataset,
        {
            **{q: Role.QUASI_IDENTIFIER for q in QIS},
            "occupation": Role.SENSITIVE,
            "workclass": Role.INSENSITIVE,
        },
    )
    return dataset


def extract_of(release_request: ReleaseRequest) -> pd.DataFrame:
    raw = storage.read_bytes(release_request.extract_path)
    return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)


@pytest.mark.slow
@pytest.mark.pycanon
def test_distinct_l_diversity_release_is_l_diverse(steward, adult):
    done = run(request_release(steward, adult, k=2, suppression_limit=0.05, l=3))
    assert done.state == ReleaseRequest.State.READY, done.error
    extract = extract_of(done)
    written = storage.read_bytes(done.extract_path)
    assert pycanon.measure(written, QIS, ["occupation"], ("l",))["l"] >= 3
    assert extract.groupby(QIS)["occupation"].nunique().min() >= 3
    assert done.summary["achieved"]["l"]["occupation"] >= 3
    assert 30162 - len(extract) <= 0.05 * 30162


@pytest.mark.slow
def test_entropy_l_diversity_release_is_entropy_l_diverse(steward, adult):
    done = run(
        request_release(steward, adult, k=2, suppression_limit=0.05, l=2, l_variant="entropy")
    )
    extract = extract_of(done)

    def entropy(values: pd.Series) -> float:
        shares = values.value_counts(normalize=True)
        return float(-(shares * shares.map(math.log)).sum())

    lowest = extract.groupby(QIS)["occupation"].apply(entropy).min()
    assert lowest >= math.log(2) - 1e-9


@pytest.mark.slow
def test_t_closeness_release_is_t_close(steward, adult):
    done = run(request_release(steward, adult, k=2, suppression_limit=0.05, t=0.2))
    assert done.state == ReleaseRequest.State.READY, done.error
    extract = extract_of(done)
    # Equal-distance EMD: half the L1 distance between each class's distribution and the
    # whole input's (the table the privacy officer compares with).
    overall = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str)["occupation"].value_counts(
        normalize=True
    )
    worst = 0.0
    for _, group in extract.groupby(QIS):
        shares = group["occupation"].value_counts(normalize=True)
        distance = 0.5 * shares.reindex(overall.index, fill_value=0).sub(overall).abs().sum()
        worst = max(worst, distance)
    assert worst <= 0.2 + 1e-9
    assert done.summary["achieved"]["t"]["occupation"] == pytest.approx(worst, abs=1e-6)


@pytest.mark.slow
@pytest.mark.pycanon
def test_mondrian_release_is_k_anonymous_and_keeps_every_row(steward, adult):
    done = run(request_release(steward, adult, k=5, suppression_limit=0.0, algorithm="mondrian"))
    assert done.state == ReleaseRequest.State.READY, done.error
    extract = extract_of(done)
    assert pycanon.measure(storage.read_bytes(done.extract_path), QIS)["k"] >= 5
    assert extract.groupby(QIS).size().min() >= 5
    assert len(extract) == 30162
    assert done.summary["levels"] is None and done.summary["algorithm"] == "mondrian"
    for original, released in done.summary["examples"]["age"]:
        low, high = released.strip("[]").split("-") if "-" in released else (released, released)
        assert int(low) <= int(original) <= int(high)
    # Mondrian recodes locally: usually far more classes than full-domain generalization.
    assert done.summary["classes"] == extract.groupby(QIS).ngroups


@pytest.mark.slow
def test_summary_carries_metrics_and_risk_for_the_page(steward, adult):
    done = run(request_release(steward, adult, k=5, suppression_limit=0.05))
    summary = done.summary
    extract = extract_of(done)
    sizes = extract.groupby(QIS).size()
    assert summary["risk_after"]["highest"] == pytest.approx(1 / sizes.min())
    assert summary["risk_after"]["average"] == pytest.approx(len(sizes) / len(extract))
    before = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str).groupby(QIS).size()
    assert summary["risk_before"]["sample_uniques"] == pytest.approx((before == 1).sum() / 30162)
    assert set(summary["metrics"]) >= {
        "loss",
        "granularity",
        "precision",
        "discernibility",
        "average_class_size",
        "non_uniform_entropy",
        "loss_per_attribute",
    }
    assert set(summary["metrics"]["loss_per_attribute"]) == set(QIS)
    # Examples of original values and what they became, as the (automatic) hierarchy says.
    adult_frame = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    for name in ("age", "education"):
        hierarchy = Hierarchy.automatic(adult_frame[name].unique(), attribute=name)
        assert hierarchy.height == summary["heights"][name]
        assert summary["examples"][name]
        for original, released in summary["examples"][name]:
            assert hierarchy.generalize(original, summary["levels"][name]) == released
    # The sample pairs each released row with the same row before release.
    original, released = summary["sample"]["original"], summary["sample"]["released"]
    workclass = summary["sample"]["columns"].index("workclass")
    assert [row[workclass] for row in original] == [row[workclass] for row in released]


def test_l_diversity_without_a_sensitive_column_is_refused(steward):
    dataset = factories.make_dataset(steward, "age,sex\n" + "30,F\n" * 20)
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER})
    with pytest.raises(InvalidInput, match="sensitive"):
        request_release(steward, dataset, k=2, l=2)
    tag(steward, dataset, {"sex": Role.SENSITIVE})
    with pytest.raises(InvalidInput, match="needs a positive c"):
        request_release(steward, dataset, k=2, l=2, l_variant="recursive")
    assert not ReleaseRequest.objects.exists()
