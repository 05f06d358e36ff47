"""Dataset versions: a new file uploaded as the next version keeps the previous version's
decisions (roles, hierarchies, type overrides, date orders, declared values), names its new,
missing and retyped columns, and cannot be requested while a new column has no role; the
lineage's key column is never released. Pages and API, with who may do what."""

from __future__ import annotations

import random
from unittest import mock

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from releases.core.errors import InvalidInput
from releases.datasets import profiling, versions
from releases.datasets import services as datasets
from releases.engine import Hierarchy
from releases.models import AuditEvent, Dataset, DatasetColumn, Role
from tests.support import factories
from tests.support.api import client_for, token_for
from tests.support.workflow import request_release, tag

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()


def people(rows: int, seed: int, *, drop: str = "", extra: str = "", visits_words=False) -> str:
    """People with a key, an age, a zip code, a sex, visits and a diagnosis; ``drop`` leaves a
    column out, ``extra`` adds one, ``visits_words`` writes visits as words (a retyped
    column)."""
    rng = random.Random(seed)
    header = ["pid", "age", "zip", "sex", "visits", "diagnosis"]
    if extra:
        header.append(extra)
    header = [h for h in header if h != drop]
    lines = [",".join(header)]
    for i in range(rows):
        row = {
            "pid": f"P{i:04d}",
            "age": str(rng.randint(18, 90)),
            "zip": rng.choice(["02139", "02141", "02142", "02138"]),
            "sex": rng.choice("FM"),
            "visits": rng.choice(["few", "many"]) if visits_words else str(rng.randint(0, 9)),
            "diagnosis": rng.choice(["flu", "asthma", "gout"]),
            extra: rng.choice(["north", "south"]),
        }
        lines.append(",".join(row[h] for h in header))
    return "\n".join(lines) + "\n"


def make_version(user, dataset: Dataset, content: str, filename: str = "next.csv") -> Dataset:
    """Upload the next version and profile it in this process (as the worker would)."""
    with mock.patch.object(datasets, "enqueue_profiling"):
        version = datasets.create_version(user, dataset, factories.upload(content, filename))
    profiling.profile_dataset(version.pk)
    version.refresh_from_db()
    return version


def column(dataset: Dataset, name: str) -> DatasetColumn:
    return dataset.columns.get(name=name)


@pytest.fixture
def first(steward):
    """Version 1, tagged: age a quasi-identifier with an interval hierarchy, sex a
    quasi-identifier with declared values, zip typed as categorical, the rest decided."""
    dataset = factories.make_dataset(steward, people(300, 1), "people.csv")
    tag(
        steward,
        dataset,
        {
            "pid": Role.IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "zip": Role.INSENSITIVE,
            "visits": Role.INSENSITIVE,
            "diagnosis": Role.SENSITIVE,
        },
    )
    datasets.set_hierarchy_builder(
        steward, dataset, column(dataset, "age").pk, "intervals", {"widths": [10, 20]}
    )
    datasets.set_declared_domain(steward, dataset, column(dataset, "sex").pk, "F\nM\nX")
    datasets.set_column_type(steward, dataset, column(dataset, "zip").pk, "text")
    return dataset


