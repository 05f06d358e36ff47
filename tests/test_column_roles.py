"""No column leaves without a decision: columns without a role block a request, a suggested
direct identifier released as is needs a justification, and a column released unchanged that
looks identifying fails its check."""

from __future__ import annotations

import importlib
import random

import pandas as pd
import pytest
from django.apps import apps
from django.urls import reverse

from releases.core.errors import InvalidInput
from releases.models import AuditEvent, DatasetColumn, ReleaseRequest, Role
from releases.review import services as review
from tests.conftest import csv_upload
from tests.support import factories
from tests.support.workflow import request_release, run, tag

pytestmark = pytest.mark.django_db


def staff_csv(rows: int = 300) -> str:
    rng = random.Random(4)
    lines = ["Prénom,age,sex,badge,team"]
    for i in range(rows):
        lines.append(
            f"{rng.choice(['Anne', 'Marc', 'Zoë', 'Jan', 'Lea', 'Tom', 'Ida', 'Noé'])},"
            f"{rng.randint(20, 65)},{rng.choice('FM')},B{1000 + i},{rng.choice(['red', 'blue'])}"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture
def staff(steward):
    dataset = factories.make_dataset(steward, staff_csv(), "staff.csv")
    suggested = {c.name: c.suggested_role for c in dataset.columns.all()}
    assert suggested["Prénom"] == Role.IDENTIFIER and suggested["badge"] == Role.IDENTIFIER
    return dataset


def test_columns_start_without_a_role_and_block_a_request_until_each_has_one(
    steward, staff, client
):
    assert set(staff.columns.values_list("role", flat=True)) == {""}
    tag(steward, staff, {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER}, rest=None)
    with pytest.raises(InvalidInput, match="No role yet: Prénom, badge, team"):
        request_release(steward, staff)
    client.force_login(steward)
    page = client.get(reverse("releases:dataset_detail", args=[staff.pk])).content.decode()
    assert "3 columns without a role" in page
    response = client.post(
        reverse("releases:request_create", args=[staff.pk]),
        {"use__k-anonymity": "on", "k-anonymity__k": 5, "suppression_percent": 5},
    )
    assert response.status_code == 400
    assert "No role yet: Prénom, badge, team" in response.content.decode()
    assert not ReleaseRequest.objects.exists()
    # Withheld is a decision too: the request goes through, without those columns.
    tag(steward, staff, {}, rest=Role.WITHHELD)
    release_request = run(request_release(steward, staff))
    assert release_request.summary["released_columns"] == ["age", "sex"]
    assert release_request.summary["withheld"] == ["Prénom", "badge", "team"]


def test_a_suggested_identifier_released_as_is_needs_a_written_justification(
    steward, staff, officer, client
):
    tag(
        steward,
        staff,
        {
            "Prénom": Role.INSENSITIVE,
            "age": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "badge": Role.WITHHELD,
            "team": Role.INSENSITIVE,
        },
    )
    with pytest.raises(InvalidInput, match="look like direct identifiers.*Prénom"):
        request_release(steward, staff)
    # On the page: a field asks for the reason; without one the request is refused.
    client.force_login(steward)
    column = staff.columns.get(name="Prénom")
    page = client.get(reverse("releases:dataset_detail", args=[staff.pk])).content.decode()
    assert f'name="justify-{column.pk}"' in page
    form = {"use__k-anonymity": "on", "k-anonymity__k": 5, "suppression_percent": 5}
    response = client.post(reverse("releases:request_create", args=[staff.pk]), form)
    assert response.status_code == 400 and "Prénom" in response.content.decode()
    reason = "First names alone are shared by dozens of staff; the study needs them."
    response = client.post(
        reverse("releases:request_create", args=[staff.pk]),
        {**form, f"justify-{column.pk}": reason},
    )
    assert response.status_code == 302
    release_request = run(ReleaseRequest.objects.get())
    assert release_request.config["justifications"] == {"Prénom": reason}
    assert AuditEvent.objects.get(action=AuditEvent.Action.REQUEST).detail["justifications"] == {
        "Prénom": reason
    }
    check = next(
        c for c in review.checks(release_request) if c.name == "columns released unchanged"
    )
    assert check.passed, check.detail
    # The officer sees the column, its figures and the justification.
    client.force_login(officer)
    page = client.get(
        reverse("releases:request_detail", args=[release_request.pk])
    ).content.decode()
    panel = page.split('id="unchanged"')[1].split("</table>")[0]
    assert 'data-unchanged="Prénom"' in panel and reason in panel
    assert 'data-unchanged="team"' in panel
    assert "It does not cover the columns released unchanged: Prénom, team" in page
    review.review(officer, release_request.pk, "approve")


def test_a_column_released_unchanged_that_is_mostly_unique_cannot_be_approved(
    steward, staff, officer, client
):
    tag(
        steward,
        staff,
        {
            "Prénom": Role.IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "badge": Role.INSENSITIVE,
            "team": Role.INSENSITIVE,
        },
    )
    column = staff.columns.get(name="badge")
    release_request = run(
        request_release_with(steward, staff, {column.name: "Badge numbers mean nothing outside."})
    )
    unchanged = {u["name"]: u for u in release_request.summary["unchanged"]}
    assert unchanged["badge"]["unique_row_share"] == 1.0
    assert unchanged["team"]["distinct"] == 2 and unchanged["team"]["unique_row_share"] == 0.0
    failed = [c for c in review.checks(release_request) if not c.passed]
    assert [c.name for c in failed] == ["columns released unchanged"]
    assert "badge: 100% of rows are unique on it alone" in failed[0].detail
    with pytest.raises(InvalidInput, match="cannot be approved"):
        review.review(officer, release_request.pk, "approve")
    client.force_login(officer)
    page = client.get(
        reverse("releases:request_detail", args=[release_request.pk])
    ).content.decode()
    assert '<tr data-unchanged="badge" class="fails">' in page
    assert 'data-action="approve"' in page and 'data-reason-for="approve"' in page
    # Requesting changes stays possible.
    review.review(officer, release_request.pk, "changes", "Withhold the badge numbers.")


def request_release_with(steward, dataset, justifications: dict[str, str]):
    from releases.requests import services as release
    from releases.requests.parameters import ReleaseParameters

    return release.request_release(
        steward,
        dataset,
        ReleaseParameters(k=5, suppression_limit=0.05),
        justifications=justifications,
    )


def test_the_tagging_form_saves_every_column_or_none(steward, staff, client):
    client.force_login(steward)
    columns = {c.name: c for c in staff.columns.all()}
    bad_hierarchy = csv_upload("20;*\n", "age.csv")  # covers one age only
    response = client.post(
        reverse("releases:tagging", args=[staff.pk]),
        {
            f"role-{columns['Prénom'].pk}": Role.IDENTIFIER,
            f"role-{columns['age'].pk}": Role.QUASI_IDENTIFIER,
            f"hierarchy-{columns['age'].pk}": bad_hierarchy,
            f"role-{columns['team'].pk}": Role.INSENSITIVE,
        },
    )
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "Nothing was saved" in page and "age:" in page
    assert set(staff.columns.values_list("role", flat=True)) == {""}
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.TAGGING).exists()
    response = client.post(
        reverse("releases:tagging", args=[staff.pk]),
        {
            f"role-{columns['Prénom'].pk}": Role.IDENTIFIER,
            f"role-{columns['age'].pk}": Role.QUASI_IDENTIFIER,
            f"role-{columns['team'].pk}": Role.INSENSITIVE,
        },
    )
    roles = dict(staff.columns.values_list("name", "role"))
    assert roles == {
        "Prénom": Role.IDENTIFIER,
        "age": Role.QUASI_IDENTIFIER,
        "sex": "",
        "badge": "",
        "team": Role.INSENSITIVE,
    }


