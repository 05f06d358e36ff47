"""A colleague's dataset in a project that lets stewards see all of its datasets: its page and
every fragment the page loads are readable, shown without any form that would change it, and
every write is refused (403, with a sentence) and writes nothing. With the setting off, or for
a steward of another project, the dataset stays out of reach (404). And the statistics form
starts with the project's terms of use, as the extract's form does."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from releases.datasets import services as dataset_services
from releases.models import AuditEvent, Dataset, DatasetColumn, Project, ReleaseRequest, Role
from tests.conftest import make_user
from tests.support import factories, members
from tests.support.api import client_for, token_for
from tests.support.world import people_csv

pytestmark = pytest.mark.django_db

TAGS = {
    "name": Role.IDENTIFIER,
    "age": Role.QUASI_IDENTIFIER,
    "sex": Role.QUASI_IDENTIFIER,
    "diagnosis": Role.SENSITIVE,
}
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def theirs(db) -> Dataset:
    """A colleague's tagged dataset in the default project, with a declared value list."""
    colleague = make_user("colleague", "steward")
    dataset = factories.make_dataset(colleague, people_csv(60), "theirs.csv")
    for column in dataset.columns.all():
        dataset_services.set_column_role(
            colleague, dataset, column.pk, TAGS.get(column.name, Role.WITHHELD)
        )
    zip_column = dataset.columns.get(name="zip")
    dataset_services.set_declared_domain(colleague, dataset, zip_column.pk, "02139\n02141")
    return dataset


def _see_all(on: bool) -> None:
    Project.objects.filter(slug="default").update(stewards_see_all=on)


def _reads(dataset: Dataset) -> dict[str, tuple[str, dict]]:
    """Every read of the dataset page and of what it loads: name -> (url, extra headers)."""
    age = dataset.columns.get(name="age").pk
    return {
        "page": (reverse("releases:dataset_detail", args=[dataset.pk]), {}),
        "status": (reverse("releases:dataset_status", args=[dataset.pk]), {}),
        "risk": (reverse("releases:dataset_risk", args=[dataset.pk]), HTMX),
        "suggestions": (reverse("releases:suggestions", args=[dataset.pk]), HTMX),
        "hierarchy preview": (
            reverse("releases:hierarchy_preview", args=[dataset.pk, age]),
            HTMX,
        ),
        "hierarchy download": (
            reverse("releases:hierarchy_download", args=[dataset.pk, age]),
            {},
        ),
        "request decisions": (reverse("releases:request_decisions", args=[dataset.pk]), HTMX),
    }


def _writes(dataset: Dataset) -> dict[str, tuple[str, dict]]:
    """Every post that would change the dataset, with data that would change it."""
    age = dataset.columns.get(name="age").pk
    name = dataset.columns.get(name="name").pk
    zip_column = dataset.columns.get(name="zip").pk
    return {
        "tagging": (
            reverse("releases:tagging", args=[dataset.pk]),
            {f"role-{name}": Role.WITHHELD},
        ),
        "accept suggestions": (reverse("releases:accept_suggestions", args=[dataset.pk]), {}),
        "column role": (
            reverse("releases:column_update", args=[dataset.pk, name]),
            {f"role-{name}": Role.WITHHELD},
        ),
        "column type": (
            reverse("releases:column_type", args=[dataset.pk, age]),
            {f"type-{age}": "string"},
        ),
        "declared values": (
            reverse("releases:column_domain", args=[dataset.pk, zip_column]),
            {f"domain-{zip_column}": "99999"},
        ),
        "hierarchy": (
            reverse("releases:column_hierarchy", args=[dataset.pk, age]),
            {f"builder-{age}": "intervals", f"widths-{age}": "10, 20"},
        ),
        "request": (
            reverse("releases:request_create", args=[dataset.pk]),
            {"k": "5", "suppression_limit": "5"},
        ),
        "statistics request": (
            reverse("releases:statistics_request", args=[dataset.pk]),
            {"action": "submit"},
        ),
        "statistics preview": (reverse("releases:statistics_preview", args=[dataset.pk]), {}),
        "new version": (
            reverse("releases:version_upload", args=[dataset.pk]),
            {"file": factories.upload(people_csv(30), "v2.csv")},
        ),
        "key column": (
            reverse("releases:key_column", args=[dataset.pk]),
            {"key_column": "name"},
        ),
        "delete": (reverse("releases:dataset_delete", args=[dataset.pk]), {}),
    }


