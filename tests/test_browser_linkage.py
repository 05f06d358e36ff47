"""The linkage attack in Debian's chromium: the steward attaches a voter list to a request
ready for review with htmx, a real Celery worker links it, and the polled card shows what it
found (who may see it is tested in ``test_linkage_web``).

Runs against real web, worker and Redis processes.
"""

from __future__ import annotations

import random

import pytest

from tests.support.browser import log_in, wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server).
pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def people_and_voters(tmp_path):
    """400 people, and a voter list naming 60 of them with their age and sex."""
    rng = random.Random(17)
    people = [(f"Person {i}", rng.randint(18, 90), rng.choice("FM")) for i in range(400)]
    data = tmp_path / "patients.csv"
    data.write_text(
        "name,age,sex,diagnosis\n"
        + "".join(f"{n},{a},{s},{rng.choice(['flu', 'asthma', 'gout'])}\n" for n, a, s in people)
    )
    voters = tmp_path / "voters.csv"
    voters.write_text("name,age,sex\n" + "".join(f"{n},{a},{s}\n" for n, a, s in people[:60]))
    return data, voters


def test_an_attacker_file_attached_with_htmx_is_linked_by_the_worker(
    browser, stack, people_and_voters
):
    from playwright.sync_api import expect

    data, voters = people_and_voters
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
    page.fill("#request input[name='k-anonymity__k']", "5")
    page.click("button:has-text('Request release')")
    expect(page.locator("[data-state]")).to_have_text("Ready for review", timeout=90_000)
    request_url = page.url

    expect(page.locator("#no-attacker-file")).to_be_visible()
    page.set_input_files("#attacker-form input[name=attacker_file]", str(voters))
    page.click("#attacker-form button[data-action=attach_attacker_file]")
    # The card is swapped in place (no reload), then polls until the worker has linked it.
    expect(page.locator("#attacker-file")).to_contain_text("voters.csv")
    expect(page.locator("#linkage-table")).to_be_visible(timeout=60_000)
    assert page.url == request_url
    row = page.locator("tr[data-linkage='attacker_records'] td.num")
    expect(row).to_have_text("60")
    expect(page.locator("#linkage-columns")).to_contain_text("age, sex")
    context.close()

    # The officer sees it on the review page too.
    context, page = log_in(browser, stack, "officer")
    page.goto(request_url)
    expect(page.locator("tr[data-linkage='attacker_records'] td.num")).to_have_text("60")
    context.close()
