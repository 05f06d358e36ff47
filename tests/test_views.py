"""Pages and permissions: each role against each action, through the web layer (reviewing and
downloading a ready request: tests/test_views_review.py)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from releases.datasets import profiling
from releases.models import AuditEvent, Dataset, ReleaseRequest, Role
from releases.requests import run as release_run
from tests.conftest import csv_upload
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import request_release, tag

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(steward):
    return make_dataset(steward, synthetic_csv(), "people.csv")


def login(client, user):
    client.force_login(user)
    return client


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


def test_officer_cannot_decide_own_request_even_by_crafted_post(client, steward_officer):
    dataset = make_dataset(steward_officer, synthetic_csv())
    tag(steward_officer, dataset, {"age": Role.QUASI_IDENTIFIER})
    own = request_release(steward_officer, dataset, k=5, suppression_limit=0.05)
    release_run.run_release(own.pk)
    login(client, steward_officer)
    page = client.get(reverse("releases:request_detail", args=[own.pk])).content.decode()
    assert "Privacy officers other than you will review" in page and 'value="approve"' not in page
    response = client.post(
        reverse("releases:request_review", args=[own.pk]), {"decision": "approve"}
    )
    assert response.status_code == 403
    own.refresh_from_db()
    assert own.state == ReleaseRequest.State.READY


def test_uploads_are_not_served_from_media_url(client, steward, dataset):
    login(client, steward)
    from django.conf import settings

    assert client.get(settings.MEDIA_URL + dataset.file_path).status_code == 404
