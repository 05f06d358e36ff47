"""axe-core on every page each role reaches, in the states that show the most: no violation of
"serious" or "critical" impact.

One stack (real web, worker and Redis processes) seeded with the approved Adult demo release
and ``tests/support/a11y_scenario.py`` (a release ready for review, one with changes requested,
an approved statistics release, a dataset not tagged yet); one browser context per person.
axe (vendored under tests/vendor, never served by the app) is injected into each page.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import processes
from tests.support.browser import wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server).
pytestmark = [pytest.mark.browser, pytest.mark.integration]

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
FAILING_IMPACTS = ("serious", "critical")

# Each person's pages: (name, path with the scenario's ids, what to do on the page first).
PAGES: dict[str, list[tuple[str, str, str]]] = {
    "steward": [
        ("home", "/", ""),
        ("datasets and upload", "/datasets/", ""),
        ("dataset tagged with hierarchies", "/datasets/{adult}/", "wait-risk"),
        ("dataset with an automatic hierarchy", "/datasets/{people}/", "wait-risk"),
        ("dataset not tagged yet", "/datasets/{visits}/", "wait-risk"),
        ("dataset version 2, a column without a role, a recipe", "/datasets/{people_v2}/", ""),
        ("versions and recipes of version 1", "/datasets/{people}/#versions", "wait-risk"),
        ("statistics request form", "/datasets/{people}/statistics/", ""),
        ("approved release", "/requests/{approved}/", "expand-class"),
        ("classes, largest first, page 2", "/requests/{approved}/?order=-size&page=2", ""),
        ("release ready for review", "/requests/{ready}/", "expand-class"),
        ("release with changes requested", "/requests/{changes}/", ""),
        ("statistics release", "/requests/{statistics}/", ""),
        ("release report", "/requests/{approved}/report/", ""),
        ("statistics report", "/requests/{statistics}/report/", ""),
        ("releases list", "/releases/", ""),
        ("webhooks", "/account/webhooks/", ""),
        ("notification preferences", "/account/notifications/preferences/", ""),
        ("not found", "/no-such-page/", ""),
    ],
    "officer": [
        ("home with the queue", "/", ""),
        ("review queue", "/reviews/", ""),
        ("review queue, decided", "/reviews/?state=decided", ""),
        ("budgets", "/budgets/", ""),
        ("budget and ledger", "/budgets/{people}/", ""),
        ("release ready for review", "/requests/{ready}/", "expand-class"),
        ("approved release", "/requests/{approved}/", ""),
        ("release with changes requested", "/requests/{changes}/", ""),
        ("statistics release", "/requests/{statistics}/", ""),
        ("release report", "/requests/{approved}/report/", ""),
        ("notifications", "/account/notifications/", ""),
        ("forbidden: datasets", "/datasets/", ""),
        ("projects of a project admin", "/projects/", ""),
        ("project members", "/projects/default/members/", ""),
    ],
    "officer2": [
        ("release ready for review", "/requests/{ready}/", ""),
        ("release with changes requested", "/requests/{changes}/", ""),
    ],
    "recipient": [
        ("home", "/", ""),
        ("releases list", "/releases/", ""),
        ("recipient's release page", "/requests/{approved}/", ""),
        ("recipient's statistics page", "/requests/{statistics}/", ""),
        ("release report", "/requests/{approved}/report/", ""),
        ("statistics report", "/requests/{statistics}/report/", ""),
    ],
    "siteadmin": [
        ("projects with the create form", "/projects/", ""),
        ("project settings", "/projects/default/settings/", ""),
        ("second project's members", "/projects/study-b/members/", ""),
    ],
    "visitor": [
        ("home without a role", "/", ""),
        ("forbidden", "/datasets/", ""),
    ],
    "anonymous": [
        ("login", "/accounts/login/", ""),
        ("locked out", "/accounts/login/", "lock-out"),
    ],
}
CASES = [(person, *page) for person, pages in PAGES.items() for page in pages]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    seed = [("manage.py", "seed_demo", "--with-release"), ("-m", "tests.support.a11y_scenario")]
    with processes.app_stack(tmp_path_factory.mktemp("stack"), seed=seed) as stack:
        # The scenario's JSON is its last line (the console e-mail backend prints before it).
        ids = json.loads(stack["seeded"][1].strip().splitlines()[-1])
        stack["accounts"].update(ids.pop("accounts"))
        yield {**stack, "ids": ids}


@pytest.fixture(scope="module")
def pages(browser, site):
    """One browser context per person, logged in on first use."""
    contexts, opened = [], {}

    def page_for(person: str):
        if person not in opened:
            # The page's Content-Security-Policy would refuse the injected axe script.
            context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})
            contexts.append(context)
            page = context.new_page()
            page.set_default_timeout(30_000)
            if person != "anonymous":
                page.goto(site["url"] + "/accounts/login/")
                page.fill("input[name=username]", person)
                page.fill("input[name=password]", site["accounts"][person])
                page.click("button[type=submit]")
                page.wait_for_selector(f"text=Welcome, {person}")
            opened[person] = page
        return opened[person]

    yield page_for
    for context in contexts:
        context.close()


def prepare(page, site, action: str) -> None:
    if action == "wait-risk":
        page.wait_for_function(
            "() => !document.querySelector('#risk').textContent.includes('Counting rows')"
        )
    elif action == "expand-class":
        page.locator("#classes a.expand").first.click()
        page.wait_for_selector("#classes tr.class-detail")
    elif action == "lock-out":
        for _ in range(5):
            page.goto(site["url"] + "/accounts/login/")
            page.fill("input[name=username]", "mallory")
            page.fill("input[name=password]", "wrong")
            page.click("button[type=submit]")
        page.wait_for_selector("#locked-out")
    wait_for_htmx(page)
    # Folded sections hold content too: open them all.
    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")


def axe_violations(page) -> list[dict]:
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations.map(
            v => ({id: v.id, impact: v.impact, help: v.help,
                   targets: v.nodes.map(n => n.target.join(" "))}))"""
    )


