"""The utility controls through the web: attribute weights in the Loss and level limits per
quasi-identifier, from the steward's form post to the worker's run (in this process), the
request page and a resubmission. The released file is checked with a pandas group-by and
against the ARX hierarchy files read by pandas; the Loss against ARX's weighted formula
written out here."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from django.urls import reverse

from releases.core import storage
from releases.datasets import services as datasets
from releases.models import ReleaseRequest, Role
from releases.requests.forms import ReleaseRequestForm, ResubmitForm
from releases.requests.parameters import ReleaseParameters
from tests.conftest import ADULT, hierarchy_upload
from tests.support import factories
from tests.support.workflow import form_data, request_release, run, tag

pytestmark = pytest.mark.django_db

QIS = ["age", "education", "sex", "race"]
ROWS = 2000
K = 5


def _sample_bytes() -> bytes:
    lines = (ADULT / "adult.csv").read_text(encoding="utf-8").splitlines()
    return ("\n".join(lines[: ROWS + 1]) + "\n").encode("utf-8")


@pytest.fixture
def adult(steward):
    dataset = factories.make_dataset(steward, _sample_bytes(), "adult.csv")
    tag(steward, dataset, {q: Role.QUASI_IDENTIFIER for q in QIS})
    for column in dataset.columns.filter(name__in=QIS):
        datasets.set_hierarchy_file(steward, dataset, column.pk, hierarchy_upload(column.name))
    return dataset


def fields(dataset, weights=None, limits=None) -> dict:
    """The utility fields of the request form, by column name."""
    columns = {c.name: c.pk for c in dataset.columns.all()}
    out = {}
    for name, weight in (weights or {}).items():
        out[f"weight-{columns[name]}"] = str(weight)
    for name, (low, high) in (limits or {}).items():
        out[f"min-level-{columns[name]}"] = "" if low is None else str(low)
        out[f"max-level-{columns[name]}"] = "" if high is None else str(high)
    return out


def post(client, steward, dataset, **extra):
    client.force_login(steward)
    return client.post(
        reverse("releases:request_create", args=[dataset.pk]),
        form_data(ReleaseParameters(k=K, suppression_limit=0.05), **extra),
    )


def released(release_request: ReleaseRequest) -> pd.DataFrame:
    raw = storage.read_bytes(release_request.extract_path)
    return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, sep=None, engine="python")


def hierarchy_labels(q: str, level: int) -> set[str]:
    table = pd.read_csv(
        ADULT / f"adult_hierarchy_{q}.csv", sep=";", header=None, dtype=str, keep_default_na=False
    )
    return set(table[level])


def arx_weighted_loss(per_attribute: dict[str, float], weights: dict[str, float]) -> float:
    given = {q: weights.get(q, 0.5) for q in per_attribute}
    top = max(given.values())
    product = 1.0
    for q, value in per_attribute.items():
        product *= (given[q] / top * value + 1) ** (1 / len(per_attribute))
    return product - 1


def test_the_form_offers_each_quasi_identifier_with_its_levels(client, steward, adult):
    client.force_login(steward)
    page = client.get(reverse("releases:dataset_detail", args=[adult.pk]))
    text = page.content.decode()
    assert 'id="utility-table"' in text
    form = page.context["request_form"]
    rows = {r["column"].name: r for r in form.utility_rows()}
    assert sorted(rows) == sorted(QIS)
    age = adult.columns.get(name="age")
    assert form.fields[f"max-level-{age.pk}"].max_value == age.hierarchy_height - 1


def test_limits_and_weights_posted_bound_the_search_and_show_on_the_page(client, steward, adult):
    plain = run(request_release(steward, adult, k=K, suppression_limit=0.05))
    optimum = plain.summary["levels"]
    # Keep age one level below the optimum's (a search that must suppress or generalize the
    # others more), and weigh sex and race heavily.
    low = optimum["age"] - 1
    assert low >= 0
    limits = {"age": (low, low), "education": (None, 2)}
    weights = {"sex": 1, "race": 0.9, "age": 0.1}
    response = post(client, steward, adult, **fields(adult, weights, limits))
    assert response.status_code == 302, response.content.decode()[-2000:]
    done = run(ReleaseRequest.objects.latest("pk"))
    assert done.state == ReleaseRequest.State.READY, done.error

    stored = ReleaseParameters.of(done)
    assert stored.weights == {"sex": 1.0, "race": 0.9, "age": 0.1}
    assert stored.level_limits == {"age": (low, low), "education": (None, 2)}
    levels = done.summary["levels"]
    assert levels["age"] == low != optimum["age"] and levels["education"] <= 2
    assert done.summary["utility"] == {
        "weights": {"sex": 1.0, "race": 0.9, "age": 0.1},
        "level_limits": {"age": [low, low], "education": [0, 2]},
    }
    metrics = done.summary["metrics"]
    assert metrics["loss"] == pytest.approx(
        arx_weighted_loss(metrics["loss_per_attribute"], stored.weights), abs=1e-12
    )

    # The released file: k rows per class, each value at the level the page reports.
    extract = released(done)
    assert extract.groupby(QIS).size().min() >= K
    for q in QIS:
        assert set(extract[q]) <= hierarchy_labels(q, levels[q]) | {"*"}

    client.force_login(steward)
    page = client.get(reverse("releases:request_detail", args=[done.pk])).content.decode()
    assert "Levels allowed" in page and "Weight" in page
    assert f"{low} to {low}" in page


def test_limits_too_tight_fail_the_run_with_a_sentence_naming_them(steward, adult):
    done = run(
        request_release(
            steward, adult, k=K, suppression_limit=0.0,
            level_limits={q: (0, 0) for q in QIS},
        )
    )  # fmt: skip
    assert done.state == ReleaseRequest.State.FAILED
    assert "widen the level limits" in done.error


def test_wrong_limits_are_refused_with_a_sentence_and_nothing_is_requested(client, steward, adult):
    before = ReleaseRequest.objects.count()
    response = post(client, steward, adult, **fields(adult, limits={"age": (3, 1)}))
    assert response.status_code == 400
    assert "The highest level of age (1) is below its lowest (3)." in response.content.decode()
    response = post(
        client,
        steward,
        adult,
        algorithm="mondrian",
        **fields(adult, limits={"sex": (1, 1)}),
    )
    assert response.status_code == 400
    assert "Level limits apply to the optimal full-domain generalization" in (
        response.content.decode()
    )
    age = adult.columns.get(name="age")
    response = post(client, steward, adult, **fields(adult, {"age": 2}))
    assert response.status_code == 400
    form = response.context["request_form"]
    assert isinstance(form, ReleaseRequestForm)
    assert "less than or equal to 1" in " ".join(form.errors[f"weight-{age.pk}"])
    assert ReleaseRequest.objects.count() == before


def test_a_resubmission_starts_from_the_weights_and_limits_of_the_round(steward, adult):
    params = ReleaseParameters(
        k=K,
        suppression_limit=0.02,
        weights={"age": 0.3},
        level_limits={"race": (1, 1)},
    )
    done = run(
        request_release(
            steward, adult, k=K, suppression_limit=0.02, weights=params.weights,
            level_limits=params.level_limits,
        )
    )  # fmt: skip
    assert done.summary["levels"]["race"] == 1
    form = ResubmitForm(
        initial=ResubmitForm.initial_from(done),
        dataset=adult,
        request_id=done.pk,
        current=ReleaseParameters.of(done),
    )
    race = adult.columns.get(name="race")
    age = adult.columns.get(name="age")
    assert form[f"min-level-{race.pk}"].value() == 1
    assert form[f"max-level-{race.pk}"].value() == 1
    assert form[f"weight-{age.pk}"].value() == 0.3
