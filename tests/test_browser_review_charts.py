"""The review page in Debian's chromium: the classes table's view (filter, sort, page) lives in
the address bar, so the back button and a copied link show the same rows; the charts' labels
are readable at the size they are drawn; a chart's figures open behind "Show data"."""

from __future__ import annotations

import random
import re

import pytest

from tests.support.browser import log_in, wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server): the
# session's stack, started once on the one xdist worker of the "stack" group.
pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.xdist_group("stack")]


@pytest.fixture
def clinic_csv(tmp_path):
    rng = random.Random(12)
    lines = ["age,zip,sex,diagnosis"] + [
        f"{rng.randint(18, 90)},{rng.choice(['02139', '02141', '02142', '02143'])},"
        f"{rng.choice('FM')},{rng.choice(['flu', 'asthma', 'gout'])}"
        for _ in range(1200)
    ]
    path = tmp_path / "clinic.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _rows(page) -> list[str]:
    return page.locator("#classes tr.class-row").evaluate_all("rows => rows.map(r => r.id)")


def _sex_cells(page) -> set[str]:
    column = page.locator("#classes thead th").evaluate_all(
        "cells => cells.map(c => c.textContent.trim())"
    )
    index = column.index("sex")
    return set(
        page.locator(f"#classes tr.class-row td:nth-child({index + 1})").evaluate_all(
            "cells => cells.map(c => c.textContent.trim())"
        )
    )


def test_the_classes_view_survives_back_and_a_copied_link(browser, stack, clinic_csv):
    from playwright.sync_api import expect

    context, page = log_in(browser, stack, "steward")
    page.click("text=Datasets")
    page.set_input_files("input[name=file]", str(clinic_csv))
    page.click("button:has-text('Upload')")
    page.wait_for_selector("tr[data-column='age'] select", timeout=60_000)
    for name, role in (("age", "quasi"), ("zip", "quasi"), ("sex", "quasi")):
        wait_for_htmx(page)
        page.locator(f"tr[data-column='{name}'] select").first.select_option(role)
    wait_for_htmx(page)
    page.locator("tr[data-column='diagnosis'] select").first.select_option("sensitive")
    wait_for_htmx(page)
    page.fill("#request input[name='k-anonymity__k']", "2")
    page.click("button:has-text('Request release')")
    expect(page.locator("[data-state]")).to_have_text("Ready for review", timeout=90_000)
    request_url = page.url.split("?")[0].split("#")[0]
    context.close()

    context, page = log_in(browser, stack, "officer")
    page.goto(request_url)

    # The charts' labels are at least 12 px as drawn (an SVG scaled down shrinks its text).
    page.click("#distributions > summary")
    sizes = page.locator("svg.chart").evaluate_all(
        """svgs => svgs.filter(s => s.getBoundingClientRect().width > 0).flatMap(s => {
            const scale = s.getBoundingClientRect().width / s.viewBox.baseVal.width;
            return [...s.querySelectorAll('text')].map(
                t => parseFloat(getComputedStyle(t).fontSize) * scale);
        })"""
    )
    assert sizes and min(sizes) >= 12
    # The class-size chart's figures behind "Show data".
    table = page.locator("#class-sizes table[data-chart='class-sizes']")
    expect(table).to_be_hidden()
    page.click("#class-sizes summary")
    expect(table).to_be_visible()

    # Filter on the sex with the most classes, sort largest first, go to page 2.
    options = page.locator("select[data-filter='sex'] option").evaluate_all(
        "os => os.slice(1).map(o => [o.value, o.textContent])"
    )
    value = max(
        options, key=lambda o: int(re.search(r"([\d,]+) classes", o[1])[1].replace(",", ""))
    )[0]
    page.select_option("select[data-filter='sex']", value)
    wait_for_htmx(page)
    expect(page).to_have_url(re.compile(r"f\.sex="))
    page.select_option("select[name=order]", "-size")
    wait_for_htmx(page)
    expect(page).to_have_url(re.compile(r"order=-size"))
    first_page = _rows(page)
    assert _sex_cells(page) == {value}
    sizes_shown = page.locator("#classes tr.class-row td:first-child").evaluate_all(
        "cells => cells.map(c => Number(c.textContent))"
    )
    assert sizes_shown == sorted(sizes_shown, reverse=True)
    expect(page.locator("#classes .pager")).to_contain_text("Page 1 of")
    page.click("#classes .pager a[rel=next]")
    wait_for_htmx(page)
    expect(page).to_have_url(re.compile(r"page=2"))
    second_page = _rows(page)
    assert second_page and not set(second_page) & set(first_page)
    assert _sex_cells(page) == {value}
    copied = page.url

    # Back: page 1 of the same view.
    page.go_back()
    expect(page.locator("#classes .pager")).to_contain_text("Page 1 of")
    assert _rows(page) == first_page
    expect(page.locator("select[data-filter='sex']")).to_have_value(value)
    expect(page.locator("select[name=order]")).to_have_value("-size")

    # The copied link, opened afresh, shows page 2 of the same view.
    fresh = context.new_page()
    fresh.goto(copied)
    expect(fresh.locator("#classes .pager")).to_contain_text("Page 2 of")
    assert _rows(fresh) == second_page
    expect(fresh.locator("select[data-filter='sex']")).to_have_value(value)
    context.close()
