"""Two pages at 1280 x 800 in Debian's chromium, on the demo's Adult data: the tagging table's
Role select is never clipped by the table's scroll box, and on a review page with hundreds of
equivalence classes the decision is one link away from the top, with the checks in view first."""

from __future__ import annotations

import re

import pytest

from tests.support import processes
from tests.support.browser import wait_for_htmx

pytestmark = [pytest.mark.browser, pytest.mark.integration]

VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The app with the demo release seeded: the Adult dataset with its roles, an approved
    extract and a second one waiting for review."""
    seed = [("manage.py", "seed_demo", "--with-release")]
    with processes.app_stack(tmp_path_factory.mktemp("stack"), seed=seed) as stack:
        waiting = re.search(r"for review: (/requests/\d+/)", stack["seeded"][0]).group(1)
        yield {**stack, "waiting": waiting}


def open_as(browser, demo, username: str):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(demo["url"] + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", demo["accounts"][username])
    page.click("button[type=submit]")
    page.wait_for_selector(f"text=Welcome, {username}")
    return context, page


def in_viewport(box: dict) -> bool:
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= VIEWPORT["width"]
        and box["y"] + box["height"] <= VIEWPORT["height"]
    )


def test_every_role_select_of_the_tagging_table_lies_inside_its_visible_area(browser, demo):
    context, page = open_as(browser, demo, "steward")
    page.click("text=Datasets")
    page.click("text=Adult census extract (demo)")
    page.wait_for_selector("table.tagging select[name^=role-]")
    wait_for_htmx(page)
    selects = page.locator("table.tagging select[name^=role-]")
    assert selects.count() == 9
    for index in range(selects.count()):
        select = selects.nth(index)
        # Scroll the page only (never the table sideways), so the row is in view as it loads.
        page.evaluate(
            "el => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 200)",
            select.element_handle(),
        )
        shown = select.evaluate(
            """el => {
                const box = el.closest('.scroll') || el.closest('table');
                const s = el.getBoundingClientRect(), b = box.getBoundingClientRect();
                return {s: [s.left, s.right, s.top, s.bottom], b: [b.left, b.right],
                        scrolled: box.scrollLeft};
            }"""
        )
        name = select.get_attribute("aria-label")
        left, right, top, bottom = shown["s"]
        box_left, box_right = shown["b"]
        assert shown["scrolled"] == 0, name
        assert box_left <= left and right <= box_right, (name, shown)  # not clipped by the table
        assert left >= 0 and right <= VIEWPORT["width"], (name, shown)
        assert top >= 0 and bottom <= VIEWPORT["height"], (name, shown)
        assert select.is_visible()
    context.close()


def test_the_decision_is_one_link_away_on_a_review_with_many_classes(browser, demo):
    from playwright.sync_api import expect

    context, page = open_as(browser, demo, "officer")
    page.goto(demo["url"] + demo["waiting"])
    expect(page.locator("[data-state]")).to_have_text("Ready for review")
    classes = int(
        page.locator(".figure", has_text="equivalence classes").locator(".value").inner_text()
    )
    assert classes >= 60
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height > 4 * VIEWPORT["height"]  # a long page: the classes, the cross-release check
    # The checks come first, in the first viewport...
    first_check = page.locator("#checks li").first.bounding_box()
    assert first_check is not None and in_viewport(first_check)
    # ...and so does the link to the decision, which lands the three buttons in view.
    jump = page.locator("#jump-to-decision")
    assert in_viewport(jump.bounding_box())
    buttons = [
        page.locator("#review-form button[value=approve]"),
        page.locator("#review-form button[value=changes]"),
        page.locator("#review-form button[value=reject]"),
    ]
    assert not any(in_viewport(b.bounding_box()) for b in buttons)  # below, before the jump
    jump.click()
    page.wait_for_function("() => location.hash === '#review-form'")
    for button in buttons:
        assert in_viewport(button.bounding_box()), button
    assert in_viewport(page.locator("#review-form textarea[name=comment]").bounding_box())
    # And back to the checks in one link.
    page.click("#review-form a[href='#checks']")
    page.wait_for_function("() => location.hash === '#checks'")
    assert in_viewport(page.locator("#checks li").first.bounding_box())
    context.close()
