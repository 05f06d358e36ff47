"""What the API accepts and refuses, with the pages' rules and sentences: any privacy model of
the registry through the request form, the upload's bounds, a statistics release through its
query forms and the budget, a cancellation."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile

from releases.datasets import budget
from releases.models import AuditEvent, Dataset, ReleaseRequest, Role
from tests.support import factories
from tests.support.api import client_for, eager_celery, token_for
from tests.support.workflow import tag

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()  # the rate limit's counts: each test starts with none


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


def _ask(api, dataset, body):
    return api.post(
        f"/api/v1/datasets/{dataset.pk}/requests", body, content_type="application/json"
    )


def test_a_request_with_another_privacy_model_runs_it(steward, tagged):
    api = client_for(token_for(steward))
    response = _ask(
        api,
        tagged,
        {
            "models": {"k-anonymity": {"k": 3}, "l-diversity": {"l": 2, "variant": "distinct"}},
            "suppression_percent": 10,
        },
    )
    assert response.status_code == 201, response.content
    release_request = ReleaseRequest.objects.get(pk=response.json()["id"])
    names = {c.name for c in release_request.privacy_model.criteria}
    assert {"k-anonymity", "l-diversity"} <= names
    assert release_request.privacy_model.suppression_limit == pytest.approx(0.10)
    assert AuditEvent.objects.filter(action="request", request=release_request).count() == 1


@pytest.mark.parametrize(
    ("models", "field", "sentence"),
    [
        ({}, "__all__", "Choose at least one privacy model."),
        ({"k-anonymity": {}}, "k-anonymity__k", "k-anonymity needs"),
        ({"l-diversity": {"l": 0.5}}, "l-diversity__l", ""),
        (
            {"delta-presence": {"dmin": 0.1, "dmax": 0.5}},
            "delta-presence__dmin",
            "needs a research subset",
        ),
    ],
)
def test_a_request_the_form_refuses_gets_400_with_the_forms_sentences(
    steward, tagged, models, field, sentence
):
    response = _ask(client_for(token_for(steward)), tagged, {"models": models})
    assert response.status_code == 400
    problem = response.json()
    assert field in problem["errors"], problem
    assert sentence in problem["errors"][field][0]
    assert not ReleaseRequest.objects.exists()


def test_an_unknown_model_parameter_or_recipient_is_named(steward, tagged):
    api = client_for(token_for(steward))
    for body, named in (
        ({"models": {"k-anonimity": {"k": 5}}}, "k-anonimity"),
        ({"models": {"k-anonymity": {"k": 5, "kk": 1}}}, "k-anonymity.kk"),
        ({"models": {"k-anonymity": {"k": 5}}, "population": {"terms": 1}}, "terms"),
        ({"models": {"k-anonymity": {"k": 5}}, "recipients": ["nobody"]}, "nobody"),
    ):
        response = _ask(api, tagged, body)
        assert response.status_code == 400 and named in response.json()["detail"], body
    assert not ReleaseRequest.objects.exists()


def test_weights_and_level_limits_go_with_the_request_as_from_the_form(steward, tagged):
    api = client_for(token_for(steward))
    base = {"models": {"k-anonymity": {"k": 3}}, "suppression_percent": 10}
    for extra, named in (
        ({"weights": {"diagnosis": 1}}, "weights.diagnosis (not a quasi-identifier)"),
        ({"level_limits": {"name": [0, 1]}}, "level_limits.name (not a quasi-identifier)"),
    ):
        response = _ask(api, tagged, {**base, **extra})
        assert response.status_code == 400 and named in response.json()["detail"], extra
    response = _ask(api, tagged, {**base, "level_limits": {"age": [2, 1]}})
    assert response.status_code == 400
    assert "below its lowest" in response.json()["detail"]
    assert not ReleaseRequest.objects.exists()

    body = {**base, "weights": {"age": 0.2, "sex": 1}, "level_limits": {"sex": [None, 0]}}
    response = _ask(api, tagged, body)
    assert response.status_code == 201, response.content
    stored = ReleaseRequest.objects.get(pk=response.json()["id"]).parameters
    assert stored["weights"] == {"age": 0.2, "sex": 1.0}
    assert stored["level_limits"] == {"sex": [None, 0]}


def test_columns_without_a_role_block_a_request_as_on_the_page(steward):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER}, rest=None)
    response = _ask(client_for(token_for(steward)), dataset, {"models": {"k-anonymity": {"k": 5}}})
    assert response.status_code == 400
    assert "No role yet: name, zip, sex, diagnosis" in response.json()["detail"]


def test_an_upload_over_the_limit_is_refused_before_it_is_read(steward, settings):
    settings.MAX_UPLOAD_BYTES = 1000
    api = client_for(token_for(steward))
    big = SimpleUploadedFile("big.csv", b"a,b\n" + b"1,2\n" * 40_000)
    response = api.post("/api/v1/datasets", {"file": big})
    assert response.status_code == 413
    assert (
        response.json()["detail"]
        == "The file is larger than the 1000 bytes limit (MAX_UPLOAD_BYTES)."
    )
    assert not Dataset.objects.exists()
    assert AuditEvent.objects.filter(action="upload_rejected", actor=steward).count() == 1
    # Under the bound but over the limit once read: the service refuses it too.
    response = api.post("/api/v1/datasets", {"file": SimpleUploadedFile("b.csv", b"a\n" * 600)})
    assert response.status_code == 400
    assert "MAX_UPLOAD_BYTES" in response.json()["detail"]


def test_an_upload_without_a_file_or_of_an_unknown_format_is_refused(steward):
    api = client_for(token_for(steward))
    missing = api.post("/api/v1/datasets", {"name": "x"})
    assert missing.status_code == 400 and "file" in missing.json()["errors"]
    binary = api.post(
        "/api/v1/datasets", {"file": SimpleUploadedFile("x.bin", b"\x00\x01\x02" * 100)}
    )
    assert binary.status_code == 400
    assert not Dataset.objects.exists()


def test_a_hierarchy_that_misses_values_is_refused_and_nothing_changes(steward, tagged):
    api = client_for(token_for(steward))
    age = tagged.columns.get(name="age")
    response = api.post(
        f"/api/v1/datasets/{tagged.pk}/columns/{age.pk}/hierarchy",
        {"file": SimpleUploadedFile("age.csv", b"18;adult;*\n")},
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("Hierarchy for age:")
    age.refresh_from_db()
    assert age.hierarchy_source == "auto" and not age.hierarchy_text


def test_a_statistics_release_over_the_api(
    steward, officer, recipient, tagged, django_capture_on_commit_callbacks
):
    budget.set_budget(officer, tagged, "1", 0)
    api = client_for(token_for(steward))
    refused = api.post(
        f"/api/v1/datasets/{tagged.pk}/statistics",
        {"queries": [{"kind": "count", "epsilon": 5}]},
        content_type="application/json",
    )
    assert refused.status_code == 400, refused.content
    assert refused.json()["detail"].startswith("These queries need ε 5, but only ε 1 of the")
    bad = api.post(
        f"/api/v1/datasets/{tagged.pk}/statistics",
        {"queries": [{"kind": "count", "epsilon": -1}]},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "queries[0].epsilon" in bad.json()["errors"]
    assert not ReleaseRequest.objects.exists()
    with eager_celery(), django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/v1/datasets/{tagged.pk}/statistics",
            {"queries": [{"kind": "count", "epsilon": 0.5}], "recipients": [recipient.username]},
            content_type="application/json",
        )
    assert response.status_code == 201, response.content
    request_id = response.json()["id"]
    mine = api.get(f"/api/v1/statistics/{request_id}").json()
    assert mine["state"] == "ready" and mine["queries"][0]["kind"] == "count"
    assert mine["result"], mine
    # Officers see it; a recipient sees nothing before approval, and no answers after.
    assert client_for(token_for(officer)).get(f"/api/v1/statistics/{request_id}").status_code == 200
    reader = client_for(token_for(recipient))
    assert reader.get(f"/api/v1/statistics/{request_id}").status_code == 404
    ReleaseRequest.objects.filter(pk=request_id).update(state=ReleaseRequest.State.APPROVED)
    seen = reader.get(f"/api/v1/statistics/{request_id}").json()
    assert seen["result"] is None and seen["queries"] == []


def test_cancelling_a_queued_request(steward, tagged, recipient):
    api = client_for(token_for(steward))
    created = _ask(api, tagged, {"models": {"k-anonymity": {"k": 5}}})
    request_id = created.json()["id"]
    assert created.json()["state"] == "queued"
    stranger = client_for(token_for(recipient))
    assert (
        stranger.post(
            f"/api/v1/requests/{request_id}/cancel", {}, content_type="application/json"
        ).status_code
        == 404
    )
    response = api.post(
        f"/api/v1/requests/{request_id}/cancel",
        {"reason": "wrong file"},
        content_type="application/json",
    )
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    event = AuditEvent.objects.get(action="cancel", request_id=request_id)
    assert event.actor == steward and event.detail["reason"] == "wrong file"
    again = api.post(f"/api/v1/requests/{request_id}/cancel", {}, content_type="application/json")
    assert again.status_code == 409
    assert again.json()["detail"].startswith("This request is cancelled")


def test_lists_are_paginated_with_a_bound(steward, settings):
    for i in range(3):
        factories.make_dataset(steward, factories.synthetic_csv(rows=20, seed=i), f"d{i}.csv")
    api = client_for(token_for(steward))
    first = api.get("/api/v1/datasets?limit=2").json()
    second = api.get("/api/v1/datasets?limit=2&offset=2").json()
    assert first["count"] == second["count"] == 3
    assert len(first["items"]) == 2 and len(second["items"]) == 1
    assert {d["id"] for d in first["items"]}.isdisjoint(d["id"] for d in second["items"])
    over = api.get(f"/api/v1/datasets?limit={settings.API_MAX_PAGE_SIZE + 1}")
    assert over.status_code == 400 and over["Content-Type"] == "application/problem+json"
    assert "limit" in over.json()["detail"]