def test_a_version_keeps_the_decisions_of_the_columns_both_have(steward, first):
    second = make_version(
        steward, first, people(250, 2, drop="diagnosis", extra="region", visits_words=True)
    )
    assert second.status == Dataset.Status.READY, second.error
    assert (second.version, second.previous_id, second.lineage_id) == (2, first.pk, first.pk)
    assert second.name == first.name and second.owner == steward

    for name in ("pid", "age", "zip", "sex", "visits"):
        before, after = column(first, name), column(second, name)
        assert after.role == before.role, name
        assert after.hierarchy_source == before.hierarchy_source, name
        assert after.hierarchy_params == before.hierarchy_params, name
        assert after.type_override == before.type_override, name
        assert after.declared_domain == before.declared_domain, name
    age = column(second, "age")
    assert age.hierarchy_source == "intervals" and age.hierarchy_params == {"widths": [10, 20]}
    # The built hierarchy was rebuilt on the new version's values: it covers every one of them.
    hierarchy = Hierarchy.from_arx_csv(age.hierarchy_text, attribute="age")
    ages = {line.split(",")[1] for line in people(250, 2).splitlines()[1:]}
    hierarchy.validate_against(sorted(ages))
    assert age.hierarchy_height == hierarchy.height
    assert column(second, "zip").column_type == "text"
    assert column(second, "sex").declared_domain == ["F", "M", "X"]
    assert column(second, "region").role == ""

    changes = second.schema_changes
    assert changes["new"] == ["region"]
    assert changes["missing"] == ["diagnosis"]
    assert [r["name"] for r in changes["retyped"]] == ["visits"]
    assert changes["retyped"][0]["was"] == "integer"
    messages = versions.change_messages(second)
    assert any("New column region" in m and "explicit role" in m for m in messages)
    assert any("Missing column diagnosis" in m for m in messages)
    assert any("Retyped column visits" in m and "integer" in m for m in messages)
    # The carry-over is audited with the profiling.
    event = AuditEvent.objects.filter(dataset=second, action="tagging").get()
    assert event.detail["new_columns"] == ["region"]
    assert event.detail["missing_columns"] == ["diagnosis"]


def test_a_new_column_blocks_requests_until_it_has_a_role(steward, first):
    second = make_version(steward, first, people(250, 2, extra="region"))
    with pytest.raises(InvalidInput, match="new columns without a role: region"):
        request_release(steward, second)
    datasets.set_column_role(steward, second, column(second, "region").pk, Role.WITHHELD)
    assert request_release(steward, second).dataset_id == second.pk


def test_an_uploaded_hierarchy_that_no_longer_covers_the_values_is_named(steward, first):
    datasets.set_hierarchy_file(
        steward,
        first,
        column(first, "sex").pk,
        SimpleUploadedFile("sex.csv", b"F;*\nM;*\n"),
    )
    text = people(100, 3).replace(",F,", ",Q,")
    second = make_version(steward, first, text)
    assert column(second, "sex").hierarchy_source == "uploaded"
    assert [h["name"] for h in second.schema_changes["hierarchies"]] == ["sex"]
    assert any("hierarchy of sex" in m for m in versions.change_messages(second))


def test_a_version_follows_the_newest_profiled_one(steward, first):
    second = make_version(steward, first, people(100, 2))
    third = make_version(steward, first, people(100, 3))  # uploaded from the first's page
    assert (third.version, third.previous_id, third.root_id) == (3, second.pk, first.pk)
    assert [d.version for d in versions.lineage(first)] == [3, 2, 1]
    with pytest.raises(InvalidInput, match="later version"):
        datasets.delete_dataset(steward, second)


def test_the_key_column_is_never_released(steward, first):
    second = make_version(steward, first, people(100, 2))
    datasets.set_column_role(steward, second, column(second, "pid").pk, Role.INSENSITIVE)
    versions.set_key_column(steward, second, "pid")
    for dataset in (first, second):
        dataset.refresh_from_db()
        assert dataset.key_column == "pid"
    # A released role became withheld; a direct identifier (dropped) stays one.
    assert column(second, "pid").role == Role.WITHHELD
    assert column(first, "pid").role == Role.IDENTIFIER
    with pytest.raises(InvalidInput, match="never released"):
        datasets.set_column_role(steward, second, column(second, "pid").pk, Role.QUASI_IDENTIFIER)
    release = request_release(steward, second)
    assert "pid" not in release.config["released"]
    # A third version inherits the key; the key must be a column of every version.
    third = make_version(steward, second, people(100, 4))
    assert third.key_column == "pid"
    with pytest.raises(InvalidInput, match="every version"):
        versions.set_key_column(steward, first, "nothing")
    fourth = make_version(steward, third, people(100, 5, drop="pid"))
    with pytest.raises(InvalidInput, match="no column 'pid'"):
        request_release(steward, fourth)


