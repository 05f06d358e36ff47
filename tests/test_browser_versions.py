"""A new month's file in Debian's chromium, against real web, worker and Redis processes: the
steward requests a release of version 1 and saves it as a recipe, uploads version 2 from the
dataset page (it has one column more), is told which column needs a role before any request,
gives it one, applies the recipe in one click, and sees the chain of versions with their
requests.
"""

from __future__ import annotations

import random

import pandas as pd
import pytest

from tests.support.browser import log_in, wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server): the
# session's stack, started once on the one xdist worker of the "stack" group.
pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.xdist_group("stack")]

NAME = "monthly-clinic.csv"
ROLES = {"age": "quasi", "zip": "quasi", "sex": "quasi", "diagnosis": "sensitive"}


def month(rows: int, seed: int, with_visits: bool) -> pd.DataFrame:
    rng = random.Random(seed)
    frame = pd.DataFrame(
        {
            "age": [rng.randint(18, 90) for _ in range(rows)],
            "zip": [rng.choice(["02139", "02141", "02142", "02138"]) for _ in range(rows)],
            "sex": [rng.choice(["F", "M"]) for _ in range(rows)],
            "diagnosis": [rng.choice(["flu", "asthma", "gout"]) for _ in range(rows)],
        }
    )
    if with_visits:
        frame["visits"] = [rng.randint(0, 12) for _ in range(rows)]
    return frame


def set_role(page, column: str, role: str) -> None:
    from playwright.sync_api import expect

    wait_for_htmx(page)
    page.locator(f"tr[data-column='{column}'] select[name^='role-']").select_option(role)
    wait_for_htmx(page)
    expect(page.locator(f"tr[data-column='{column}'] select[name^='role-']")).to_have_value(role)


def test_new_version_role_for_the_new_column_recipe_in_one_click_and_the_chain(
    browser, stack, tmp_path
):
    from playwright.sync_api import expect

    first, second = tmp_path / "v1" / NAME, tmp_path / "v2" / NAME
    for path, frame in ((first, month(400, 1, False)), (second, month(420, 2, True))):
        path.parent.mkdir()
        frame.to_csv(path, index=False)

    # Version 1: uploaded, tagged, requested with k=3.
    context, page = log_in(browser, stack, "steward")
    page.click("text=Datasets")
    page.set_input_files("input[name=file]", str(first))
    page.click("button:has-text('Upload')")
    expect(page.locator("h1")).to_have_text(NAME)
    expect(page.locator("table.preview thead")).to_contain_text("diagnosis", timeout=60_000)
    version_1 = page.url
    for column, role in ROLES.items():
        set_role(page, column, role)
    expect(page.locator("#unroled")).to_have_count(0)
    page.fill("input[name='k-anonymity__k']", "3")
    page.click("button:has-text('Request release')")
    expect(page.locator("h1")).to_contain_text("Release request #")
    first_request = page.url.rstrip("/").rsplit("/", 1)[-1]
    expect(page.locator("[data-state]")).to_have_text("Ready for review", timeout=90_000)

    # The request saved as a recipe, from its page.
    page.fill("#recipe-name", "Monthly k=3")
    page.click("#recipe-form button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Saved the recipe Monthly k=3")

    # Version 2 from the dataset page: one column more, which blocks any request until it has
    # a role; the page names it, and the recipe cannot be applied yet.
    page.goto(version_1)
    page.set_input_files("#version-file", str(second))
    page.click("#version-upload button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Uploaded version 2")
    expect(page.locator("table.preview thead")).to_contain_text("visits", timeout=60_000)
    version_2 = page.url
    assert version_2 != version_1
    page.reload()
    expect(page.locator("#schema-changes")).to_contain_text("visits")
    expect(page.locator("#request-blocked")).to_contain_text("visits")
    for column, role in ROLES.items():  # carried over from version 1
        expect(page.locator(f"tr[data-column='{column}'] select[name^='role-']")).to_have_value(
            role
        )
    apply = page.locator("#recipes button:has-text('Apply recipe to version 2')")
    expect(apply).to_be_disabled()

    set_role(page, "visits", "insensitive")
    page.reload()
    expect(page.locator("#request-blocked")).to_have_count(0)
    expect(apply).to_be_enabled()
    apply.click()

    # One click: the new request of version 2, with the recipe's k, runs.
    expect(page.locator("h1")).to_contain_text("Release request #")
    second_request = page.url.rstrip("/").rsplit("/", 1)[-1]
    assert second_request != first_request
    expect(page.locator("[data-state]")).to_have_text("Ready for review", timeout=90_000)
    expect(page.locator("#model")).to_contain_text("k=3")

    # The chain: both versions, each with its own request.
    page.goto(version_2)
    chain = page.locator("#version-chain tbody tr")
    expect(chain).to_have_count(2)
    expect(page.locator("#version-chain")).to_contain_text("Version 1")
    expect(page.locator("#version-chain")).to_contain_text("Version 2 (this page)")
    expect(chain.filter(has_text="Version 1")).to_contain_text(f"Request #{first_request}")
    expect(chain.filter(has_text="Version 2")).to_contain_text(f"Request #{second_request}")
    context.close()
