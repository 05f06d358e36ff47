"""A differentially private extract (SafePub) end to end: the request page and the report show
its ε, δ, k, β, search, rows sampled and suppressed, with the seed for officers only; over the
API it is asked for, run and read, and refused as problem+json over budget; its reproduction
draws the same sample (the seed the run drew) and writes the same bytes; the budget's ledger
shows it once, as its spend."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import numpy as np
import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from releases.datasets import budget
from releases.engine import PrivacyModel
from releases.engine.criteria.safepub import SafePub, sample_rows
from releases.models import BudgetEntry, ReleaseRequest, Reproduction, Role
from releases.requests import report, reproduction
from releases.requests import services as release
from releases.requests.parameters import ReleaseParameters
from tests.support.api import client_for, eager_celery, token_for
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import approve, run, tag

pytestmark = pytest.mark.django_db

Kind = BudgetEntry.Kind


def safepub(epsilon: float = 1.0, **values) -> ReleaseParameters:
    model = PrivacyModel(
        criteria=[SafePub(epsilon=epsilon, delta=1e-5, steps=4, **values)], suppression_limit=1.0
    )
    return ReleaseParameters(model=model)


@pytest.fixture
def dataset(steward, officer):
    dataset = make_dataset(steward, synthetic_csv(rows=1500), "people.csv")
    tag(steward, dataset, {"name": Role.IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    budget.set_budget(officer, dataset, "3", "0.001")
    return dataset


@pytest.fixture
def released(dataset, steward, officer, recipient):
    """A SafePub extract without a seed of its own (the run draws one), run and approved."""
    release_request = run(release.request_release(steward, dataset, safepub(1.0)))
    assert release_request.state == ReleaseRequest.State.READY, release_request.error
    return approve(officer, release_request, recipient)


def page(user, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    if response.streaming:  # the report's JSON download
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def cell(html: str, name: str) -> str:
    found = re.search(rf'data-safepub="{name}">([^<]*)<', html)
    assert found, name
    return found.group(1)


def test_the_page_and_the_report_show_safepub_and_only_officers_see_the_seed(
    released, steward, officer, recipient
):
    drawn = released.summary["safepub"]
    seed = drawn["seed"]
    assert isinstance(seed, int)
    # The figures, checked independently: the sample the seed draws, k from the criterion.
    sample = sample_rows(drawn["input_rows"], drawn["beta"], seed)
    assert drawn["sampled_rows"] == int(sample.sum()) == int(np.count_nonzero(sample))
    assert drawn["k"] == SafePub(epsilon=1, delta=1e-5).k
    suppressed = released.summary["suppressed"]
    assert released.summary["rows_out"] == drawn["sampled_rows"] - suppressed

    request_page = page(steward, released.get_absolute_url())
    for html in (request_page, page(officer, reverse("releases:report", args=[released.pk]))):
        assert cell(html, "k") == str(drawn["k"])
        assert cell(html, "sampled_rows") == str(drawn["sampled_rows"])
        assert cell(html, "suppressed_rows") == str(suppressed)
        assert cell(html, "mode") == "data-dependent"
        assert cell(html, "epsilon_search") == "0.1"
        assert cell(html, "seed") == str(seed)
        assert report.SEED_KEPT in html

    officers = json.loads(page(officer, reverse("releases:download_report", args=[released.pk])))
    section = officers["privacy"]["safepub"]
    assert (section["epsilon"], section["delta"], section["k"]) == (1.0, 1e-5, drawn["k"])
    assert section["beta"] == pytest.approx(1 - np.exp(-0.9), abs=1e-12)
    assert (section["sampled_rows"], section["suppressed_rows"]) == (
        drawn["sampled_rows"],
        suppressed,
    )
    assert section["seed"] == seed and section["seed_statement"] == report.SEED_KEPT

    # The recipient: the same section and sentence, and the seed nowhere.
    raw = page(recipient, reverse("releases:download_report", args=[released.pk]))
    theirs = json.loads(raw)["privacy"]["safepub"]
    assert theirs == {k: v for k, v in section.items() if k != "seed"}
    their_report = page(recipient, reverse("releases:report", args=[released.pk]))
    their_page = page(recipient, released.get_absolute_url())
    for html in (their_report, their_page):
        assert cell(html, "k") == str(drawn["k"]) and report.SEED_KEPT in html
        assert 'data-safepub="seed"' not in html
    for text in (raw, their_report, their_page):
        assert str(seed) not in text


def test_a_seed_the_requester_gave_is_not_the_recipients_either(
    dataset, steward, officer, recipient
):
    given = 987_654_321
    release_request = run(release.request_release(steward, dataset, safepub(1.0, seed=given)))
    approve(officer, release_request, recipient)
    assert release_request.summary["safepub"]["seed"] == given
    mine = page(officer, reverse("releases:download_report", args=[release_request.pk]))
    assert json.loads(mine)["privacy"]["spec"]["criteria"][0]["seed"] == given
    theirs = page(recipient, reverse("releases:download_report", args=[release_request.pk]))
    assert str(given) not in theirs
    assert "seed" not in json.loads(theirs)["privacy"]["spec"]["criteria"][0]


def test_the_reproduction_draws_the_same_sample_and_writes_the_same_bytes(released, officer):
    assert "seed" not in released.parameters["model"]["criteria"][0]  # the run drew it
    done = reproduction.reproduce(reproduction.request_reproduction(officer, released.pk).pk)
    assert done.state == Reproduction.State.IDENTICAL, done.outcome
    assert {fmt: o["got"] for fmt, o in done.outcome.items()} == {
        f.format: f.sha256 for f in released.files.all()
    }
    # Another seed draws another sample: the comparison is real.
    summary = {**released.summary, "safepub": {**released.summary["safepub"]}}
    summary["safepub"]["seed"] += 1
    ReleaseRequest.objects.filter(pk=released.pk).update(summary=summary)
    other = reproduction.reproduce(reproduction.request_reproduction(officer, released.pk).pk)
    assert other.state == Reproduction.State.DIFFERENT
    # The re-run spends nothing.
    spent = BudgetEntry.objects.filter(dataset=released.dataset, kind=Kind.DP_SPEND)
    assert [e.epsilon for e in spent] == [Decimal("1")]


def test_the_ledger_shows_an_approved_safepub_extract_once_as_its_spend(released, dataset, officer):
    lines = list(BudgetEntry.objects.filter(dataset=dataset).exclude(kind=Kind.BUDGET_SET))
    assert [(e.kind, e.release_request_id, e.epsilon) for e in lines] == [
        (Kind.DP_SPEND, released.pk, Decimal("1"))
    ]
    ledger = budget.ledger_for(dataset)
    assert (ledger.dp_releases, ledger.row_level_releases) == (1, 0)
    html = page(officer, reverse("releases:budget_detail", args=[dataset.pk]))
    rows = re.findall(r'<tr data-ledger="\d+" data-ledger-kind="(\w+)">(.*?)</tr>', html, re.S)
    kinds = [kind for kind, _ in rows]
    assert kinds.count("dp_spend") == 1 and "row_level_release" not in kinds
    (spend,) = [text for kind, text in rows if kind == "dp_spend"]
    # The line says what it was: the extract's model, its request, and its ε.
    assert "(1, 1e-05)-differential privacy (SafePub" in spend
    assert f"#{released.pk}" in spend and 'data-request-state="approved"' in spend
    assert "outside" not in spend


# --- The API ------------------------------------------------------------------------------


@pytest.fixture
def _fresh_rate_counts():
    cache.clear()  # the rate limit's counts: the test starts with none


@pytest.mark.usefixtures("_fresh_rate_counts")
def test_a_safepub_request_over_the_api_runs_and_a_second_over_budget_is_refused(
    dataset, steward, django_capture_on_commit_callbacks
):
    api = client_for(token_for(steward))
    body = {"models": {"safepub": {"epsilon": 2, "delta": 0.00001, "steps": 4}}}
    with eager_celery(), django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/datasets/{dataset.pk}/requests", body, content_type="application/json"
        )
    assert response.status_code == 201, response.content
    request_id = response.json()["id"]
    assert api.get(f"/api/v1/requests/{request_id}").json()["state"] == "ready"
    summary = api.get(f"/api/v1/requests/{request_id}/summary").json()
    drawn = summary["safepub"]
    assert (drawn["epsilon"], drawn["delta"], drawn["k"]) == (
        2.0,
        1e-5,
        SafePub(epsilon=2, delta=1e-5).k,
    )
    assert drawn["mode"] == "data-dependent" and drawn["input_rows"] == 1500
    sample = sample_rows(1500, drawn["beta"], drawn["seed"])
    assert drawn["sampled_rows"] == int(sample.sum())
    assert summary["rows_out"] == drawn["sampled_rows"] - summary["suppressed"]
    assert budget.remaining(dataset).epsilon == Decimal("1")

    refused = api.post(
        f"/api/v1/datasets/{dataset.pk}/requests", body, content_type="application/json"
    )
    assert refused.status_code == 400, refused.content
    assert refused["Content-Type"] == "application/problem+json"
    assert "needs ε 2" in refused.json()["detail"] and "only ε 1" in refused.json()["detail"]
    assert ReleaseRequest.objects.count() == 1
