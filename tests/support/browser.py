"""Driving Debian's chromium with Playwright: launch options and page helpers."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def wait_for_htmx(page) -> None:
    """Wait until htmx has no request in flight and has processed what it swapped in."""
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')"
    )


def log_in(browser, stack, username: str):
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(stack["url"] + "/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", stack["accounts"][username])
    page.click("button[type=submit]")
    page.wait_for_selector(f"text=Welcome, {username}")
    return context, page
