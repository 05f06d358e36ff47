"""A statistics release in Debian's chromium, against real web, worker and Redis processes.

An officer sets the dataset's privacy budget (ε and δ); the steward gives the columns their
roles, adds three queries (one a histogram whose labels come from the data, released
privately), watches the free preview of their errors against the budget, names the recipient
and requests them; the worker spends and draws the noise once; an officer sees where every
label comes from and approves the reviewed numbers; the named recipient accepts the terms and
downloads the tables as CSV and JSON, each checked against the SHA-256 the page shows.
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from tests.support.browser import log_in, wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server): the
# session's stack, started once on the one xdist worker of the "stack" group.
pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.xdist_group("stack")]


@pytest.fixture
def incomes_csv(tmp_path):
    rng = random.Random(13)
    lines = ["region,age,income"] + [
        f"{rng.choice(['North', 'South', 'East'])},{rng.randint(18, 90)},{rng.randint(0, 90_000)}"
        for _ in range(300)
    ]
    path = tmp_path / "incomes.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_budget_request_with_preview_review_and_download(browser, stack, incomes_csv, tmp_path):
    from playwright.sync_api import expect

    # The steward uploads the file; no statistics can be requested before a budget is set.
    context, page = log_in(browser, stack, "steward")
    page.click("text=Datasets")
    page.set_input_files("input[name=file]", str(incomes_csv))
    page.click("button:has-text('Upload')")
    expect(page.locator("table.preview thead")).to_contain_text("income", timeout=60_000)
    dataset_path = page.url.removeprefix(stack["url"]).split("?")[0]
    page.click("#request-statistics")
    expect(page.locator("#budget-missing")).to_be_visible()
    context.close()

    # An officer finds the dataset among the budgets and sets ε 2.
    context, page = log_in(browser, stack, "officer")
    page.click("#nav-budgets")
    page.click("#budgets >> text=incomes.csv")
    page.fill("#budget-form input[name=epsilon]", "2")
    page.fill("#budget-form input[name=delta]", "0.00001")
    page.click("#set-budget-button")
    expect(page.locator("#budget-total")).to_have_text("2")
    expect(page.locator("#ledger")).to_contain_text("Budget set")
    context.close()

    # The steward adds two queries; the preview shows each one's error and the total, live.
    context, page = log_in(browser, stack, "steward")
    page.goto(stack["url"] + dataset_path)
    # Statistics read only columns chosen for release: the steward gives them roles first.
    for column, role in (("region", "quasi"), ("age", "quasi"), ("income", "sensitive")):
        page.select_option(f"select[aria-label='Role of {column}']", role)
        wait_for_htmx(page)
    page.click("#request-statistics")
    expect(page.locator("#budget-remaining")).to_contain_text("ε 2 remains")
    page.select_option("select[name=q-0-kind]", "count")
    page.fill("input[name=q-0-epsilon]", "0.5")
    # One more row, swapped in place: what was typed stays.
    page.click("#add-query")
    expect(page.locator("select[name=q-2-kind]")).to_be_visible()
    expect(page.locator("input[name=q-0-epsilon]")).to_have_value("0.5")
    wait_for_htmx(page)
    page.select_option("select[name=q-1-kind]", "mean")
    page.select_option("select[name=q-1-column]", "income")
    page.fill("input[name=q-1-lower]", "0")
    page.fill("input[name=q-1-upper]", "100000")
    page.fill("input[name=q-1-epsilon]", "0.5")
    page.locator("input[name=q-1-epsilon]").blur()
    wait_for_htmx(page)
    expect(page.locator("#preview-table tr[data-preview='2']")).to_contain_text("Mean of income")
    expect(page.locator("#preview-table tr[data-preview='1']")).to_contain_text("±")
    expect(page.locator("#preview-total")).to_contain_text("ε 1 of ε 2 remaining")
    # Rows by region, the labels found in the data and published only past a threshold.
    page.select_option("select[name=q-2-kind]", "histogram")
    page.select_option("select[name=q-2-column]", "region")
    page.select_option("select[name=q-2-source]", "data")
    page.fill("input[name=q-2-delta]", "0.000001")
    page.fill("input[name=q-2-epsilon]", "0.5")
    page.locator("input[name=q-2-epsilon]").blur()
    wait_for_htmx(page)
    expect(page.locator("#preview-table tr[data-preview='3']")).to_contain_text("threshold")
    expect(page.locator("#preview-total")).to_contain_text("ε 1.5, δ 0.000001 of ε 2 remaining")
    expect(page.locator("#preview-fits")).to_be_visible()
    page.get_by_role("checkbox", name="recipient", exact=True).check()
    page.click("#submit-statistics")
    expect(page.locator("h1")).to_contain_text("Release request #")
    expect(page.locator("[data-state]")).to_have_text("Ready for review", timeout=90_000)
    request_path = page.url.removeprefix(stack["url"])
    expect(page.locator("#round-spend")).to_contain_text("spent ε 1.5")
    context.close()

    # The officer reviews the noisy numbers with their errors and the budget, and approves.
    context, page = log_in(browser, stack, "officer")
    page.goto(stack["url"] + request_path)
    expect(page.locator("#statistics .stats-table")).to_have_count(3)
    expect(page.locator("#budget-before")).to_have_text("2")
    expect(page.locator("#budget-after")).to_have_text("0.5")
    expect(page.locator("#checks .fail")).to_have_count(0)
    expect(page.locator("#checks")).to_contain_text(
        "region: labels from the data, released privately (noisy counts above a threshold)"
    )
    expect(page.locator("#checks")).to_contain_text("smallest true count")
    shown_values = page.locator("#statistics td[data-value]").evaluate_all(
        "cells => cells.map(c => c.dataset.value)"
    )
    page.click("button[value=approve]")
    expect(page.locator("[data-state]")).to_have_text("Approved")
    context.close()

    # The named recipient accepts the terms and downloads both tables.
    context, page = log_in(browser, stack, "recipient")
    page.goto(stack["url"] + request_path)
    page.click("#accept-terms-form button")
    expect(page.locator("#terms-accepted")).to_be_visible()
    saved = {}
    for fmt in ("csv", "json"):
        shown = page.locator(f"#files code[data-sha256-for={fmt}]").inner_text().strip()
        with page.expect_download() as download_info:
            page.click(f"#download-{fmt}")
        target = tmp_path / f"tables.{fmt}"
        download_info.value.save_as(target)
        saved[fmt] = target.read_bytes()
        assert hashlib.sha256(saved[fmt]).hexdigest() == shown, fmt
    # Exactly the numbers the officer approved.
    results = json.loads(saved["json"])["result"]["results"]
    published = []
    for r in results:
        cells = r["value"] if isinstance(r["value"], list) else [{"count": r["value"]}]
        published += [str(c["count"]) for c in cells]
    assert published == shown_values
    # Only regions held by many rows pass the threshold (each of the three has about 100).
    assert {c["cell"][0] for c in results[2]["value"]} <= {"North", "South", "East"}
    expect(page.locator("#report-statistics")).to_contain_text("Methods: discrete Laplace")
    context.close()
