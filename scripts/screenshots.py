"""Screenshots of the upload, tagging, review and recipient pages for the README.

``make screenshots``: a throwaway demo under ``var/screenshots-demo/`` (its own SQLite
database, media and Redis; your ``var/`` data is never touched) seeded as ``seed_demo
--with-release`` does plus ``tests/support/a11y_scenario.py``, served on real processes, then
Debian's chromium (Playwright) writes 1280 px wide PNGs into ``docs/screenshots/``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import processes  # noqa: E402
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, wait_for_htmx  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
WIDTH = 1280
#: The tallest part of a page kept (the top): enough to show what the page is for.
MAX_HEIGHT = 1500

# (file, who, path with the demo's ids, what to wait for)
SHOTS = [
    ("upload.png", "steward", "/datasets/", "#upload-form, form[enctype]"),
    ("tagging.png", "steward", "/datasets/{adult}/#tagging", "#risk-figures"),
    ("review.png", "officer", "/requests/{ready}/", "#checks"),
    ("recipient.png", "recipient", "/requests/{approved}/", "#files"),
]


def shoot(browser, stack: dict, ids: dict) -> list[Path]:
    written, pages = [], {}
    for filename, person, path, ready in SHOTS:
        if person not in pages:
            context = browser.new_context(viewport={"width": WIDTH, "height": 900})
            page = context.new_page()
            page.set_default_timeout(60_000)
            page.goto(stack["url"] + "/accounts/login/")
            page.fill("input[name=username]", person)
            page.fill("input[name=password]", stack["accounts"][person])
            page.click("button[type=submit]")
            page.wait_for_selector(f"text=Welcome, {person}")
            pages[person] = page
        page = pages[person]
        page.goto(stack["url"] + path.format(**ids))
        page.wait_for_selector(ready, state="attached")
        wait_for_htmx(page)
        anchor = path.partition("#")[2]
        top = 0
        if anchor:
            top = page.evaluate(
                "(id) => Math.max(0, document.getElementById(id).getBoundingClientRect().top"
                " + window.scrollY - 16)",
                anchor,
            )
        full = page.evaluate("() => document.documentElement.scrollHeight")
        target = OUT / filename
        page.screenshot(
            path=str(target),
            full_page=True,
            animations="disabled",
            caret="hide",
            clip={"x": 0, "y": top, "width": WIDTH, "height": min(MAX_HEIGHT, full - top)},
        )
        written.append(target)
    return written


def main() -> None:
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        sys.exit(f"Debian's chromium is needed ({CHROMIUM}): apt-get install chromium")
    workdir = ROOT / "var" / "screenshots-demo"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    OUT.mkdir(parents=True, exist_ok=True)
    seed = [("manage.py", "seed_demo", "--with-release"), ("-m", "tests.support.a11y_scenario")]
    print("Seeding a throwaway demo in", workdir.relative_to(ROOT), "...")
    with processes.app_stack(workdir, seed=seed) as stack:
        # The scenario's JSON is its last line (the console e-mail backend prints before it).
        ids = json.loads(stack["seeded"][1].strip().splitlines()[-1])
        stack["accounts"].update(ids.pop("accounts"))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            try:
                written = shoot(browser, stack, ids)
            finally:
                browser.close()
    shutil.rmtree(workdir, ignore_errors=True)
    for path in written:
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
