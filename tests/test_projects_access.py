"""Projects in the access matrix: project B's steward, officer and admin against every page,
fragment, file and download of project A's release (and the API's endpoints): each is refused
(403 or 404) and no body holds a value of A's data or of its request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.test import Client
from django.urls import reverse

from releases.models import AuditEvent, Membership, Project, ReleaseRequest
from releases.review import services as review
from tests.support import members
from tests.support import world as world_support
from tests.support.api import client_for, token_for
from tests.test_access_matrix import (
    MARKED_TAGGING,
    MARKER_STEMS,
    STATES,
    _set_state,
    _urls,
    attach_city_hierarchy,
    marked_csv,
)
from tests.test_api_access import _urls as _api_urls

pytestmark = pytest.mark.django_db

#: Project B's people: none of them holds any role in project A.
OUTSIDERS = ("steward_b", "officer_b", "admin_b")


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()


@pytest.fixture(scope="module")
def marked(django_db_setup, django_db_blocker):
    with world_support.world(
        django_db_blocker,
        content=marked_csv(),
        tagging=MARKED_TAGGING,
        prepare=attach_city_hierarchy,
    ) as made:
        with django_db_blocker.unblock():
            project_b = members.make_project("w-b", name="Project B")
            people = made["people"]
            for name, held in (
                ("steward_b", ("steward",)),
                ("officer_b", ("officer",)),
                ("admin_b", ("admin", "steward", "officer")),
            ):
                people[name] = User.objects.create_user(f"w-{name}", password="x")
                members.grant(people[name], *held, project=project_b)
        try:
            yield made
        finally:
            with django_db_blocker.unblock():
                Membership.objects.filter(project=project_b).delete()
                AuditEvent.objects.all().delete()
                Project.objects.filter(pk=project_b.pk).delete()


@pytest.fixture
def private_media_root(settings, marked):
    settings.MEDIA_ROOT = marked["media"]
    return settings.MEDIA_ROOT


def _body(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


def _clean(body: bytes, where: str) -> None:
    for stem in MARKER_STEMS:
        assert stem.encode() not in body, (where, stem)


@pytest.mark.parametrize("person", OUTSIDERS)
@pytest.mark.parametrize("state", STATES)
def test_another_projects_people_reach_no_page_fragment_file_or_download(marked, state, person):
    people = marked["people"]
    release_request = _set_state(marked["request"], state, people["officer"])
    dataset_id = release_request.dataset_id
    client = Client()
    client.force_login(people[person])
    urls = _urls(release_request)
    urls.update(
        {
            "activity": reverse("releases:request_activity", args=[release_request.pk]),
            "budget": reverse("releases:budget_detail", args=[dataset_id]),
            "ledger": reverse("releases:ledger", args=[dataset_id]),
            "dataset_status": reverse("releases:dataset_status", args=[dataset_id]),
            "risk": reverse("releases:dataset_risk", args=[dataset_id]),
            "members": reverse("releases:project_members", args=["default"]),
        }
    )
    for page in ("home", "release_list"):
        urls.pop(page)  # their own pages: checked below for what they list
    for page, url in urls.items():
        headers = {"HTTP_HX_REQUEST": "true"} if page in ("status", "classes") else {}
        response = client.get(url, **headers)
        assert response.status_code in (403, 404), (page, response.status_code)
        _clean(_body(response), page)
    # Writes: a vote, a budget, a move, a member: refused, and nothing written.
    before = AuditEvent.objects.count()
    writes = {
        "review": (
            reverse("releases:request_review", args=[release_request.pk]),
            {"decision": "approve", "comment": "ok"},
        ),
        "budget_set": (reverse("releases:budget_set", args=[dataset_id]), {"epsilon": "1"}),
        "move": (reverse("releases:dataset_move", args=[dataset_id]), {"project": "w-b"}),
        "member": (
            reverse("releases:member_roles", args=["default"]),
            {"username": people[person].username, "roles": ["officer"]},
        ),
        "cancel": (reverse("releases:request_cancel", args=[release_request.pk]), {}),
        "revoke": (
            reverse("releases:request_revoke", args=[release_request.pk]),
            {"reason": "Outsider"},
        ),
    }
    for name, (url, data) in writes.items():
        response = client.post(url, data)
        assert response.status_code in (403, 404), (name, response.status_code)
    assert AuditEvent.objects.count() == before
    assert not Membership.objects.filter(user=people[person], project__slug="default").exists()
    # Their own lists do not show project A's request, dataset or events.
    link = reverse("releases:request_detail", args=[release_request.pk]).encode()
    for page in ("home", "release_list", "review_queue", "budget_list", "dataset_list"):
        response = client.get(reverse(f"releases:{page}"))
        assert response.status_code in (200, 403), page
        assert link not in response.content, page
        assert release_request.dataset.name.encode() not in response.content, page
    if person != "steward_b":  # officers and admins see their own projects' trail
        trail = client.get(reverse("releases:audit_trail"))
        assert trail.status_code == 200
        assert f'data-event="{release_request.events.first().pk}"'.encode() not in trail.content
        export = client.post(reverse("releases:audit_trail_export"), {"format": "json"})
        assert export.status_code == 200
        _clean(_body(export), "export")
        assert f'"request": {release_request.pk}'.encode() not in _body(export)


@pytest.mark.parametrize("person", OUTSIDERS)
@pytest.mark.parametrize("state", ("ready", "approved"))
def test_another_projects_people_reach_nothing_over_the_api(marked, state, person):
    people = marked["people"]
    release_request = _set_state(marked["request"], state, people["officer"])
    urls = _api_urls(release_request)
    urls.pop("_city")
    api = client_for(token_for(people[person], "read"))
    lists = ("datasets", "requests", "queue", "releases")
    for name, url in urls.items():
        response = api.get(url)
        body = _body(response)
        _clean(body, name)
        if name in lists:
            assert response.status_code in (200, 403), name
            if response.status_code == 200:
                listed = {item["id"] for item in response.json()["items"]}
                mine = release_request.dataset_id if name == "datasets" else release_request.pk
                assert mine not in listed, name
        else:
            assert response.status_code in (403, 404), (name, response.status_code)


def test_an_officer_of_another_project_cannot_vote_and_the_projects_officer_can(marked):
    people = marked["people"]
    release_request = _set_state(marked["request"], "ready", people["officer"])
    for person in ("officer_b", "admin_b"):
        with pytest.raises((Http404, PermissionDenied)):
            review.review(people[person], release_request.pk, "approve", "not mine")
    assert not release_request.reviews.exists()
    # Made an officer of project A, the same person may vote.
    members.grant(people["officer_b"], "officer", project=release_request.dataset.project)
    review.review(people["officer_b"], release_request.pk, "approve", "k=5 met")
    release_request.refresh_from_db()
    assert release_request.state == ReleaseRequest.State.APPROVED
