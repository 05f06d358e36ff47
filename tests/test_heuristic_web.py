"""The search within a time limit on the pages and the API: asked for with its time limit,
run, stated on the request page and the report (time limit, steps, optimality), suggested when
15 or more quasi-identifiers are tagged, and refused clearly without a time limit."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from django.core.cache import cache
from django.urls import reverse

from releases.core import storage
from releases.models import ReleaseRequest, Reproduction, Role
from releases.requests import reproduction
from releases.requests.parameters import ReleaseParameters
from tests.support import factories
from tests.support.api import client_for, token_for
from tests.support.workflow import approve, form_data, run, tag

pytestmark = pytest.mark.django_db

QIS = ["age", "sex"]


@pytest.fixture
def tagged(steward):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    tag(
        steward,
        dataset,
        {
            "name": Role.IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "diagnosis": Role.SENSITIVE,
        },
    )
    return dataset


def _post(client, steward, dataset, **extra):
    client.force_login(steward)
    return client.post(
        reverse("releases:request_create", args=[dataset.pk]),
        form_data(ReleaseParameters(k=5, suppression_limit=0.05), **extra),
    )


def _released(release_request: ReleaseRequest) -> pd.DataFrame:
    raw = storage.read_bytes(release_request.extract_path)
    return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, sep=None, engine="python")


def test_asked_with_a_time_limit_it_runs_and_the_pages_state_the_search(client, steward, tagged):
    response = _post(client, steward, tagged, algorithm="heuristic", time_limit="30")
    assert response.status_code == 302, response.content.decode()[-2000:]
    done = run(ReleaseRequest.objects.latest("pk"))
    assert done.state == ReleaseRequest.State.READY, done.error
    assert ReleaseParameters.of(done).time_limit == 30.0
    search = done.summary["search"]
    assert search["time_limit"] == 30.0 and search["steps"] >= 1
    assert search["proven_optimal"] is True  # two quasi-identifiers: the lattice is exhausted
    # The released file holds classes of 5 rows or more (checked here with pandas).
    assert _released(done).groupby(QIS).size().min() >= 5

    page = client.get(reverse("releases:request_detail", args=[done.pk])).content.decode()
    assert "Search within a time limit" in page and "(30.0 s)" in page
    assert f"{search['steps']} transformations evaluated" in page
    assert "Proven optimal" in page
    report = client.get(reverse("releases:report", args=[done.pk])).content.decode()
    assert 'id="r-search"' in report and "time limit of 30.0 s" in report
    assert "Proven optimal" in report


def test_without_a_time_limit_it_is_refused_with_a_sentence(client, steward, tagged):
    response = _post(client, steward, tagged, algorithm="heuristic", time_limit="")
    assert response.status_code == 400
    assert "needs the time limit, in seconds" in response.content.decode()
    response = _post(client, steward, tagged, algorithm="heuristic", time_limit="0")
    assert response.status_code == 400
    assert not ReleaseRequest.objects.exists()


def test_the_optimal_search_ignores_the_time_limit_field(client, steward, tagged):
    response = _post(client, steward, tagged, algorithm="optimal", time_limit="10")
    assert response.status_code == 302
    stored = ReleaseRequest.objects.latest("pk")
    assert ReleaseParameters.of(stored).time_limit is None
    assert "time_limit" not in stored.parameters


def _wide_csv(columns: int, rows: int = 120) -> bytes:
    rng = np.random.default_rng(11)
    frame = pd.DataFrame({f"q{i:02d}": rng.choice(["a", "b", "c"], rows) for i in range(columns)})
    return frame.to_csv(index=False).encode("utf-8")


@pytest.mark.parametrize(("columns", "suggested"), [(15, True), (14, False)])
def test_suggested_from_fifteen_quasi_identifiers(client, steward, columns, suggested):
    dataset = factories.make_dataset(steward, _wide_csv(columns), "wide.csv")
    tag(steward, dataset, {f"q{i:02d}": Role.QUASI_IDENTIFIER for i in range(columns)})
    client.force_login(steward)
    page = client.get(reverse("releases:dataset_detail", args=[dataset.pk]))
    form = page.context["request_form"]
    assert form.heuristic_suggested is suggested
    assert form["algorithm"].value() == ("heuristic" if suggested else "optimal")
    assert ('id="heuristic-suggested"' in page.content.decode()) is suggested
    # Offered always.
    assert "heuristic" in dict(form.fields["algorithm"].choices)


def test_the_api_takes_the_time_limit_as_the_form_does(steward, tagged):
    cache.clear()  # the API's rate limit counts
    api = client_for(token_for(steward))
    url = f"/api/v1/datasets/{tagged.pk}/requests"
    base = {"models": {"k-anonymity": {"k": 3}}, "suppression_percent": 10}
    refused = api.post(url, {**base, "algorithm": "heuristic"}, content_type="application/json")
    assert refused.status_code == 400
    assert "needs the time limit" in refused.json()["detail"]
    body = {**base, "algorithm": "heuristic", "time_limit": 12.5}
    response = api.post(url, body, content_type="application/json")
    assert response.status_code == 201, response.content
    stored = ReleaseRequest.objects.get(pk=response.json()["id"]).parameters
    assert stored["algorithm"] == "heuristic" and stored["time_limit"] == 12.5


def test_a_reproduction_applies_the_levels_the_search_chose(client, steward, officer, tagged):
    response = _post(client, steward, tagged, algorithm="heuristic", time_limit="30")
    assert response.status_code == 302
    done = approve(officer, run(ReleaseRequest.objects.latest("pk")))
    again = reproduction.reproduce(reproduction.request_reproduction(officer, done.pk).pk)
    assert again.state == Reproduction.State.IDENTICAL
    # With other levels recorded (all at the top), the re-run follows them, not a new search.
    heights = done.summary["heights"]
    summary = {**done.summary, "levels": {q: heights[q] - 1 for q in heights}}
    assert summary["levels"] != done.summary["levels"]
    ReleaseRequest.objects.filter(pk=done.pk).update(summary=summary)
    other = reproduction.reproduce(reproduction.request_reproduction(officer, done.pk).pk)
    assert other.state == Reproduction.State.DIFFERENT
