"""Pages of a release with 100,000 equivalence classes and 10,000 audit events read only what
the worker stored, a page at a time: their size and their number of queries do not grow with
the classes or the events (the times are in bench/pages.py)."""

from __future__ import annotations

import random
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from releases.models import Role
from releases.selectors import CLASSES_PER_PAGE, EVENTS_PER_PAGE
from releases.services import sharing
from tests.support import factories, scale
from tests.support.workflow import approve, request_release, run, tag

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
CLASSES = 100_000
DOWNLOADS = 10_000
CLASS_QUERIES = [
    "order=size",
    "order=-size",
    "order=risk",
    "order=flagged",
    "order=size&page=2000",
    "attribute=age&value=age-3&order=-size",
]


def _csv(rows: int = 300) -> str:
    rng = random.Random(5)
    lines = ["age,zip,sex,diagnosis"]
    for _ in range(rows):
        lines.append(
            f"{rng.randint(20, 80)},{rng.choice(['02139', '02141'])},{rng.choice('FM')},"
            f"{rng.choice(['flu', 'asthma'])}"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture
def released(steward, officer, recipient):
    dataset = factories.make_dataset(steward, _csv(), "clinic.csv")
    tag(
        steward,
        dataset,
        {
            "age": Role.QUASI_IDENTIFIER,
            "zip": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "diagnosis": Role.SENSITIVE,
        },
    )
    release_request = approve(officer, run(request_release(steward, dataset, k=5)), recipient)
    sharing.accept_terms(recipient, release_request.pk)
    return release_request


def _get(client, url: str, **headers) -> tuple[str, int]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **headers)
    assert response.status_code == 200, url
    return response.content.decode(), len(queries)


# Its point is the scale: 100,000 classes and 10,000 events inserted, then every page read.
@pytest.mark.slow
def test_pages_stay_bounded_with_100000_classes_and_10000_events(
    released, officer, recipient, client
):
    page_url = reverse("releases:request_detail", args=[released.pk])
    client.force_login(officer)
    _, small_queries = _get(client, page_url)
    client.force_login(recipient)
    _, small_recipient_queries = _get(client, page_url)

    scale.add_classes(released, CLASSES)
    scale.add_downloads(released, recipient, DOWNLOADS)

    client.force_login(officer)
    page, queries = _get(client, page_url)
    assert queries == small_queries  # no query per class or per event
    assert len(page) < 200_000
    assert page.count("<li><time>") == EVENTS_PER_PAGE
    assert re.search(r"Page 1 of \d+ \(\d+ events, newest first\)", page)
    assert page.count('<tr class="class-row') == CLASSES_PER_PAGE

    # The next page of activity, swapped in by htmx; a plain link lands on the page there.
    older = reverse("releases:request_activity", args=[released.pk]) + "?events=2"
    fragment, _ = _get(client, older, **HTMX)
    assert fragment.count("<li><time>") == EVENTS_PER_PAGE and "← Newer" in fragment
    assert client.get(older).status_code == 302

    client.force_login(recipient)
    page, queries = _get(client, page_url)
    assert queries == small_recipient_queries
    assert len(page) < 200_000
    assert page.count("<li><time>") == EVENTS_PER_PAGE
    assert "downloaded extract (csv)" in page

    # The classes table, every order, a far page and a filter; one class expanded.
    client.force_login(officer)
    for query in CLASS_QUERIES:
        url = reverse("releases:request_classes", args=[released.pk]) + "?" + query
        fragment, queries = _get(client, url, **HTMX)
        assert len(fragment) < 60_000, query
        assert queries <= 8, query
        ids = re.findall(rf"/requests/{released.pk}/classes/(\d+)/", fragment)
        assert 0 < len(set(ids)) <= CLASSES_PER_PAGE, query
        if query == "order=flagged":
            first = released.classes.get(pk=ids[0])
            assert first.flagged and first.size == released.privacy_model.k
        if query.startswith("attribute=age"):
            shown = released.classes.filter(pk__in=ids)
            assert all(c.values["age"] == "age-3" for c in shown)
        detail, _ = _get(
            client, reverse("releases:class_detail", args=[released.pk, ids[0]]), **HTMX
        )
        assert len(detail) < 20_000


def test_a_recipient_pages_through_their_own_activity_only(released, officer, recipient, client):
    """The recipient's page lists their own downloads, the approval and the state changes, not
    the others' downloads, however many."""
    scale.add_downloads(released, officer, 3 * EVENTS_PER_PAGE)
    scale.add_downloads(released, recipient, 2)
    client.force_login(recipient)
    page = client.get(reverse("releases:request_detail", args=[released.pk])).content.decode()
    assert "<strong>officer</strong> downloaded" not in page
    assert page.count("<strong>recipient</strong> downloaded extract (csv)") == 2
    assert "activity-pager" not in page


def test_the_classes_filter_matches_a_value_exactly(released, officer, client):
    """The filter finds the released value as written: not another case, nor a longer value,
    nor a value that quotes it."""
    first = released.classes.order_by("id").first()
    for value in ("Male", "male", "Female", "Male ", 'x"], ["sex", "Male'):
        first.pk = None
        first.values = {**first.values, "sex": value}
        first.search = first.search_text(first.values)
        first.save()
    client.force_login(officer)
    url = reverse("releases:request_classes", args=[released.pk])
    fragment = client.get(url + "?attribute=sex&value=Male", **HTMX).content.decode()
    ids = set(re.findall(rf"/requests/{released.pk}/classes/(\d+)/", fragment))
    assert [c.values["sex"] for c in released.classes.filter(pk__in=ids)] == ["Male"]
