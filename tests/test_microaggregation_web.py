"""Microaggregation through the web: the steward's form post, the worker's run (in this
process), the stored round, the request page and the API's request fields. The released file
is checked with pandas: each class (the generalized quasi-identifiers, read off ARX's
hierarchy files) holds the mean of its original ages."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest
from django.urls import reverse

from releases.core import storage
from releases.datasets import services as datasets
from releases.models import ReleaseRequest, Role
from releases.requests.parameters import ReleaseParameters
from tests.conftest import ADULT, hierarchy_upload
from tests.support import factories
from tests.support.api import client_for, token_for
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


def post(client, steward, dataset, algorithm: str = "optimal", **extra):
    client.force_login(steward)
    return client.post(
        reverse("releases:request_create", args=[dataset.pk]),
        form_data(ReleaseParameters(k=K, suppression_limit=0.05, algorithm=algorithm), **extra),
    )


def released(release_request: ReleaseRequest) -> pd.DataFrame:
    raw = storage.read_bytes(release_request.extract_path)
    return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, sep=None, engine="python")


def generalize(frame: pd.DataFrame, levels: dict[str, int]) -> pd.DataFrame:
    out = {}
    for q, level in levels.items():
        table = pd.read_csv(
            ADULT / f"adult_hierarchy_{q}.csv", sep=";", header=None, dtype=str,
            keep_default_na=False,
        )  # fmt: skip
        out[q] = frame[q].map(dict(zip(table[0], table[level], strict=True)))
    return pd.DataFrame(out)


def test_a_posted_microaggregation_releases_each_class_mean_and_shows_on_the_page(
    client, steward, adult
):
    age = adult.columns.get(name="age")
    response = post(client, steward, adult, **{f"aggregate-{age.pk}": "mean"})
    assert response.status_code == 302, response.content.decode()[-2000:]
    done = run(ReleaseRequest.objects.latest("pk"))
    assert done.state == ReleaseRequest.State.READY, done.error
    assert ReleaseParameters.of(done).microaggregate == {"age": "mean"}
    assert done.summary["utility"]["microaggregate"] == {"age": "mean"}
    levels = done.summary["levels"]
    assert "age" not in levels

    others = [q for q in QIS if q != "age"]
    extract = released(done)
    assert extract.groupby(QIS).size().min() >= K
    original = pd.read_csv(io.BytesIO(_sample_bytes()), sep=";", dtype=str, keep_default_na=False)
    classes = generalize(original, levels)
    classes["age"] = original["age"].astype(int)
    means = classes.groupby(others)["age"].mean()
    written = extract.groupby(others)["age"].agg(set)
    assert len(written) > 1
    for key, values in written.items():
        assert values == {str(math.floor(means[key] + 0.5))}, key

    client.force_login(steward)
    page = client.get(reverse("releases:request_detail", args=[done.pk])).content.decode()
    assert "microaggregated: arithmetic mean of its class" in page


def test_microaggregation_the_form_cannot_run_is_refused_with_a_sentence(client, steward, adult):
    before = ReleaseRequest.objects.count()
    age = adult.columns.get(name="age")
    response = post(client, steward, adult, "mondrian", **{f"aggregate-{age.pk}": "median"})
    assert response.status_code == 400
    assert "Microaggregation applies to the optimal full-domain generalization" in (
        response.content.decode()
    )
    response = post(
        client, steward, adult, **{f"aggregate-{age.pk}": "mean", f"min-level-{age.pk}": "1"}
    )
    assert response.status_code == 400
    assert "age is microaggregated, not generalized: clear its level limits." in (
        response.content.decode()
    )
    every = {f"aggregate-{c.pk}": "mode" for c in adult.columns.filter(name__in=QIS)}
    response = post(client, steward, adult, **every)
    assert response.status_code == 400
    assert "At least one quasi-identifier must be generalized" in response.content.decode()
    assert ReleaseRequest.objects.count() == before


def test_a_mean_of_text_fails_the_run_with_a_sentence(steward, adult):
    done = run(request_release(steward, adult, k=K, microaggregate={"education": "mean"}))
    assert done.state == ReleaseRequest.State.FAILED
    assert "needs numbers" in done.error and "education" in done.error


def test_the_api_takes_microaggregation_as_the_form_does(steward, adult):
    api = client_for(token_for(steward))
    base = {"models": {"k-anonymity": {"k": K}}, "suppression_percent": 5}
    url = f"/api/v1/datasets/{adult.pk}/requests"
    response = api.post(
        url, {**base, "microaggregate": {"workclass": "mean"}}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "microaggregate.workclass (not a quasi-identifier)" in response.json()["detail"]
    response = api.post(
        url, {**base, "microaggregate": {"age": "interval"}}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    stored = ReleaseRequest.objects.get(pk=response.json()["id"]).parameters
    assert stored["microaggregate"] == {"age": "interval"}
