"""Webhooks, optional per project: a project that does not allow them fires none for its
requests, says so on the webhooks page, and refuses an endpoint filtered to one of its
datasets (page and API); the setting is on the settings page, shown to the project admin, and
audited as the other settings are."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.urls import reverse

from releases.events import emit, selectors, services
from releases.models import (
    AuditEvent,
    Dataset,
    Project,
    ReleaseRequest,
    WebhookDelivery,
    WebhookEndpoint,
)
from releases.projects import services as projects
from tests.conftest import READY_ROLES
from tests.support import factories, workflow
from tests.support.api import client_for, token_for
from tests.support.members import default_project, grant, make_project

pytestmark = pytest.mark.django_db

User = get_user_model()
State = ReleaseRequest.State


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()


@pytest.fixture
def site_admin(db):
    return User.objects.create_user("root", password="x", is_superuser=True)


def _settings_of(project: Project, **changed) -> projects.Settings:
    current = {
        "name": project.name,
        "required_approvals": project.required_approvals,
        "default_terms": project.default_terms,
        "default_expiry_days": project.default_expiry_days,
        "epsilon_total": project.epsilon_total,
        "stewards_see_all": project.stewards_see_all,
        "webhooks_allowed": project.webhooks_allowed,
    }
    return projects.Settings(**{**current, **changed})


def _forbid_webhooks(admin, project: Project) -> None:
    projects.update_settings(admin, project, _settings_of(project, webhooks_allowed=False))


def _form_data(project: Project, **changed) -> dict:
    data = {
        "name": project.name,
        "required_approvals": str(project.required_approvals),
        "default_terms": project.default_terms,
        "default_expiry_days": "",
        "epsilon_total": "",
    }
    if project.stewards_see_all:
        data["stewards_see_all"] = "on"
    if project.webhooks_allowed:
        data["webhooks_allowed"] = "on"
    data.update(changed)
    return {key: value for key, value in data.items() if value is not None}


def test_a_new_project_and_the_existing_ones_allow_webhooks():
    assert default_project().webhooks_allowed
    assert make_project("fresh").webhooks_allowed


def test_no_endpoint_fires_for_a_project_that_does_not_allow_webhooks(steward, site_admin):
    release_request = workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
    everything = services.create_endpoint(steward, "https://a.example.org/hook").endpoint
    this_one = services.create_endpoint(
        steward, "https://b.example.org/hook", release_request.dataset_id
    ).endpoint
    # Another project of the same steward keeps them.
    other_request = workflow.ready_release(steward, factories.synthetic_csv(seed=3), READY_ROLES)
    other = make_project("cardio")
    grant(steward, "steward", project=other)
    Dataset.objects.filter(pk=other_request.dataset_id).update(project=other)
    other_request.refresh_from_db()
    assert set(selectors.endpoints_for(release_request)) == {everything, this_one}

    _forbid_webhooks(site_admin, default_project())

    assert list(selectors.endpoints_for(release_request)) == []
    event = emit.transition(release_request, State.READY, State.READY)
    assert not WebhookDelivery.objects.filter(event=event).exists()
    assert list(selectors.endpoints_for(other_request)) == [everything]
    other_event = emit.transition(other_request, State.READY, State.READY)
    assert list(
        WebhookDelivery.objects.filter(event=other_event).values_list("endpoint", flat=True)
    ) == [everything.pk]

    projects.update_settings(
        site_admin, default_project(), _settings_of(default_project(), webhooks_allowed=True)
    )
    assert set(selectors.endpoints_for(release_request)) == {everything, this_one}


def test_the_setting_is_on_the_settings_page_audited_and_shown_to_the_project_admin(
    client, site_admin, steward
):
    project = default_project()
    url = reverse("releases:project_settings", args=[project.slug])
    client.force_login(site_admin)
    page = client.get(url).content.decode()
    assert 'name="webhooks_allowed"' in page and "Webhooks allowed" in page
    assert client.post(url, _form_data(project, webhooks_allowed=None)).status_code == 302
    project.refresh_from_db()
    assert not project.webhooks_allowed
    audited = AuditEvent.objects.filter(action=AuditEvent.Action.PROJECT_SETTINGS).last()
    assert audited is not None and audited.actor == site_admin
    assert audited.detail["webhooks_allowed"] is False

    admin = User.objects.create_user("padmin", password="x")
    grant(admin, "admin", project=project)
    client.force_login(admin)
    members = client.get(reverse("releases:project_members", args=[project.slug]))
    assert members.status_code == 200
    assert "Webhooks: not allowed" in members.content.decode()

    client.force_login(site_admin)
    assert client.post(url, _form_data(project, webhooks_allowed="on")).status_code == 302
    project.refresh_from_db()
    assert project.webhooks_allowed
    assert (
        AuditEvent.objects.filter(action=AuditEvent.Action.PROJECT_SETTINGS)
        .last()
        .detail["webhooks_allowed"]
    )
    client.force_login(admin)
    members = client.get(reverse("releases:project_members", args=[project.slug]))
    assert "Webhooks: allowed" in members.content.decode()


def test_the_webhooks_page_names_the_projects_and_refuses_their_datasets(
    client, steward, site_admin
):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    client.force_login(steward)
    page = client.get(reverse("events:webhooks")).content.decode()
    assert 'id="webhooks-not-allowed"' not in page
    project = default_project()
    _forbid_webhooks(site_admin, project)
    page = client.get(reverse("events:webhooks")).content.decode()
    assert 'id="webhooks-not-allowed"' in page and project.name in page

    refused = client.post(
        reverse("events:webhooks"),
        {"url": "https://ci.example.org/hook", "dataset": dataset.pk, "active": "on"},
    )
    assert refused.status_code == 400
    assert f"The project {project.name} does not allow webhooks" in refused.content.decode()
    assert not WebhookEndpoint.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.WEBHOOK_CREATED).exists()


def test_the_api_refuses_an_endpoint_for_such_a_dataset_as_a_problem(steward, site_admin):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    _forbid_webhooks(site_admin, default_project())
    answer = client_for(token_for(steward)).post(
        "/api/v1/webhooks",
        {"url": "https://ci.example.org/hook", "dataset_id": dataset.pk},
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("application/problem+json")
    assert "does not allow webhooks" in answer.json()["detail"]
    assert not WebhookEndpoint.objects.exists()
