"""The review loop in Debian's chromium: changes requested, resubmitted, approved by two officers.

Runs against real web, worker and Redis processes with two required approvals.
"""

from __future__ import annotations

import random

import pytest

from tests.support import processes
from tests.support.browser import log_in, wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server).
pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture(scope="module")
def two_approvals_stack(tmp_path_factory):
    """A stack of its own where a release needs two independent approvals."""
    with processes.app_stack(tmp_path_factory.mktemp("stack"), REQUIRED_APPROVALS="2") as stack:
        yield stack


@pytest.fixture
def people_csv(tmp_path):
    rng = random.Random(11)
    lines = ["name,age,sex,diagnosis"] + [
        f"Person {i},{rng.randint(18, 90)},{rng.choice('FM')},{rng.choice(['flu', 'asthma', 'gout'])}"
        for i in range(400)
    ]
    path = tmp_path / "people.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def open_request(page, stack, request_path: str) -> None:
    page.goto(stack["url"] + request_path)


def test_changes_requested_resubmitted_and_approved_by_two_officers(
    browser, two_approvals_stack, people_csv
):
    from playwright.sync_api import expect

    stack = two_approvals_stack
    # The steward asks for k=5 on age and sex.
    context, page = log_in(browser, stack, "steward")
    page.click("text=Datasets")
    page.set_input_files("input[name=file]", str(people_csv))
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
    page.fill("#request input[name='k-anonymity__k']", "5")
    page.click("button:has-text('Request release')")
    expect(page.locator("[data-state]")).to_have_text("Ready for review", timeout=90_000)
    request_path = page.url.removeprefix(stack["url"])
    context.close()

    # The first officer requests changes, with a comment.
    context, page = log_in(browser, stack, "officer")
    page.click("text=Review queue")
    expect(page.locator(f"a[href='{request_path}']").locator("xpath=ancestor::tr")).to_contain_text(
        "waiting for you"
    )
    page.click(f"a[href='{request_path}']")
    page.fill("#review-form textarea[name=comment]", "Ages are too precise: use k=10.")
    page.click("button[value=changes]")
    expect(page.locator("[data-state]")).to_have_text("Changes requested")
    context.close()

    # The steward answers and resubmits with k=10: a second round runs.
    context, page = log_in(browser, stack, "steward")
    open_request(page, stack, request_path)
    expect(page.locator("#reviews")).to_contain_text("Ages are too precise")
    page.fill("#resubmit input[name='k-anonymity__k']", "10")
    page.fill("#resubmit textarea[name=response]", "Now k=10.")
    page.click("button:has-text('Resubmit')")
    expect(page.locator("[data-state]")).to_have_text("Ready for review", timeout=90_000)
    assert int(page.locator("#k-achieved").inner_text()) >= 10
    expect(page.locator("#rounds")).to_contain_text("Round 1: changes requested")
    expect(page.locator("#rounds")).to_contain_text("Now k=10.")
    context.close()

    # The first officer approves round 2: one approval of two.
    context, page = log_in(browser, stack, "officer")
    open_request(page, stack, request_path)
    page.fill("#review-form textarea[name=comment]", "Looks right now, first approval.")
    page.click("button[value=approve]")
    expect(page.locator("[data-state]")).to_have_text("Ready for review")
    expect(page.locator("#reviews")).to_contain_text("1 of 2 approvals")
    context.close()

    # The second officer does not see the first vote before voting, then approves.
    context, page = log_in(browser, stack, "officer2")
    open_request(page, stack, request_path)
    expect(page.locator("#votes-hidden")).to_be_visible()
    expect(page.locator("#reviews")).not_to_contain_text("1 of 2")
    expect(page.locator("#reviews")).not_to_contain_text("first approval")
    page.click("button[value=approve]")
    expect(page.locator("[data-state]")).to_have_text("Approved")
    expect(page.locator("#reviews")).to_contain_text("first approval")
    expect(page.locator(".audit")).to_contain_text("officer2 approved round 2")
    context.close()

    # The steward can now download the approved extract, once the terms of use are accepted.
    context, page = log_in(browser, stack, "steward")
    open_request(page, stack, request_path)
    page.click("#accept-terms-form button")
    with page.expect_download() as download_info:
        page.click("#download-extract")
    assert download_info.value.suggested_filename.endswith(".csv")
    context.close()
