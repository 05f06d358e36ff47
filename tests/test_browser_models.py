"""A privacy model chosen in Debian's chromium: the steward ticks δ-disclosure privacy beside
k-anonymity on the request form, and the request's page shows its check line once the worker
has run it (real web, worker and Redis processes)."""

from __future__ import annotations

import random

import pytest

from tests.support.browser import log_in, wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server): the
# session's stack, started once on the one xdist worker of the "stack" group.
pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.xdist_group("stack")]


def test_the_steward_picks_delta_disclosure_and_sees_its_check(browser, stack, tmp_path):
    from playwright.sync_api import expect

    rng = random.Random(7)
    lines = ["name,age,sex,diagnosis"] + [
        f"Person {i},{rng.randint(18, 90)},{rng.choice('FM')},{rng.choice(['flu', 'cold'])}"
        for i in range(300)
    ]
    data = tmp_path / "patients.csv"
    data.write_text("\n".join(lines) + "\n")

    context, page = log_in(browser, stack, "steward")
    page.click("text=Datasets")
    page.set_input_files("input[name=file]", str(data))
    page.click("button:has-text('Upload')")
    page.wait_for_selector("tr[data-column='age'] select", timeout=60_000)
    for name, role in (
        ("name", "identifier"),
        ("age", "quasi"),
        ("sex", "quasi"),
        ("diagnosis", "sensitive"),
    ):
        wait_for_htmx(page)
        page.locator(f"tr[data-column='{name}'] select").first.select_option(role)
        wait_for_htmx(page)
    # k-anonymity is ticked already; δ's field shows once its model is ticked.
    delta = page.locator("input[name='delta-disclosure__delta']")
    expect(delta).to_be_hidden()
    page.get_by_role("checkbox", name="δ-disclosure privacy").check()
    expect(delta).to_be_visible()
    delta.fill("1")
    page.fill("input[name='k-anonymity__k']", "3")
    page.click("button:has-text('Request release')")
    expect(page.locator("#model")).to_contain_text("k=3, 1-disclosure privacy")
    expect(page.locator("[data-state]")).to_have_text("Ready for review", timeout=90_000)
    expect(page.locator("#checks .pass")).to_contain_text(
        ["δ-disclosure privacy of diagnosis: largest |log2(class share / table share)|"]
    )
    expect(page.locator("th[data-measure='diagnosis:delta']")).to_have_text("δ (diagnosis)")
    context.close()