# --- The page ---------------------------------------------------------------------------------


def test_the_dataset_page_uploads_a_version_and_shows_the_chain(client, steward, first):
    client.force_login(steward)
    release = request_release(steward, first)
    with mock.patch.object(datasets, "enqueue_profiling"):
        response = client.post(
            reverse("releases:version_upload", args=[first.pk]),
            {"file": factories.upload(people(120, 9, extra="region"), "month2.csv")},
        )
    second = Dataset.objects.get(previous=first)
    assert response.status_code == 302 and response.url.endswith(f"/datasets/{second.pk}/")
    profiling.profile_dataset(second.pk)
    page = client.get(reverse("releases:dataset_detail", args=[second.pk])).content.decode()
    assert "Upload a new version" in page
    assert "New column region: it needs an explicit role before any request." in page
    assert "This version has new columns without a role: region" in page
    assert "Version 1" in page and "Version 2" in page
    assert f"Request #{release.pk}" in page


def test_the_page_picks_the_key_column(client, steward, first):
    client.force_login(steward)
    response = client.post(reverse("releases:key_column", args=[first.pk]), {"key_column": "pid"})
    assert response.status_code == 302
    first.refresh_from_db()
    assert first.key_column == "pid" and column(first, "pid").role == Role.IDENTIFIER


def test_only_the_owner_uploads_a_version(client, first, other_steward, officer, recipient):
    url = reverse("releases:version_upload", args=[first.pk])
    for person, status in ((other_steward, 404), (officer, 403), (recipient, 403)):
        client.force_login(person)
        response = client.post(url, {"file": factories.upload(people(50, 4), "x.csv")})
        assert response.status_code == status, person
        api = client_for(token_for(person))
        answer = api.post(
            f"/api/v1/datasets/{first.pk}/versions",
            {"file": SimpleUploadedFile("x.csv", people(50, 4).encode())},
        )
        assert answer.status_code == status, (person, answer.content)
        assert answer["Content-Type"] == "application/problem+json"
    assert not Dataset.objects.filter(previous=first).exists()


# --- The API ----------------------------------------------------------------------------------


def test_the_api_uploads_a_version_and_names_its_schema_changes(
    steward, first, django_capture_on_commit_callbacks
):
    api = client_for(token_for(steward))
    with django_capture_on_commit_callbacks(execute=False):
        response = api.post(
            f"/api/v1/datasets/{first.pk}/versions",
            {
                "file": SimpleUploadedFile(
                    "m2.csv", people(80, 5, drop="zip", extra="region").encode()
                )
            },
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["version"], body["previous_id"], body["lineage_id"]) == (2, first.pk, first.pk)
    profiling.profile_dataset(body["id"])
    detail = api.get(f"/api/v1/datasets/{body['id']}").json()
    assert detail["new_columns"] == ["region"] and detail["missing_columns"] == ["zip"]
    assert "region" in detail["request_blocked"]
    refused = api.post(
        f"/api/v1/datasets/{body['id']}/requests",
        {"models": {"k-anonymity": {"k": 5}}},
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/problem+json"
    assert "region" in refused.json()["detail"]
    listed = api.get(f"/api/v1/datasets/{first.pk}/versions").json()
    assert [d["version"] for d in listed["items"]] == [2, 1]
    key = api.put(
        f"/api/v1/datasets/{body['id']}/key-column",
        {"column": "pid"},
        content_type="application/json",
    )
    assert key.status_code == 200 and key.json()["key_column"] == "pid"
    bad = api.put(
        f"/api/v1/datasets/{first.pk}/key-column",
        {"column": "zip"},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "every version" in bad.json()["detail"]