def _state(dataset: Dataset) -> tuple:
    """What a write would change: the columns' decisions, the datasets, requests, audit rows."""
    columns = list(
        DatasetColumn.objects.filter(dataset=dataset)
        .order_by("pk")
        .values_list(
            "role", "hierarchy_source", "hierarchy_text", "type_override", "declared_domain"
        )
    )
    key = Dataset.objects.filter(pk=dataset.pk).values_list("key_column", flat=True).first()
    return (
        columns,
        key,
        Dataset.objects.count(),
        ReleaseRequest.objects.count(),
        AuditEvent.objects.count(),
    )


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_colleague_reads_the_page_and_each_fragment_without_any_edit_form(theirs, steward):
    _see_all(True)
    client = _client(steward)
    for what, (url, headers) in _reads(theirs).items():
        response = client.get(url, **headers)
        assert response.status_code == 200, what
    page = client.get(reverse("releases:dataset_detail", args=[theirs.pk])).content.decode()
    assert "uploaded by colleague" in page and "read-only" in page
    # The columns and their decisions are shown...
    assert "Quasi-identifier" in page and "02141" in page
    # ... with nothing that posts a change.
    assert "hx-post" not in page
    forms = re.findall(r'<form[^>]*action="([^"]*)"', page)
    assert [a for a in forms if f"/datasets/{theirs.pk}/" in a] == [], forms
    for control in ('name="role-', 'name="type-', 'name="domain-', 'name="builder-'):
        assert control not in page, control
    for button in ("Save tagging", "Delete dataset", "Request a release", "Request statistics"):
        assert button not in page, button
    suggestions = client.get(reverse("releases:suggestions", args=[theirs.pk]), **HTMX)
    assert b"<form" not in suggestions.content
    # The hierarchy in use is previewed (read only), and downloadable.
    age = theirs.columns.get(name="age").pk
    preview = client.get(reverse("releases:hierarchy_preview", args=[theirs.pk, age]), **HTMX)
    assert b"<table" in preview.content or b"level" in preview.content.lower()
    download = client.get(reverse("releases:hierarchy_download", args=[theirs.pk, age]))
    assert b"".join(download.streaming_content).count(b"\n") > 5


def test_the_owner_still_sees_every_edit_form(theirs):
    _see_all(True)
    page = _client(theirs.owner).get(reverse("releases:dataset_detail", args=[theirs.pk]))
    text = page.content.decode()
    assert page.status_code == 200 and "read-only" not in text
    for marker in ('name="role-', "Save tagging", "Delete dataset", 'id="request-form"', "hx-post"):
        assert marker in text, marker


def test_each_write_of_a_colleague_is_refused_with_a_sentence_and_writes_nothing(theirs, steward):
    _see_all(True)
    client = _client(steward)
    before = _state(theirs)
    for what, (url, data) in _writes(theirs).items():
        response = client.post(url, data, **HTMX)
        assert response.status_code == 403, what
        assert "only they can change it" in response.content.decode(), what
    assert _state(theirs) == before
    # The statistics form (a page only for asking) is refused the same way.
    form = client.get(reverse("releases:statistics_request", args=[theirs.pk]))
    assert form.status_code == 403


def test_with_the_setting_off_the_colleagues_dataset_stays_out_of_reach(theirs, steward):
    _see_all(False)
    client = _client(steward)
    for what, (url, headers) in _reads(theirs).items():
        assert client.get(url, **headers).status_code == 404, what
    before = _state(theirs)
    for what, (url, data) in _writes(theirs).items():
        assert client.post(url, data, **HTMX).status_code == 404, what
    assert _state(theirs) == before


def test_a_steward_of_another_project_gets_404_even_with_the_setting_on(theirs):
    _see_all(True)
    elsewhere = make_user("elsewhere")
    members.grant(
        elsewhere, "steward", project=members.make_project("other", stewards_see_all=True)
    )
    client = _client(elsewhere)
    for what, (url, headers) in _reads(theirs).items():
        assert client.get(url, **headers).status_code == 404, what
    before = _state(theirs)
    for what, (url, data) in _writes(theirs).items():
        assert client.post(url, data, **HTMX).status_code == 404, what
    assert _state(theirs) == before


def test_the_api_reads_a_colleagues_dataset_and_refuses_its_changes(theirs, steward):
    _see_all(True)
    api = client_for(token_for(steward))
    base = f"/api/v1/datasets/{theirs.pk}"
    for path in ("", "/columns", "/versions", "/hierarchies"):
        assert api.get(base + path).status_code == 200, path
    before = _state(theirs)
    patched = api.patch(
        base + "/columns", {"roles": {"name": Role.WITHHELD}}, content_type="application/json"
    )
    assert patched.status_code == 403 and "only they can change it" in patched.json()["detail"]
    assert _state(theirs) == before
    _see_all(False)
    assert api.get(base).status_code == 404


# --- The statistics form's terms -----------------------------------------------------------------


def _terms_field(page: str) -> str:
    found = re.search(r'<textarea[^>]*name="terms"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, "no terms field"
    return found.group(1).strip()


def test_the_statistics_form_starts_with_the_projects_terms_else_the_sites(theirs, settings):
    settings.DEFAULT_DATA_SHARING_TERMS = "Site-wide terms: no linking."
    client = _client(theirs.owner)
    url = reverse("releases:statistics_request", args=[theirs.pk])
    assert _terms_field(client.get(url).content.decode()) == "Site-wide terms: no linking."
    Project.objects.filter(slug="default").update(default_terms="Study terms: delete in a year.")
    statistics = _terms_field(client.get(url).content.decode())
    assert statistics == "Study terms: delete in a year."
    # The same as the extract's form on the dataset page.
    page = client.get(reverse("releases:dataset_detail", args=[theirs.pk])).content.decode()
    assert _terms_field(page) == statistics
