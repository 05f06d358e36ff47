"""Projects: the members page (roles that take effect, never without an admin), the site
administrators' project pages, uploads into a project, moving a dataset, the project's
settings feeding its requests, the audit trail's project filter, and the migration that put
everything into the default project."""

from __future__ import annotations

import datetime
import json

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone

from releases.core import roles
from releases.core.errors import InvalidInput
from releases.datasets import services as dataset_services
from releases.models import AuditEvent, Dataset, Membership, Project, ReleaseRequest, Role
from releases.requests import rules
from releases.review import services as review
from tests.conftest import make_user
from tests.support import factories, members
from tests.support.api import client_for, token_for
from tests.support.workflow import request_release, run, tag
from tests.support.world import people_csv

pytestmark = pytest.mark.django_db

TAGS = {"name": Role.IDENTIFIER, "age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER}


def _ready(steward) -> ReleaseRequest:
    dataset = factories.make_dataset(steward, people_csv(), "people.csv")
    tag(steward, dataset, TAGS)
    return run(request_release(steward, dataset))


def _roles_of(user, project) -> set[str]:
    return set(Membership.objects.filter(user=user, project=project).values_list("role", flat=True))


# --- The members page ----------------------------------------------------------------------------


def test_a_project_admin_adds_a_member_changes_their_roles_and_the_change_takes_effect(
    client, steward, officer
):
    admin = make_user("boss", "admin")
    project = members.default_project()
    ready = _ready(steward)
    newcomer = User.objects.create_user("newcomer", password="x")
    client.force_login(admin)
    page = client.get(reverse("releases:project_members", args=["default"]))
    assert page.status_code == 200 and b"officer" in page.content
    url = reverse("releases:member_roles", args=["default"])
    added = client.post(url, {"username": "newcomer", "roles": ["officer"], "add": "1"})
    assert added.status_code == 302
    assert _roles_of(newcomer, project) == {"officer"}
    client.force_login(newcomer)
    assert client.get(ready.get_absolute_url()).status_code == 200
    # The admin takes the officer role away: the request is out of the newcomer's sight.
    client.force_login(admin)
    assert client.post(url, {"username": "newcomer", "roles": ["recipient"]}).status_code == 302
    assert _roles_of(newcomer, project) == {"recipient"}
    client.force_login(newcomer)
    assert client.get(ready.get_absolute_url()).status_code == 404
    # No role at all: no longer a member.
    client.force_login(admin)
    client.post(url, {"username": "newcomer"})
    assert not Membership.objects.filter(user=newcomer).exists()
    changes = AuditEvent.objects.filter(action=AuditEvent.Action.MEMBERSHIP).order_by("id")
    assert [e.detail["roles_after"] for e in changes] == [["officer"], ["recipient"], []]
    assert {e.detail["project_id"] for e in changes} == {project.pk}


def test_the_last_admin_of_a_project_cannot_be_removed_or_demoted(client):
    admin = make_user("boss", "admin", "officer")
    project = members.default_project()
    client.force_login(admin)
    url = reverse("releases:member_roles", args=["default"])
    for data in ({"username": "boss", "roles": ["officer"]}, {"username": "boss"}):
        refused = client.post(url, data)
        assert refused.status_code == 400
        assert "no project admin left" in refused.content.decode()
    assert _roles_of(admin, project) == {"admin", "officer"}
    # The htmx form gets the card back with the reason.
    card = client.post(url, {"username": "boss"}, HTTP_HX_REQUEST="true")
    assert card.status_code == 200 and 'id="members-error"' in card.content.decode()
    # With a second admin, the first may step down.
    client.post(url, {"username": "second", "roles": ["admin"], "add": "1"})
    assert client.post(url, {"username": "nobody-here", "roles": ["admin"]}).status_code == 400
    User.objects.create_user("second", password="x")
    client.post(url, {"username": "second", "roles": ["admin"], "add": "1"})
    assert client.post(url, {"username": "boss", "roles": ["officer"]}).status_code == 302
    assert _roles_of(admin, project) == {"officer"}
    assert not AuditEvent.objects.filter(detail__member="nobody-here").exists()


def test_only_project_admins_and_site_admins_manage_members(client, officer):
    client.force_login(officer)
    assert client.get(reverse("releases:project_members", args=["default"])).status_code == 403
    assert client.get(reverse("releases:project_members", args=["nope"])).status_code == 404
    site_admin = User.objects.create_user("root", password="x", is_staff=True)
    client.force_login(site_admin)
    assert client.get(reverse("releases:project_members", args=["default"])).status_code == 200


# --- Site administrators' project pages --------------------------------------------------------


def test_a_site_admin_creates_a_project_and_changes_its_settings(client, officer):
    site_admin = User.objects.create_user("root", password="x", is_superuser=True)
    client.force_login(officer)
    assert client.post(reverse("releases:project_create"), {"name": "X"}).status_code == 403
    client.force_login(site_admin)
    data = {
        "name": "Cardiology study",
        "slug": "cardio",
        "required_approvals": "2",
        "default_terms": "Use for cardiology research only.",
        "default_expiry_days": "30",
        "epsilon_total": "2.5",
        "stewards_see_all": "on",
    }
    assert client.post(reverse("releases:project_create"), data).status_code == 302
    project = Project.objects.get(slug="cardio")
    assert project.required_approvals == 2 and project.default_expiry_days == 30
    assert project.stewards_see_all and str(project.epsilon_total.normalize()) == "2.5"
    duplicate = client.post(reverse("releases:project_create"), data)
    assert duplicate.status_code == 400 and "exists already" in duplicate.content.decode()
    settings_url = reverse("releases:project_settings", args=["cardio"])
    changed = client.post(settings_url, {**data, "required_approvals": "3", "name": "Cardio"})
    assert changed.status_code == 302
    project.refresh_from_db()
    assert project.required_approvals == 3 and project.name == "Cardio"
    assert client.post(settings_url, {**data, "required_approvals": "0"}).status_code == 400
    assert client.get(reverse("releases:project_settings", args=["none"])).status_code == 404
    actions = list(
        AuditEvent.objects.filter(detail__project_id=project.pk).values_list("action", flat=True)
    )
    assert actions == [AuditEvent.Action.PROJECT_CREATED, AuditEvent.Action.PROJECT_SETTINGS]


# --- Uploads ---------------------------------------------------------------------------------------


def test_an_upload_goes_into_a_project_where_the_user_is_a_steward(client, steward):
    other = members.make_project("other")
    upload = factories.upload(people_csv(20))
    with pytest.raises(PermissionDenied, match="not a data steward of Other"):
        dataset_services.create_dataset(steward, upload, project="other")
    with pytest.raises(InvalidInput, match="No such project: ghost"):
        dataset_services.create_dataset(steward, factories.upload("a\n1\n"), project="ghost")
    members.grant(steward, "steward", project=other)
    with pytest.raises(InvalidInput, match="several projects: choose"):
        dataset_services.create_dataset(steward, factories.upload("a\n1\n"))
    assert not Dataset.objects.exists()
    client.force_login(steward)
    page = client.get(reverse("releases:dataset_list")).content.decode()
    assert '<option value="other">Other</option>' in page
    posted = client.post(
        reverse("releases:dataset_list"),
        {"file": factories.upload(people_csv(20)), "project": "other"},
    )
    assert posted.status_code == 302
    assert Dataset.objects.get().project == other
    # The API: the optional ``project`` field, required while the steward is in several.
    api = client_for(token_for(steward))
    refused = api.post("/api/v1/datasets", {"file": factories.upload(people_csv(20))})
    assert refused.status_code == 400 and "choose the project" in refused.json()["detail"]
    made = api.post(
        "/api/v1/datasets", {"file": factories.upload(people_csv(20)), "project": "default"}
    )
    assert made.status_code == 201
    assert Dataset.objects.get(pk=made.json()["id"]).project.slug == "default"
    outside = api.post(
        "/api/v1/datasets",
        {"file": factories.upload(people_csv(20)), "project": members.make_project("x").slug},
    )
    assert outside.status_code == 403


def test_stewards_see_each_others_datasets_only_where_the_project_allows(client, steward):
    colleague = make_user("colleague", "steward")
    theirs = factories.make_dataset(colleague, people_csv(20), "theirs.csv")
    client.force_login(steward)
    url = reverse("releases:dataset_detail", args=[theirs.pk])
    assert client.get(url).status_code == 404
    assert b"theirs.csv" not in client.get(reverse("releases:dataset_list")).content
    Project.objects.filter(slug="default").update(stewards_see_all=True)
    page = client.get(url)
    assert page.status_code == 200 and "uploaded by colleague" in page.content.decode()
    assert b"theirs.csv" in client.get(reverse("releases:dataset_list")).content
    # Seeing is not changing: a request on it is refused, saying why.
    refused = client.post(reverse("releases:request_create", args=[theirs.pk]))
    assert refused.status_code == 403 and "only they can change it" in refused.content.decode()


# --- Moving a dataset ------------------------------------------------------------------------------


def test_a_dataset_moves_only_while_no_request_on_it_is_open(client, steward, officer):
    ready = _ready(steward)
    target = members.make_project("target")
    members.grant(steward, "admin")
    url = reverse("releases:dataset_move", args=[ready.dataset_id])
    client.force_login(steward)
    # Not an admin and steward of the target yet.
    assert client.post(url, {"project": "target"}).status_code == 403
    members.grant(steward, "admin", "steward", project=target)
    refused = client.post(url, {"project": "target"})
    assert refused.status_code == 400 and "still open" in refused.content.decode()
    assert client.post(url, {"project": "ghost"}).status_code == 404
    review.review(officer, ready.pk, "reject", "No.")
    assert client.post(url, {"project": "target"}).status_code == 302
    ready.dataset.refresh_from_db()
    assert ready.dataset.project == target
    moved = AuditEvent.objects.get(action=AuditEvent.Action.DATASET_MOVED)
    assert moved.detail["from_project"] == "default" and moved.detail["project"] == "target"
    # The default project's officer no longer sees its request.
    ready.refresh_from_db()
    assert not rules.can_view(User.objects.get(pk=officer.pk), ready)


# --- Settings feed the request ---------------------------------------------------------------------


def test_a_projects_settings_feed_its_requests(steward, officer, second_officer):
    Project.objects.filter(slug="default").update(
        required_approvals=2, default_terms="Project terms.", default_expiry_days=10
    )
    ready = _ready(steward)
    assert ready.terms == "Project terms."
    review.review(officer, ready.pk, "approve", "ok")
    ready.refresh_from_db()
    assert ready.state == ReleaseRequest.State.READY  # one of two approvals
    review.review(second_officer, ready.pk, "approve", "ok")
    ready.refresh_from_db()
    assert ready.state == ReleaseRequest.State.APPROVED
    assert ready.expires_at == timezone.localdate() + datetime.timedelta(days=10)


# --- The audit trail ---------------------------------------------------------------------------


def test_the_audit_trail_filters_by_project_and_shows_an_officer_only_theirs(client, steward):
    officer_a = make_user("officer_a", "officer")
    b = members.make_project("b")
    steward_b = User.objects.create_user("steward_b", password="x")
    members.grant(steward_b, "steward", project=b)
    mine = factories.make_dataset(steward, people_csv(20), "a.csv")
    theirs = factories.make_dataset(steward_b, people_csv(20), "b.csv")
    client.force_login(officer_a)
    export = client.post(reverse("releases:audit_trail_export"), {"format": "json"})
    events = json.loads(b"".join(export.streaming_content))["events"]
    datasets = {e["dataset"] for e in events}
    assert mine.pk in datasets and theirs.pk not in datasets
    # Asking for project B's events gives none of them.
    export = client.post(reverse("releases:audit_trail_export"), {"format": "csv", "project": "b"})
    assert b"b.csv" not in b"".join(export.streaming_content)
    unknown = client.get(reverse("releases:audit_trail"), {"project": "ghost"})
    assert unknown.status_code == 400 and "No such project: ghost" in unknown.content.decode()


# --- The migration -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_migration_puts_everything_into_the_default_project_with_the_same_access():
    executor = MigrationExecutor(connection)
    before = [("releases", "0022_audit_export_action")]
    latest = executor.loader.graph.leaf_nodes("releases")
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    old_group = old.get_model("auth", "Group")
    groups = {n: old_group.objects.get_or_create(name=n)[0] for n in roles.ALL_GROUPS}
    old_user = old.get_model("auth", "User")
    people = {}
    for name, group in (
        ("st", roles.STEWARDS),
        ("of", roles.OFFICERS),
        ("re", roles.RECIPIENTS),
        ("both", roles.STEWARDS),
    ):
        people[name] = old_user.objects.create(username=name)
        people[name].groups.add(groups[group])
    people["both"].groups.add(groups[roles.OFFICERS])
    people["root"] = old_user.objects.create(username="root", is_superuser=True)
    dataset = old.get_model("releases", "Dataset").objects.create(
        owner=people["st"], name="old", original_filename="o.csv", sha256="", size_bytes=1
    )
    executor = MigrationExecutor(connection)
    executor.migrate(latest)
    default = Project.objects.get(slug="default")
    assert Dataset.objects.get(pk=dataset.pk).project == default
    held = set(Membership.objects.values_list("user__username", "project__slug", "role"))
    assert held == {
        ("st", "default", "steward"),
        ("of", "default", "officer"),
        ("re", "default", "recipient"),
        ("both", "default", "steward"),
        ("both", "default", "officer"),
        ("root", "default", "admin"),
    }
    st, of = User.objects.get(username="st"), User.objects.get(username="of")
    assert roles.is_steward(st) and roles.is_officer(of) and not roles.is_officer(st)
    assert Dataset.objects.filter(pk=dataset.pk, project__in=roles.projects_where(st, "steward"))
    assert Group.objects.filter(name__in=roles.ALL_GROUPS).count() == 3


def test_a_projects_default_epsilon_is_the_budget_of_its_new_datasets(client, steward, officer):
    Project.objects.filter(slug="default").update(epsilon_total="1.5")
    dataset = factories.make_dataset(steward, people_csv(20), "funded.csv")
    assert str(dataset.privacy_budget.epsilon_total.normalize()) == "1.5"
    assert dataset.privacy_budget.set_by is None
    entry = dataset.budget_entries.get()
    assert entry.detail["project_default"] == "default" and entry.epsilon_remaining == 1.5
    client.force_login(officer)
    page = client.get(reverse("releases:budget_detail", args=[dataset.pk])).content.decode()
    assert "the project&#x27;s default" in page or "the project's default" in page
    # Without a default, no budget: an officer sets one.
    Project.objects.filter(slug="default").update(epsilon_total=None)
    assert not hasattr(factories.make_dataset(steward, people_csv(20), "b.csv"), "privacy_budget")
