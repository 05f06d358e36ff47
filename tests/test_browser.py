"""The whole release path in Debian's chromium, against real web, worker and Redis processes.

A steward uploads Adult, tags eight quasi-identifiers with ARX's hierarchies and gives the last
column an explicit role, names the recipient and requests k=5 with 5% suppression; an officer
approves; the named recipient accepts the terms of use, downloads CSV, Excel and Parquet (each
checked against the SHA-256 the page shows, the CSV checked 5-anonymous with pycanon, in its
own venv, and by counting) and prints
the release report to PDF.
"""

from __future__ import annotations

import hashlib
import io
import re

import pandas as pd
import pytest

from tests.conftest import ADULT, ADULT_QUASI_IDENTIFIERS
from tests.support import pycanon
from tests.support.browser import log_in, wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server): the
# session's stack, started once on the one xdist worker of the "stack" group.
pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.xdist_group("stack")]


@pytest.mark.pycanon
def test_upload_tag_request_review_approve_download(browser, stack, tmp_path):
    from playwright.sync_api import expect

    # The steward uploads Adult and sees its columns and first rows.
    context, page = log_in(browser, stack, "steward")
    page.click("text=Datasets")
    page.set_input_files("input[name=file]", str(ADULT / "adult.csv"))
    page.click("button:has-text('Upload')")
    expect(page.locator("h1")).to_have_text("adult.csv")
    # The worker reads and profiles the file; the page polls, then shows the result.
    expect(page.locator("table.preview thead")).to_contain_text("native-country", timeout=60_000)
    expect(page.locator("main > p.muted").first).to_contain_text("30162 rows")

    # Tagging: each change updates its row in place (htmx), hierarchies uploaded per row.
    for name in ADULT_QUASI_IDENTIFIERS:
        row = page.locator(f"tr[data-column='{name}']")
        row.locator("select").select_option("quasi")
        expect(page.locator(f"tr[data-column='{name}'] .hierarchy-status")).to_have_text(
            "automatic"
        )
        wait_for_htmx(page)
        page.locator(f"tr[data-column='{name}'] input[type=file]").set_input_files(
            str(ADULT / f"adult_hierarchy_{name}.csv")
        )
        expect(page.locator(f"tr[data-column='{name}'] .hierarchy-status")).to_contain_text(
            f"adult_hierarchy_{name}.csv"
        )
    # Nothing leaves without a decision: workclass has no role yet, and the request says so.
    expect(page.locator("tr[data-column='workclass'] select")).to_have_value("")
    expect(page.locator("#unroled")).to_contain_text("workclass")
    wait_for_htmx(page)
    page.locator("tr[data-column='workclass'] select").select_option("insensitive")
    expect(page.locator("#unroled")).to_have_count(0)

    # The request: k=5, 5% suppression, for the recipient; the page follows the run live.
    wait_for_htmx(page)
    page.get_by_role("checkbox", name="recipient", exact=True).check()
    page.fill("input[name='k-anonymity__k']", "5")
    page.fill("input[name=suppression_percent]", "5")
    page.click("button:has-text('Request release')")
    expect(page.locator("h1")).to_contain_text("Release request #")
    expect(page.locator("[data-state]")).to_have_text("Ready for review", timeout=90_000)
    request_url = page.url
    expect(page.locator("#k-achieved")).to_be_visible()
    # Nobody approves their own request: the steward sees no decision form.
    expect(page.locator("button[value=approve]")).to_have_count(0)
    context.close()

    # The officer finds it in the queue, pages through the classes, rejects without a comment
    # (refused), then approves.
    context, page = log_in(browser, stack, "officer")
    page.click("text=Review queue")
    page.click(f"a[href='{request_url.removeprefix(stack['url'])}']")
    k_achieved = int(page.locator("#k-achieved").inner_text())
    assert k_achieved >= 5
    first_sizes = [
        int(s) for s in page.locator("#classes tbody tr.class-row td:first-child").all_inner_texts()
    ]
    assert first_sizes == sorted(first_sizes) and first_sizes[0] >= 5
    page.click("#classes .pager >> text=Next")
    wait_for_htmx(page)
    expect(page.locator("#classes .pager")).to_contain_text("Page 2 of")
    page.click("button[value=reject]")
    expect(page.locator("#reviews .error")).to_contain_text("Give a comment")
    page.click("button[value=approve]")
    expect(page.locator("[data-state]")).to_have_text("Approved")
    context.close()

    # The named recipient sees the recipient's page: downloads wait for the terms of use.
    context, page = log_in(browser, stack, "recipient")
    page.click("nav >> text=Releases")
    page.click(f"a[href='{request_url.removeprefix(stack['url'])}']")
    expect(page.locator("h1")).to_contain_text("Release #")
    expect(page.locator("#download-csv")).to_have_count(0)
    expect(page.locator("[data-reason-for=download]")).to_contain_text("Accept the terms")
    page.click("#accept-terms-form button")
    expect(page.locator("#terms-accepted")).to_be_visible()
    digests = {}
    for fmt in ("csv", "xlsx", "parquet"):
        shown = page.locator(f"#files code[data-sha256-for={fmt}]").inner_text().strip()
        with page.expect_download() as download_info:
            page.click(f"#download-{fmt}")
        target = tmp_path / f"extract.{fmt}"
        download_info.value.save_as(target)
        digests[fmt] = hashlib.sha256(target.read_bytes()).hexdigest()
        assert digests[fmt] == shown, fmt
    page.reload()
    expect(page.locator(".audit")).to_contain_text("recipient accepted the terms of use")
    expect(page.locator(".audit")).to_contain_text("recipient downloaded extract (parquet)")

    # The release report, printed to PDF by chromium, carries the extract's SHA-256.
    page.click("#report-link")
    expect(page.locator("#report-compliance")).to_contain_text("k-anonymity applied")
    pdf = page.pdf(format="A4", print_background=False)
    context.close()
    from pypdf import PdfReader

    text = "".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf)).pages)
    flat = re.sub(r"\s+", "", text)
    assert digests["csv"] in flat
    assert "Compliancechecklist" in flat and "Printorsave" not in flat

    extract = pd.read_csv(tmp_path / "extract.csv", dtype=str, keep_default_na=False)
    assert pycanon.measure(tmp_path / "extract.csv", ADULT_QUASI_IDENTIFIERS)["k"] >= 5
    assert extract.groupby(ADULT_QUASI_IDENTIFIERS).size().min() >= 5
    assert 30162 - len(extract) <= 0.05 * 30162
    assert re.fullmatch(r"\d+-\d+|\d+|\*", extract["age"].iloc[0])
    assert pd.read_excel(tmp_path / "extract.xlsx", dtype=str).shape == extract.shape
    assert pd.read_parquet(tmp_path / "extract.parquet").shape == extract.shape
