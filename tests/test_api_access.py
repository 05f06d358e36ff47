"""Who reaches what over the API: every endpoint against every person (no token, a read
token, a write token; requester, another steward, an officer, recipients named or not), with
the release ready for review and approved. The statuses are the pages' (tests/
test_access_matrix.py), nothing a person may not see leaks into a body, and a write through
the API leaves the same audit rows as the same write through its page."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from releases.models import AuditEvent, ReleaseRequest, Role
from tests.support import factories
from tests.support import world as world_support
from tests.support.api import client_for, token_for
from tests.support.workflow import request_release, run, tag
from tests.test_access_matrix import (
    MARKED_TAGGING,
    MARKER_STEMS,
    _set_state,
    attach_city_hierarchy,
    marked_csv,
)

State = ReleaseRequest.State
pytestmark = pytest.mark.django_db

PEOPLE = world_support.PEOPLE
STATES = ("ready", "approved")


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()  # the rate limit's counts: each test starts with none


@pytest.fixture(scope="module")
def marked(django_db_setup, django_db_blocker):
    with world_support.world(
        django_db_blocker,
        content=marked_csv(),
        tagging=MARKED_TAGGING,
        prepare=attach_city_hierarchy,
    ) as made:
        yield made


@pytest.fixture
def private_media_root(settings, marked):
    settings.MEDIA_ROOT = marked["media"]
    return settings.MEDIA_ROOT


def _urls(release_request: ReleaseRequest) -> dict[str, str]:
    pk, dataset = release_request.pk, release_request.dataset_id
    city = release_request.dataset.columns.get(name="city").pk
    return {
        "datasets": "/api/v1/datasets",
        "dataset": f"/api/v1/datasets/{dataset}",
        "columns": f"/api/v1/datasets/{dataset}/columns",
        "hierarchies": f"/api/v1/datasets/{dataset}/hierarchies",
        "requests": "/api/v1/requests",
        "request": f"/api/v1/requests/{pk}",
        "summary": f"/api/v1/requests/{pk}/summary",
        "checks": f"/api/v1/requests/{pk}/checks",
        "reviews": f"/api/v1/requests/{pk}/reviews",
        "audit": f"/api/v1/requests/{pk}/audit",
        "queue": "/api/v1/reviews?state=all",
        "releases": "/api/v1/releases",
        "release": f"/api/v1/releases/{pk}",
        "csv": f"/api/v1/releases/{pk}/files/csv",
        "statistics": f"/api/v1/statistics/{pk}",
        "_city": str(city),
    }


def _expected(person: str, state: str) -> dict[str, int]:
    """The status of each endpoint for ``person`` (the pages' rules)."""
    officer_or_requester = person in ("officer", "requester")
    named = person in ("named_recipient", "accepted_recipient")
    sees = officer_or_requester or (named and state == "approved")
    out = {
        "datasets": 200 if person in ("requester", "other_steward") else 403,
        "requests": 200,
        "queue": 200 if person == "officer" else 403,
        "releases": 403 if person == "officer" else 200,
    }
    for name in ("dataset", "columns", "hierarchies"):
        out[name] = {"requester": 200, "other_steward": 404}.get(person, 403)
    out["request"] = out["audit"] = 200 if sees else 404
    for name in ("summary", "checks", "reviews"):
        out[name] = 200 if officer_or_requester else (403 if sees else 404)
    out["statistics"] = 404  # an extract is no statistics release
    receives = person == "requester" or (named and state == "approved")
    out["release"] = 200 if receives and state == "approved" else 404
    if person == "officer":
        out["release"] = 403  # officers review; they receive nothing
    if person == "officer":
        out["csv"] = 403
    elif not sees:
        out["csv"] = 404
    elif state == "ready":
        out["csv"] = 409
    elif person == "accepted_recipient":
        out["csv"] = 200
    else:
        out["csv"] = 409  # the terms are not accepted yet
    return out


def _body(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


@pytest.mark.parametrize("scope", ["read", "write"])
@pytest.mark.parametrize("person", PEOPLE)
@pytest.mark.parametrize("state", STATES)
def test_every_person_against_every_read_endpoint(marked, state, person, scope):
    people = marked["people"]
    release_request = _set_state(marked["request"], state, people["officer"])
    urls = _urls(release_request)
    city = urls.pop("_city")
    user = people[person]
    if user.is_authenticated:
        api = client_for(token_for(user, scope))
        expected = _expected(person, state)
    else:
        api = Client()
        expected = dict.fromkeys(urls, 401)
    seen = {}
    for name, url in urls.items():
        response = api.get(url)
        assert response.status_code == expected[name], (name, response.status_code, _body(response))
        body = _body(response)
        seen[name] = body
        if response.status_code != 200:
            assert response["Content-Type"] == "application/problem+json", name
            assert set(response.json()) <= {"type", "title", "status", "detail", "errors"}
    everything = b"".join(seen.values())
    if person not in ("officer", "requester"):
        # Nothing computed on the original reaches anyone else.
        for stem in MARKER_STEMS:
            assert stem.encode() not in everything, stem
        assert b"Regionzone" not in everything or expected["csv"] == 200
    # Lists hold only what the person may see.
    listed = {item["id"] for item in api.get(urls["requests"]).json().get("items", [])}
    if user.is_authenticated:
        assert (release_request.pk in listed) == (expected["request"] == 200)
    if person == "other_steward":
        assert api.get(urls["datasets"]).json()["count"] == 0
    if expected["csv"] == 200:
        stored = release_request.files.get(format="csv")
        assert hashlib.sha256(seen["csv"]).hexdigest() == stored.sha256
    if person == "requester":
        assert int(city) in {c["id"] for c in api.get(urls["columns"]).json()["items"]}


WRITES = {
    "roles": ("PATCH", "/api/v1/datasets/{dataset}/columns", {"roles": {"visits": "withheld"}}),
    "cancel": ("POST", "/api/v1/requests/{pk}/cancel", {"reason": "no"}),
    "review": ("POST", "/api/v1/requests/{pk}/reviews", {"decision": "reject", "comment": "No."}),
    "terms": ("POST", "/api/v1/releases/{pk}/terms", None),
    "request": (
        "POST",
        "/api/v1/datasets/{dataset}/requests",
        {"models": {"k-anonymity": {"k": 5}}, "suppression_percent": 5},
    ),
}


def _write_expected(person: str, name: str, state: str) -> int:
    named = person in ("named_recipient", "accepted_recipient")
    sees = person in ("officer", "requester") or (named and state == "approved")
    if name in ("roles", "request"):
        return {"requester": 200 if name == "roles" else 201, "other_steward": 404}.get(person, 403)
    if not sees:
        return 404
    if name == "cancel":
        # Only queued or running requests can be cancelled: this one is past its run.
        return 409 if person in ("officer", "requester") else 403
    if name == "review":
        if person != "officer":
            return 403
        return 200 if state == "ready" else 409
    # terms
    if person == "officer":
        return 403
    if state == "ready":
        return 409
    return 409 if person == "accepted_recipient" else 200


@pytest.mark.parametrize("name", list(WRITES))
@pytest.mark.parametrize("person", [p for p in PEOPLE if p != "anonymous"])
@pytest.mark.parametrize("state", STATES)
def test_every_person_against_every_write(marked, state, person, name):
    people = marked["people"]
    release_request = _set_state(marked["request"], state, people["officer"])
    method, template, body = WRITES[name]
    url = template.format(pk=release_request.pk, dataset=release_request.dataset_id)
    user = people[person]
    tokens_rows = ["token_created", "token_refused"]
    before = AuditEvent.objects.exclude(action__in=tokens_rows).count()
    kwargs = {"content_type": "application/json"} if body is not None else {}
    read_only = client_for(token_for(user, "read"))
    response = read_only.generic(method, url, **({"data": _json(body)} if body else {}), **kwargs)
    assert response.status_code == 403  # a read-only token never writes
    assert AuditEvent.objects.exclude(action__in=tokens_rows).count() == before
    api = client_for(token_for(user, "write"))
    before = AuditEvent.objects.exclude(action__in=["token_created", "token_refused"]).count()
    response = api.generic(method, url, **({"data": _json(body)} if body else {}), **kwargs)
    assert response.status_code == _write_expected(person, name, state), (
        response.status_code,
        response.content,
    )
    written = AuditEvent.objects.exclude(action__in=["token_created", "token_refused"]).count()
    if response.status_code >= 400:
        assert response["Content-Type"] == "application/problem+json"
        for stem in MARKER_STEMS:
            assert stem not in response.content.decode()
        assert written == before  # a refusal writes nothing
    else:
        assert written > before


def _json(body) -> str:
    return json.dumps(body)


# --- The same audit rows as the pages --------------------------------------------------------


def _rows(since: int, until: int | None = None) -> list[tuple]:
    """What the audit rows written after ``since`` (up to ``until``) say: their action, actor
    and details' names (values that differ between two runs, hashes and ids, left out)."""
    events = AuditEvent.objects.filter(pk__gt=since)
    if until is not None:
        events = events.filter(pk__lte=until)
    return [
        (e.action, e.actor.get_username() if e.actor else None, sorted(e.detail))
        for e in events.exclude(action__in=["token_created", "token_refused"]).order_by("pk")
    ]


def _last() -> int:
    last = AuditEvent.objects.order_by("-pk").first()
    return last.pk if last else 0


@pytest.fixture
def two_ready(steward, officer, recipient):
    """Two requests alike, ready for review, naming ``recipient``."""
    made = []
    for _ in range(2):
        dataset = factories.make_dataset(steward, world_support.people_csv(), "people.csv")
        tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
        ready = run(request_release(steward, dataset))
        ready.recipients.add(recipient)
        made.append(ready)
    return made


def test_api_writes_leave_the_same_audit_rows_as_the_pages(
    two_ready, steward, officer, recipient, django_capture_on_commit_callbacks
):
    by_page, by_api = two_ready
    page = Client()
    steward_api = client_for(token_for(steward))
    officer_api = client_for(token_for(officer))
    recipient_api = client_for(token_for(recipient))
    age_page = by_page.dataset.columns.get(name="zip")

    def compare(page_action, api_action):
        start = _last()
        page_response = page_action()
        assert page_response.status_code in (200, 302), page_response.status_code
        middle = _last()
        api_response = api_action()
        assert api_response.status_code in (200, 201), api_response.content
        by_the_page = _rows(start, middle)
        assert by_the_page, "the page wrote no audit row"
        assert _rows(middle) == by_the_page

    # A role.
    page.force_login(steward)
    compare(
        lambda: page.post(
            reverse("releases:column_update", args=[by_page.dataset_id, age_page.pk]),
            {f"role-{age_page.pk}": "insensitive"},
        ),
        lambda: steward_api.patch(
            f"/api/v1/datasets/{by_api.dataset_id}/columns",
            {"roles": {"zip": "insensitive"}},
            content_type="application/json",
        ),
    )
    # A vote.
    page.force_login(officer)
    with django_capture_on_commit_callbacks(execute=False):
        compare(
            lambda: page.post(
                reverse("releases:request_review", args=[by_page.pk]), {"decision": "approve"}
            ),
            lambda: officer_api.post(
                f"/api/v1/requests/{by_api.pk}/reviews",
                {"decision": "approve"},
                content_type="application/json",
            ),
        )
    # The terms, and a download.
    page.force_login(recipient)
    compare(
        lambda: page.post(reverse("releases:accept_terms", args=[by_page.pk])),
        lambda: recipient_api.post(f"/api/v1/releases/{by_api.pk}/terms"),
    )
    compare(
        lambda: _streamed(page.get(reverse("releases:download_file", args=[by_page.pk, "csv"]))),
        lambda: _streamed(recipient_api.get(f"/api/v1/releases/{by_api.pk}/files/csv")),
    )
    # An upload.
    page.force_login(steward)
    with django_capture_on_commit_callbacks(execute=False):
        compare(
            lambda: page.post(
                reverse("releases:dataset_list"),
                {"file": SimpleUploadedFile("x.csv", b"a,b\n1,2\n")},
            ),
            lambda: steward_api.post(
                "/api/v1/datasets", {"file": SimpleUploadedFile("x.csv", b"a,b\n1,2\n")}
            ),
        )
    # A request (the page's checkbox "Protect earlier releases" left unticked).
    with django_capture_on_commit_callbacks(execute=False):
        compare(
            lambda: page.post(
                reverse("releases:request_create", args=[by_page.dataset_id]),
                {"use__k-anonymity": "on", "k-anonymity__k": 5, "suppression_percent": 5},
            ),
            lambda: steward_api.post(
                f"/api/v1/datasets/{by_api.dataset_id}/requests",
                {
                    "models": {"k-anonymity": {"k": 5}},
                    "suppression_percent": 5,
                    "protect_earlier": False,
                },
                content_type="application/json",
            ),
        )


def _streamed(response):
    if getattr(response, "streaming", False):
        b"".join(response.streaming_content)
    return response
