"""The review page's charts and classes table, read as an officer reads them: each chart's
"Show data" table holds the chart's figures, and both agree with an independent count; the
classes table's filters combine and its view is a link. The tests share one release, made once
for the module (tests/support/world.py); nothing else in the module runs beside it."""

from __future__ import annotations

import html
import io
import random
import re
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
from django.urls import reverse

from releases.models import ReleaseRequest, Role
from tests.support import world as world_support

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
QIS = ["age", "zip", "sex"]


def _csv(rows: int = 600) -> str:
    rng = random.Random(21)
    lines = ["age,zip,sex,diagnosis"]
    for _ in range(rows):
        lines.append(
            f"{rng.randint(18, 90)},{rng.choice(['02139', '02141', '02142'])},"
            f"{rng.choice('FM')},{rng.choice(['flu', 'asthma', 'gout'])}"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def shared_world(django_db_setup, django_db_blocker):
    """The clinic's release (k=3), made once for the module: every test reads it, and the one
    that changes its stored summary does so inside its own transaction, rolled back."""
    roles = {q: Role.QUASI_IDENTIFIER for q in QIS} | {"diagnosis": Role.SENSITIVE}
    with world_support.world(
        django_db_blocker, content=_csv(), tagging=roles, filename="clinic.csv", k=3
    ) as made:
        yield made


@pytest.fixture
def released(shared_world, settings) -> ReleaseRequest:
    """The module's release, read afresh, its files in the module's folder."""
    settings.MEDIA_ROOT = shared_world["media"]
    return ReleaseRequest.objects.get(pk=shared_world["request"].pk)


def _original() -> pd.DataFrame:
    return pd.read_csv(io.StringIO(_csv()), dtype=str)


def _page(client, user, release_request, query: str = "") -> str:
    client.force_login(user)
    url = reverse("releases:request_detail", args=[release_request.pk])
    response = client.get(url + query)
    assert response.status_code == 200
    return response.content.decode()


def _size_table(page: str) -> dict[str, list[str]]:
    table = page.split('data-chart="class-sizes"')[1].split("</table>")[0]
    rows = re.findall(r'<tr data-bin="\d+"><th scope="row">([^<]+)</th>(.*?)</tr>', table)
    return {label: re.findall(r'<td class="num">([^<]*)</td>', cells) for label, cells in rows}


def _size_titles(page: str) -> dict[tuple[str, str], tuple[int, int, str]]:
    chart = page.split('<svg class="chart histogram"')[1].split("</svg>")[0]
    found = re.findall(
        r"<title>class size ([^,]+), (original|released): (\d+) classes, (\d+) rows "
        r"\(([\d.]+%) of rows\)</title>",
        chart,
    )
    return {(label, side): (int(c), int(r), share) for label, side, c, r, share in found}


def _in_bin(label: str, size: int) -> bool:
    low, _, high = label.partition("–")
    return int(low) <= size <= int(high or low)


def test_the_size_chart_and_its_table_hold_the_classes_figures(released, officer, client):
    page = _page(client, officer, released)
    table, titles = _size_table(page), _size_titles(page)
    assert table and set(titles) == {
        (label, side) for label in table for side in ("original", "released")
    }
    after = list(released.classes.values_list("size", flat=True))
    before = _original().groupby(QIS).size().tolist()
    for label, (before_classes, before_share, classes, rows, share) in table.items():
        assert titles[(label, "released")] == (int(classes), int(rows), share)
        assert titles[(label, "original")][0] == int(before_classes)
        assert titles[(label, "original")][2] == before_share
        assert int(classes) == sum(1 for s in after if _in_bin(label, s))
        assert int(rows) == sum(s for s in after if _in_bin(label, s))
        assert int(before_classes) == sum(1 for s in before if _in_bin(label, s))
    assert sum(int(cells[3]) for cells in table.values()) == released.summary["rows_out"]
    # The k line: at the edge of the first bin of classes of 3 or more.
    assert "k = 3</text>" in page
    assert "3–4" in table


def test_a_numeric_column_is_a_histogram_on_the_released_bins(released, officer, client):
    page = _page(client, officer, released, "?distributions=1")
    figure = page.split('data-distribution="age"')[1].split("</figure>")[0]
    chart_titles = re.findall(r"<title>([^<,]+), (original|released): (\d+) rows</title>", figure)
    rows = re.findall(
        r'<tr><th scope="row">([^<]+)</th><td class="num">(\d+)</td><td class="num">(\d+)</td></tr>',
        figure,
    )
    assert rows and len(chart_titles) == 2 * len(rows)
    chart = {(label, side): int(n) for label, side, n in chart_titles}
    original = _original()["age"].astype(int)
    lows = []
    for label, original_rows, released_rows in rows:
        label = html.unescape(label)
        assert chart[(label, "original")] == int(original_rows)
        assert chart[(label, "released")] == int(released_rows)
        low, high = (int(x) for x in label.split("-"))
        lows.append(low)
        assert int(original_rows) == int(((original >= low) & (original <= high)).sum())
        held = released.classes.filter(search__contains=f'["age", "{label}"]')
        assert int(released_rows) == sum(c.size for c in held)
    assert lows == sorted(lows)


def test_results_stored_before_still_render(released, officer, client):
    """A summary without the stored sizes and released values, with distributions by count,
    renders: sizes from the stored classes, distributions in their natural order."""
    summary = dict(released.summary)
    del summary["class_sizes"], summary["class_values"]
    summary["distributions"] = {
        "age": {"original": [["70", 12], ["19", 11], ["45", 9]], "released": [["40-59", 9]]},
        "sex": {"original": [["M", 310], ["F", 290]], "released": [["M", 300], ["F", 280]]},
    }
    summary["class_size_histogram"] = [[3, 3, 1]]
    released.summary = summary
    released.save(update_fields=["summary"])
    page = _page(client, officer, released, "?distributions=1")
    table = _size_table(page)
    sizes = list(released.classes.values_list("size", flat=True))
    assert sum(int(cells[0]) for cells in table.values()) == len(sizes)
    for label, cells in table.items():
        assert int(cells[0]) == sum(1 for s in sizes if _in_bin(label, s))
    age = page.split('data-distribution="age"')[1].split("</figure>")[0]
    assert re.findall(r"<title>(\d+): \d+ rows</title>", age) == ["19", "45", "70"]
    # The sex filter offers the released values it lists, with their rows.
    assert re.search(r'<option value="F">F · 280 rows</option>', page)


def _shown(fragment: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr class="class-row[^"]*" id="class-(\d+)"', fragment)]


def test_two_filters_combine_and_the_view_is_a_link(released, officer, client):
    classes = list(released.classes.all())
    choices = released.summary["class_values"]
    # The values offered are the released ones, with independent counts of classes and rows.
    for name in QIS:
        for value, n_classes, n_rows in choices[name]:
            holding = [c for c in classes if c.values[name] == value]
            assert (n_classes, n_rows) == (len(holding), sum(c.size for c in holding))
    age, sex = choices["age"][len(choices["age"]) // 2][0], choices["sex"][0][0]
    expected = sorted(
        (c.size, c.pk) for c in classes if c.values["age"] == age and c.values["sex"] == sex
    )
    assert expected and len(expected) < len(classes)
    client.force_login(officer)
    query = {"f.age": age, "f.sex": sex, "order": "-size"}
    response = client.get(reverse("releases:request_classes", args=[released.pk]), query, **HTMX)
    fragment = response.content.decode()
    shown = _shown(fragment)
    assert sorted(shown) == sorted(pk for _, pk in expected)[:25] or len(expected) > 25
    assert set(shown) <= {pk for _, pk in expected}
    assert (
        f"{len(expected)} classes match" in fragment
        or f"({len(expected)} classes matching)" in fragment
    )
    sizes = [released.classes.get(pk=pk).size for pk in shown]
    assert sizes == sorted(sizes, reverse=True)
    # The address bar gets the page's own address at this view; opened as a plain page (no
    # script), it shows the same rows with the same choices made.
    pushed = response["HX-Push-Url"]
    parts = urlsplit(pushed)
    assert parts.path == reverse("releases:request_detail", args=[released.pk])
    assert {k: v[0] for k, v in parse_qs(parts.query).items()} == query
    page = client.get(pushed).content.decode()
    assert _shown(page) == shown
    assert re.search(rf'<option value="{re.escape(age)}" selected>', page)
    assert '<option value="-size" selected>' in page


@pytest.mark.parametrize("order", ["size", "-size", "risk", "flagged"])
def test_filtered_pages_hold_exactly_the_matching_classes_in_order(released, order, monkeypatch):
    """Each page of a filtered table (ids first, then rows) against a count made here: every
    matching class once, in the order chosen, whatever page is asked for."""
    from releases.requests import selectors

    monkeypatch.setattr(selectors, "CLASSES_PER_PAGE", 3)
    sex = released.summary["class_values"]["sex"][0][0]
    keys = {
        "size": lambda c: (c.size, c.pk),
        "-size": lambda c: (-c.size, c.pk),
        "risk": lambda c: (-c.risk, c.pk),
        "flagged": lambda c: (-int(c.flagged), c.size, c.pk),
    }
    expected = [
        c.pk for c in sorted(released.classes.all(), key=keys[order]) if c.values["sex"] == sex
    ]
    pages = -(-len(expected) // 3)
    assert pages >= 3
    seen = []
    for number in range(1, pages + 1):
        page = selectors.classes_page(released, number, order, {"sex": sex})
        assert page.paginator.count == len(expected) and page.number == number
        seen += [c.pk for c in page]
    assert seen == expected
    # Past the end, or not a number: the paginator's own answers (the last page, the first).
    last = selectors.classes_page(released, pages + 5, order, {"sex": sex})
    assert last.number == pages and [c.pk for c in last] == expected[(pages - 1) * 3 :]
    first = selectors.classes_page(released, "x", order, {"sex": sex})
    assert first.number == 1 and [c.pk for c in first] == expected[:3]
