"""The whole pipeline over the HTTP API only, with tokens: a steward uploads Adult, tags it,
attaches hierarchies and asks for k=5; the worker runs (eager Celery); the requester cannot
approve their own request, another officer does; the recipient accepts the terms and
downloads. The file's SHA-256 is the header's, and k holds on the bytes (plain pandas)."""

from __future__ import annotations

import hashlib
import io

import pandas as pd
import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile

from releases.models import AuditEvent, Dataset, ReleaseRequest
from tests.conftest import ADULT
from tests.support.api import client_for, eager_celery, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()  # the rate limit's counts (per token, per address): each test starts with none


QUASI = ["age", "education", "marital-status", "race", "sex"]


def test_upload_tag_request_approve_download_over_the_api(
    steward_officer, officer, recipient, django_capture_on_commit_callbacks
):
    steward_api = client_for(token_for(steward_officer))
    officer_api = client_for(token_for(officer))
    recipient_api = client_for(token_for(recipient))

    with eager_celery(), django_capture_on_commit_callbacks(execute=True):
        response = steward_api.post(
            "/api/v1/datasets",
            {"file": SimpleUploadedFile("adult.csv", (ADULT / "adult.csv").read_bytes())},
        )
    assert response.status_code == 201, response.content
    dataset_id = response.json()["id"]
    detail = steward_api.get(f"/api/v1/datasets/{dataset_id}").json()
    assert detail["status"] == Dataset.Status.READY, detail
    assert detail["rows"] == 30162 and detail["columns"] == 9

    roles = {name: "quasi" for name in QUASI} | {
        "native-country": "withheld",
        "workclass": "withheld",
        "occupation": "withheld",
        "salary-class": "insensitive",
    }
    response = steward_api.patch(
        f"/api/v1/datasets/{dataset_id}/columns", {"roles": roles}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    assert {c["name"]: c["role"] for c in response.json()} == roles

    columns = steward_api.get(f"/api/v1/datasets/{dataset_id}/columns?limit=50").json()
    ids = {c["name"]: c["id"] for c in columns["items"]}
    for name in QUASI:
        path = ADULT / f"adult_hierarchy_{name}.csv"
        response = steward_api.post(
            f"/api/v1/datasets/{dataset_id}/columns/{ids[name]}/hierarchy",
            {"file": SimpleUploadedFile(path.name, path.read_bytes())},
        )
        assert response.status_code == 200, response.content
        assert response.json()["source"] == "uploaded"
    hierarchies = steward_api.get(f"/api/v1/datasets/{dataset_id}/hierarchies").json()
    assert {h["column"] for h in hierarchies if h["source"] == "uploaded"} == set(QUASI)

    with eager_celery(), django_capture_on_commit_callbacks(execute=True):
        response = steward_api.post(
            f"/api/v1/datasets/{dataset_id}/requests",
            {
                "models": {"k-anonymity": {"k": 5}},
                "suppression_percent": 5,
                "recipients": [recipient.username],
            },
            content_type="application/json",
        )
    assert response.status_code == 201, response.content
    request_id = response.json()["id"]
    status = steward_api.get(f"/api/v1/requests/{request_id}").json()
    assert status["state"] == ReleaseRequest.State.READY, status
    checks = steward_api.get(f"/api/v1/requests/{request_id}/checks").json()
    assert checks and all(c["passed"] for c in checks), checks
    summary = steward_api.get(f"/api/v1/requests/{request_id}/summary").json()
    assert summary["quasi_identifiers"] == QUASI or set(summary["quasi_identifiers"]) == set(QUASI)

    # The requester holds the officer role too, and still cannot approve their own request.
    own = steward_api.post(
        f"/api/v1/requests/{request_id}/reviews",
        {"decision": "approve"},
        content_type="application/json",
    )
    assert own.status_code == 403
    assert own["Content-Type"] == "application/problem+json"
    assert own.json()["detail"] == "Nobody can review a release they requested themselves."

    # The recipient sees nothing before the approval.
    assert recipient_api.get(f"/api/v1/releases/{request_id}").status_code == 404

    with django_capture_on_commit_callbacks(execute=False):
        approved = officer_api.post(
            f"/api/v1/requests/{request_id}/reviews",
            {"decision": "approve", "comment": "Fine."},
            content_type="application/json",
        )
    assert approved.status_code == 200, approved.content
    assert approved.json()["state"] == ReleaseRequest.State.APPROVED

    release = recipient_api.get(f"/api/v1/releases/{request_id}").json()
    assert release["terms_accepted"] is False
    before_terms = recipient_api.get(f"/api/v1/releases/{request_id}/files/csv")
    assert before_terms.status_code == 409
    assert recipient_api.post(f"/api/v1/releases/{request_id}/terms").status_code == 200

    download = recipient_api.get(f"/api/v1/releases/{request_id}/files/csv")
    assert download.status_code == 200
    body = b"".join(download.streaming_content)
    assert download["X-Content-SHA256"] == hashlib.sha256(body).hexdigest()
    listed = {f["format"]: f["sha256"] for f in release["files"]}
    assert listed["csv"] == download["X-Content-SHA256"]

    # k-anonymity on the bytes received, by a plain group-by.
    frame = pd.read_csv(io.BytesIO(body), dtype=str, keep_default_na=False)
    assert set(QUASI) <= set(frame.columns)
    assert "native-country" not in frame.columns
    sizes = frame.groupby(QUASI).size()
    assert sizes.min() >= 5, sizes.sort_values().head()
    assert 30162 * 0.95 <= len(frame) <= 30162

    # The API's calls wrote the pages' audit rows.
    actions = list(
        AuditEvent.objects.filter(request_id=request_id).values_list("action", flat=True)
    )
    for action in ("request", "review", "terms_accepted", "download"):
        assert action in actions, (action, actions)
    refused = AuditEvent.objects.filter(action="download_refused", request_id=request_id)
    assert refused.count() == 0  # the 409 before the terms is a lifecycle refusal, not logged
    trail = officer_api.get(f"/api/v1/requests/{request_id}/audit?limit=100").json()
    assert {e["action"] for e in trail["items"]} >= {"request", "review", "download"}