def test_old_default_roles_are_taken_back_by_the_migration(steward, staff):
    migration = importlib.import_module("releases.migrations.0010_columns_without_an_explicit_role")
    DatasetColumn.objects.filter(dataset=staff).update(role=Role.INSENSITIVE)
    DatasetColumn.objects.filter(dataset=staff, name="age").update(role=Role.QUASI_IDENTIFIER)
    migration.clear_default_roles(apps, None)
    roles = dict(staff.columns.values_list("name", "role"))
    assert roles == {"Prénom": "", "age": Role.QUASI_IDENTIFIER, "sex": "", "badge": "", "team": ""}
    migration.restore_default_roles(apps, None)
    assert set(staff.columns.exclude(name="age").values_list("role", flat=True)) == {
        Role.INSENSITIVE
    }


def test_the_extract_holds_only_released_columns(steward, staff):
    tag(
        steward,
        staff,
        {"Prénom": Role.IDENTIFIER, "age": Role.QUASI_IDENTIFIER, "team": Role.SENSITIVE},
    )
    release_request = run(request_release(steward, staff))
    from releases.core import storage

    extract = pd.read_csv(
        pd.io.common.BytesIO(storage.read_bytes(release_request.extract_path)), dtype=str
    )
    assert list(extract.columns) == ["age", "team"]
    roles = release_request.config["roles"]
    assert roles == {
        "Prénom": Role.IDENTIFIER,
        "age": Role.QUASI_IDENTIFIER,
        "sex": Role.WITHHELD,
        "badge": Role.WITHHELD,
        "team": Role.SENSITIVE,
    }