@pytest.mark.parametrize(
    ("person", "name", "path", "action"), CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES]
)
def test_page_has_no_serious_accessibility_violation(pages, site, person, name, path, action):
    page = pages(person)
    page.goto(site["url"] + path.format(**site["ids"]))
    prepare(page, site, action)
    violations = axe_violations(page)
    print(
        f"\n{person} / {name}: "
        + (", ".join(f"{v['id']} ({v['impact']})" for v in violations) or "none")
    )
    serious = [v for v in violations if v["impact"] in FAILING_IMPACTS]
    assert not serious, "\n".join(
        f"{v['impact']} {v['id']}: {v['help']} at {', '.join(v['targets'][:8])}"
        + (f" and {len(v['targets']) - 8} more" if len(v["targets"]) > 8 else "")
        for v in serious
    )


FOCUSED = """() => {
    const e = document.activeElement, s = getComputedStyle(e);
    return {tag: e.tagName, text: (e.textContent || e.value || "").trim().slice(0, 40),
            name: e.getAttribute("name") || "", outline: s.outlineStyle, width: s.outlineWidth};
}"""


@pytest.mark.parametrize(
    ("person", "path", "target"),
    [
        ("officer", "/requests/{ready}/", "Approve"),
        ("steward", "/datasets/{people}/", "Request release"),
    ],
    ids=["officer approves", "steward requests"],
)
def test_the_keyboard_reaches_the_main_action_with_a_visible_focus_ring(
    pages, site, person, path, target
):
    """Tab from the top of the page to its main button: every control on the way shows the
    focus ring."""
    page = pages(person)
    page.goto(site["url"] + path.format(**site["ids"]))
    wait_for_htmx(page)
    without_ring, reached = [], False
    for _ in range(800):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if focused["tag"] == "BODY":  # past the last control
            break
        if focused["outline"] != "solid" or focused["width"] in ("0px", ""):
            without_ring.append(focused)
        if focused["text"] == target and focused["tag"] == "BUTTON":
            reached = True
            break
    assert reached, f"Tab never reached the {target!r} button"
    assert not without_ring, without_ring[:5]
