"""A file of 3,000 columns: the review page, its long lists (a page at a time), the recipient's
page and the report stay small."""

from __future__ import annotations

import random
from unittest import mock

import pytest
from django.urls import reverse

from releases.models import Role
from releases.selectors import SAMPLE_COLUMNS_PER_PAGE, UNCHANGED_PER_PAGE
from releases.services import sharing, suggestions
from tests.support import factories
from tests.support.workflow import approve, request_release, run

# Its point is the width: a file of 3,000 columns profiled, released and paged.
pytestmark = [pytest.mark.django_db, pytest.mark.slow]
COLUMNS = 3000
LIMIT = 1024 * 1024
HTMX = {"HTTP_HX_REQUEST": "true"}


def _wide_csv(rows: int = 40) -> str:
    rng = random.Random(3)
    names = ["age", "sex", *[f"measure_{i:04d}" for i in range(COLUMNS - 2)]]
    lines = [",".join(names)]
    for _ in range(rows):
        cells = [str(rng.choice([30, 40, 50])), rng.choice("FM")]
        cells += [rng.choice(["low", "mid", "high"]) for _ in range(COLUMNS - 2)]
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


@pytest.fixture
def wide_release(steward, officer, recipient):
    # The suggestions' rules (tested elsewhere) take most of profiling 3,000 columns: here a
    # plain "released as is" for each keeps the suite fast.
    plain = suggestions.Suggestion(Role.INSENSITIVE, "nothing points to a person")
    with mock.patch.object(suggestions, "suggest", return_value=plain):
        dataset = factories.make_dataset(steward, _wide_csv(), "wide.csv")
    assert dataset.columns.count() == COLUMNS
    # Setting 3,000 roles one by one is what the tagging page does; here only the result matters.
    dataset.columns.filter(name__in=["age", "sex"]).update(role=Role.QUASI_IDENTIFIER)
    dataset.columns.exclude(name__in=["age", "sex"]).update(role=Role.INSENSITIVE)
    release_request = approve(officer, run(request_release(steward, dataset, k=2)), recipient)
    sharing.accept_terms(recipient, release_request.pk)
    return release_request


def test_a_3000_column_release_pages_stay_under_a_megabyte(
    wide_release, officer, recipient, client
):
    assert wide_release.summary["rows_out"] > 0
    page_url = reverse("releases:request_detail", args=[wide_release.pk])
    client.force_login(officer)
    page = client.get(page_url).content.decode()
    assert len(page.encode()) < LIMIT
    assert page.count("<tr data-unchanged=") == UNCHANGED_PER_PAGE
    assert f"Columns 1–{UNCHANGED_PER_PAGE} of {COLUMNS - 2}" in page
    assert page.count('<tr class="original"><th>before</th>') == 12
    assert "<th>measure_0027</th>" in page and "<th>measure_0028</th>" not in page

    # The next columns of each long list, swapped in by htmx; a plain link lands on the page.
    section = reverse("releases:request_section", args=[wide_release.pk, "unchanged"])
    fragment = client.get(section + "?unchanged=2", **HTMX).content.decode()
    assert f"Columns {UNCHANGED_PER_PAGE + 1}–{2 * UNCHANGED_PER_PAGE}" in fragment
    assert fragment.count("<tr data-unchanged=") == UNCHANGED_PER_PAGE
    sample = reverse("releases:request_section", args=[wide_release.pk, "sample"])
    fragment = client.get(sample + "?sample=3", **HTMX).content.decode()
    first = 2 * SAMPLE_COLUMNS_PER_PAGE - 2  # the two quasi-identifiers come first
    assert f"<th>measure_{first:04d}</th>" in fragment and " open>" in fragment
    assert client.get(sample + "?sample=3").status_code == 302
    assert (
        client.get(
            reverse("releases:request_section", args=[wide_release.pk, "nothing"]), **HTMX
        ).status_code
        == 404
    )

    client.force_login(recipient)
    page = client.get(page_url).content.decode()
    assert len(page.encode()) < LIMIT and "measure_2997" in page
    report = client.get(reverse("releases:report", args=[wide_release.pk])).content.decode()
    assert len(report.encode()) < LIMIT and "measure_2997" in report
