"""Pages and permissions around a request ready for review: each role against reviewing and
downloading, through the web layer (the other pages: tests/test_views.py). The steward's ready
request is made once for the module (tests/support/world.py): each test changes it inside its
own transaction, rolled back, and works on its own copy of the files."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from releases.models import AuditEvent, ReleaseRequest
from tests.support import world as world_support
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import approve

pytestmark = pytest.mark.django_db


shared_ready, steward, ready_request = world_support.module_ready_request()


@pytest.fixture
def dataset(steward):
    return make_dataset(steward, synthetic_csv(), "people.csv")


def login(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def approved(ready_request, officer, recipient):
    return approve(officer, ready_request, recipient)


def test_every_page_requires_login(client, dataset, ready_request):
    for url in [
        reverse("releases:home"),
        reverse("releases:dataset_list"),
        reverse("releases:dataset_detail", args=[dataset.pk]),
        reverse("releases:request_detail", args=[ready_request.pk]),
        reverse("releases:review_queue"),
        reverse("releases:download", args=[ready_request.pk]),
    ]:
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url


def test_status_polling_stops_when_the_request_is_final(client, steward, ready_request):
    login(client, steward)
    response = client.get(
        reverse("releases:request_status", args=[ready_request.pk]), HTTP_HX_REQUEST="true"
    )
    assert response["HX-Refresh"] == "true"
    assert "hx-trigger" not in response.content.decode()


def test_review_page_shows_summary_levels_and_classes(client, officer, ready_request):
    login(client, officer)
    page = client.get(reverse("releases:request_detail", args=[ready_request.pk])).content.decode()
    assert 'id="k-achieved"' in page and "Equivalence classes" in page and "Approve" in page
    queue = client.get(reverse("releases:review_queue")).content.decode()
    assert f"#{ready_request.pk}" in queue
    classes = client.get(
        reverse("releases:request_classes", args=[ready_request.pk]) + "?page=1",
        HTTP_HX_REQUEST="true",
    )
    assert classes.status_code == 200 and 'id="classes"' in classes.content.decode()


@pytest.mark.parametrize("role_user", ["steward", "recipient", "other_steward"])
def test_only_officers_decide(client, request, ready_request, role_user):
    login(client, request.getfixturevalue(role_user))
    response = client.post(
        reverse("releases:request_review", args=[ready_request.pk]), {"decision": "approve"}
    )
    assert response.status_code in (403, 404)
    ready_request.refresh_from_db()
    assert ready_request.state == ReleaseRequest.State.READY


def test_reject_without_a_comment_is_refused_on_the_page(client, officer, ready_request):
    login(client, officer)
    response = client.post(
        reverse("releases:request_review", args=[ready_request.pk]),
        {"decision": "reject", "comment": ""},
    )
    assert response.status_code == 400 and "Give a comment" in response.content.decode()
    response = client.post(
        reverse("releases:request_review", args=[ready_request.pk]),
        {"decision": "reject", "comment": "Too risky"},
    )
    assert response.status_code == 302
    ready_request.refresh_from_db()
    assert ready_request.state == ReleaseRequest.State.REJECTED
    assert ready_request.reviews.get().comment == "Too risky"


@pytest.mark.parametrize("role_user", ["steward", "officer", "recipient"])
def test_nobody_downloads_an_unapproved_release(client, request, ready_request, role_user):
    login(client, request.getfixturevalue(role_user))
    response = client.get(reverse("releases:download", args=[ready_request.pk]))
    # Recipients do not even see unapproved requests (404); officers never download (403); the
    # requester is refused until the release is approved (409).
    assert response.status_code == {"recipient": 404, "officer": 403, "steward": 409}[role_user]
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.DOWNLOAD).exists()


@pytest.mark.parametrize(
    ("role_user", "status"),
    [("steward", 200), ("recipient", 200), ("officer", 403), ("other_steward", 404)],
)
def test_approved_release_download_by_role(client, request, approved, role_user, status):
    user = request.getfixturevalue(role_user)
    login(client, user)
    url = reverse("releases:download", args=[approved.pk])
    if status == 200:
        # The terms of use first: the download is refused until they are accepted.
        assert client.get(url).status_code == 409
        assert client.post(reverse("releases:accept_terms", args=[approved.pk])).status_code == 302
    response = client.get(url)
    assert response.status_code == status
    logged = AuditEvent.objects.filter(action=AuditEvent.Action.DOWNLOAD, actor=user).count()
    assert logged == (1 if status == 200 else 0)
    if status == 200:
        assert response["Content-Disposition"].startswith("attachment;")
        content = b"".join(response.streaming_content)
        assert "name" not in content.decode().splitlines()[0].split(",")
        report = client.get(reverse("releases:download_report", args=[approved.pk]))
        report = json.loads(b"".join(report.streaming_content))
        assert report["extract"]["sha256"] == approved.extract_sha256
        assert [a["by"] for a in report["approvals"]] == ["officer"]
