"""What pages say, per role: figures under their right names, notes that follow the data, lines
shown only to those they concern, marks that do not rely on colour."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from releases.models import Role
from releases.services import datasets, review
from tests.support import factories
from tests.support.factories import synthetic_csv
from tests.support.workflow import ready_release

pytestmark = pytest.mark.django_db


def page(client, user, url: str) -> str:
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def column_cells(html: str, column_id: int) -> dict[str, str]:
    """The figures of one column's row on the dataset page, as text."""
    body = re.search(rf'<tbody id="column-{column_id}".*?</tbody>', html, re.S).group(0)
    cells = re.findall(r'data-figure="([a-z-]+)">(.*?)</td>', body, re.S)
    return {name: " ".join(re.sub(r"<[^>]+>", " ", text).split()) for name, text in cells}


def test_dataset_page_names_distinct_share_and_rows_unique_apart(client, steward):
    # "pairs": every value twice (3 distinct of 6 rows, no row unique on it);
    # "mixed": 1 and 2 once, 3 and 4 twice (4 distinct, 2 rows unique).
    text = "pairs,mixed\na,1\na,2\nb,3\nb,3\nc,4\nc,4\n"
    dataset = factories.make_dataset(steward, text, "figures.csv")
    html = page(client, steward, reverse("releases:dataset_detail", args=[dataset.pk]))
    assert "Share unique" not in html
    assert "Distinct values <small>(share of rows)</small>" in html and "Rows unique on it" in html
    pairs, mixed = (dataset.columns.get(name=n) for n in ("pairs", "mixed"))
    assert column_cells(html, pairs.pk) == {"distinct": "3 (50.0 %)", "unique-rows": "0.0 % (0)"}
    assert column_cells(html, mixed.pk) == {"distinct": "4 (66.7 %)", "unique-rows": "33.3 % (2)"}


def test_a_profile_without_the_count_of_unique_rows_says_so(client, steward):
    dataset = factories.make_dataset(steward, "a\nx\ny\n", "old.csv")
    column = dataset.columns.get()
    column.profile.pop("unique_rows")
    column.save(update_fields=["profile"])
    html = page(client, steward, reverse("releases:dataset_detail", args=[dataset.pk]))
    assert column_cells(html, column.pk)["unique-rows"] == "not counted"


def test_the_note_on_suggested_roles_follows_the_roles(client, steward):
    dataset = factories.make_dataset(steward, synthetic_csv(rows=40), "people.csv")
    url = reverse("releases:dataset_detail", args=[dataset.pk])
    fragment = reverse("releases:suggestions", args=[dataset.pk])
    suggested = dataset.columns.exclude(suggested_role="").count()
    assert suggested >= 2
    html = page(client, steward, url)
    assert 'id="accept-suggestions"' in html
    assert f"{suggested} columns have no role or another role" in html
    assert "Every column with a suggestion has its suggested role" not in html

    datasets.accept_suggestions(steward, dataset)
    html = page(client, steward, url)
    assert "Every column with a suggestion has its suggested role" in html
    assert 'id="accept-suggestions"' not in html

    # One role changed away from its suggestion (as the page's select does, with htmx): the
    # fragment the page fetches again says so at once.
    column = dataset.columns.exclude(suggested_role="").first()
    other = Role.WITHHELD if column.suggested_role != Role.WITHHELD else Role.INSENSITIVE
    response = client.post(
        reverse("releases:column_update", args=[dataset.pk, column.pk]),
        {f"role-{column.pk}": other},
        HTTP_HX_REQUEST="true",
    )
    assert response["HX-Trigger"] == "roles-changed"
    note = client.get(fragment, HTTP_HX_REQUEST="true").content.decode()
    assert "1 column has no role or another role than the one suggested" in note
    assert 'id="accept-suggestions"' in note
    assert 'hx-trigger="roles-changed from:body"' in note
    # Without htmx the address leads back to the page.
    assert client.get(fragment)["Location"].endswith(url + "#tagging")


def test_the_note_on_suggested_roles_is_the_owners_only(client, steward, other_steward):
    dataset = factories.make_dataset(steward, "a\nx\n", "mine.csv")
    client.force_login(other_steward)
    response = client.get(reverse("releases:suggestions", args=[dataset.pk]), HTTP_HX_REQUEST="1")
    assert response.status_code in (403, 404)


@pytest.fixture
def ready_with_l_and_t(steward):
    return ready_release(
        steward,
        synthetic_csv(),
        {
            "name": Role.IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "zip": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "diagnosis": Role.SENSITIVE,
        },
        k=3,
        l=2,
        t=0.6,
        suppression_limit=0.1,
    )


def test_the_officers_home_queue_shows_the_whole_privacy_model(client, officer, ready_with_l_and_t):
    html = page(client, officer, reverse("releases:home"))
    # The engine's own descriptions of each requested model, and the suppression limit.
    described = ready_with_l_and_t.privacy_model.describe_criteria()
    assert described == "k=3 and distinct 2-diversity and 0.6-closeness (equal distance)"
    row = re.search(rf'<a href="/requests/{ready_with_l_and_t.pk}/">.*?</tr>', html, re.S).group(0)
    assert f"<td>{described}</td>" in row and "10%" in row


def test_the_hidden_votes_line_is_for_officers_who_can_vote(
    client, settings, steward, officer, second_officer, ready_with_l_and_t
):
    settings.REQUIRED_APPROVALS = 2
    second = second_officer
    url = reverse("releases:request_detail", args=[ready_with_l_and_t.pk])
    assert 'id="votes-hidden"' in page(client, officer, url)
    review.review(officer, ready_with_l_and_t.pk, "approve", "first vote")
    # The second officer has not voted: the line tells them why no vote shows.
    html = page(client, second, url)
    assert 'id="votes-hidden"' in html and "first vote" not in html
    # The first officer voted; the steward cannot vote: neither reads it.
    assert 'id="votes-hidden"' not in page(client, officer, url)
    html = page(client, steward, url)
    assert 'id="votes-hidden"' not in html and "first vote" not in html


def test_pass_and_fail_marks_carry_words(client, steward, ready_with_l_and_t):
    html = page(client, steward, reverse("releases:request_detail", args=[ready_with_l_and_t.pk]))
    checks = re.search(r'<ul class="checks" id="checks">(.*?)</ul>', html, re.S).group(1)
    marks = re.findall(r'<li class="(pass|fail)">(✔ pass|✘ fail) · ', checks)
    assert marks and all((c == "pass") == (m == "✔ pass") for c, m in marks)
