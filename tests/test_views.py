"""Pages and permissions: each role against each action, through the web layer."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from releases.models import AuditEvent, Dataset, ReleaseRequest, Role
from releases.services import profiling, release
from tests.conftest import csv_upload
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import approve, request_release, tag

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(steward):
    return make_dataset(steward, synthetic_csv(), "people.csv")


@pytest.fixture
def approved(ready_request, officer, recipient):
    return approve(officer, ready_request, recipient)


def login(client, user):
    client.force_login(user)
    return client


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


def test_upload_page_shows_columns_and_first_rows(client, steward):
    login(client, steward)
    response = client.post(
        reverse("releases:dataset_list"), {"file": csv_upload(synthetic_csv(), "people.csv")}
    )
    assert Dataset.objects.count() == 1
    assert response.status_code == 302
    # Until the worker has profiled it, the page shows progress, polling its status.
    page = client.get(response["Location"]).content.decode()
    assert "people.csv" in page and "Reading the file" in page and 'hx-trigger="every 1s"' in page
    profiling.profile_dataset(Dataset.objects.get().pk)
    page = client.get(response["Location"]).content.decode()
    assert "people.csv" in page and "Person 0" in page and "diagnosis" in page
    assert 'hx-trigger="every 1s"' not in page


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "file is empty"),
        (b"\x00\x01\x02binary", "binary"),
        (b"a,b\n\xff\xfe\x00\x00,2\n", "binary"),
    ],
)
def test_bad_upload_shows_a_message_and_creates_nothing(client, steward, content, message):
    login(client, steward)
    response = client.post(reverse("releases:dataset_list"), {"file": csv_upload(content)})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Dataset.objects.count() == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"a,b\n1,2\n1,2,3\n", "Line 3 has 3 fields"),
        (b"a,b\n", "only a header"),
    ],
)
def test_a_file_refused_by_profiling_shows_its_message_on_the_dataset_page(
    client, steward, content, message
):
    login(client, steward)
    response = client.post(reverse("releases:dataset_list"), {"file": csv_upload(content)})
    profiling.profile_dataset(Dataset.objects.get().pk)
    page = client.get(response["Location"]).content.decode()
    assert "The file was refused" in page and message in page
    assert not Dataset.objects.get().columns.exists()


@pytest.mark.parametrize("role_user", ["officer", "recipient"])
def test_non_stewards_cannot_upload(client, request, role_user):
    login(client, request.getfixturevalue(role_user))
    response = client.post(reverse("releases:dataset_list"), {"file": csv_upload(synthetic_csv())})
    assert response.status_code == 403
    assert Dataset.objects.count() == 0


def test_another_stewards_dataset_is_out_of_reach(client, other_steward, dataset):
    login(client, other_steward)
    column = dataset.columns.first()
    assert client.get(reverse("releases:dataset_detail", args=[dataset.pk])).status_code == 404
    response = client.post(
        reverse("releases:column_update", args=[dataset.pk, column.pk]),
        {f"role-{column.pk}": Role.IDENTIFIER},
    )
    assert response.status_code == 404
    response = client.post(
        reverse("releases:request_create", args=[dataset.pk]),
        {"use__k-anonymity": "on", "k-anonymity__k": 5, "suppression_percent": 5},
    )
    assert response.status_code == 404
    assert not ReleaseRequest.objects.exists()


def test_tagging_with_htmx_answers_the_row_and_plain_post_redirects(client, steward, dataset):
    login(client, steward)
    age = dataset.columns.get(name="age")
    url = reverse("releases:column_update", args=[dataset.pk, age.pk])
    response = client.post(url, {f"role-{age.pk}": Role.QUASI_IDENTIFIER}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert body.strip().startswith(f'<tbody id="column-{age.pk}"') and "automatic" in body
    age.refresh_from_db()
    assert age.role == Role.QUASI_IDENTIFIER

    zip_column = dataset.columns.get(name="zip")
    response = client.post(
        reverse("releases:tagging", args=[dataset.pk]),
        {
            f"role-{c.pk}": (Role.QUASI_IDENTIFIER if c.name == "zip" else c.role)
            for c in dataset.columns.all()
        },
    )
    assert response.status_code == 302
    zip_column.refresh_from_db()
    assert zip_column.role == Role.QUASI_IDENTIFIER
    assert AuditEvent.objects.filter(action=AuditEvent.Action.TAGGING).count() == 2


def test_a_bad_hierarchy_is_reported_in_the_row(client, steward, dataset):
    login(client, steward)
    zip_column = dataset.columns.get(name="zip")
    response = client.post(
        reverse("releases:column_update", args=[dataset.pk, zip_column.pk]),
        {
            f"role-{zip_column.pk}": Role.QUASI_IDENTIFIER,
            f"hierarchy-{zip_column.pk}": csv_upload("02139;*\n", "zip.csv"),
        },
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert 'role="alert"' in response.content.decode()
    zip_column.refresh_from_db()
    assert zip_column.hierarchy_source == "auto"


def test_request_form_creates_a_request_and_redirects_to_its_page(client, steward, dataset):
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER})
    login(client, steward)
    response = client.post(
        reverse("releases:request_create", args=[dataset.pk]),
        {"use__k-anonymity": "on", "k-anonymity__k": 5, "suppression_percent": "2.5"},
    )
    release_request = ReleaseRequest.objects.get()
    assert response["Location"] == reverse("releases:request_detail", args=[release_request.pk])
    assert release_request.parameters == {
        "model": {
            "criteria": [{"model": "k-anonymity", "k": 5}],
            "suppression_limit": 0.025,
            "population": None,
        },
        "algorithm": "optimal",
        "levels": None,
    }
    page = client.get(response["Location"]).content.decode()
    assert "Queued" in page and 'hx-trigger="every 1s"' in page


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


def test_officer_cannot_decide_own_request_even_by_crafted_post(client, steward_officer):
    dataset = make_dataset(steward_officer, synthetic_csv())
    tag(steward_officer, dataset, {"age": Role.QUASI_IDENTIFIER})
    own = request_release(steward_officer, dataset, k=5, suppression_limit=0.05)
    release.run_release(own.pk)
    login(client, steward_officer)
    page = client.get(reverse("releases:request_detail", args=[own.pk])).content.decode()
    assert "Privacy officers other than you will review" in page and 'value="approve"' not in page
    response = client.post(
        reverse("releases:request_review", args=[own.pk]), {"decision": "approve"}
    )
    assert response.status_code == 403
    own.refresh_from_db()
    assert own.state == ReleaseRequest.State.READY


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


def test_uploads_are_not_served_from_media_url(client, steward, dataset):
    login(client, steward)
    from django.conf import settings

    assert client.get(settings.MEDIA_URL + dataset.file_path).status_code == 404
