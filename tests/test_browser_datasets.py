"""A steward brings a file in by drag and drop, reads its profile, accepts the suggested roles
and builds an interval hierarchy with its live preview, in Debian's chromium against real web,
Celery worker and Redis processes.
"""

from __future__ import annotations

import base64

import pytest

from tests.conftest import ADULT
from tests.support.browser import log_in, wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server): the
# session's stack, started once on the one xdist worker of the "stack" group.
pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.xdist_group("stack")]

DROP = """
async ([data, name]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, { type: "text/csv" }));
  const zone = document.querySelector("#dropzone");
  for (const type of ["dragenter", "dragover", "drop"]) {
    zone.dispatchEvent(new DragEvent(type, { dataTransfer: transfer, bubbles: true, cancelable: true }));
  }
}
"""

WATCH_PROGRESS = """
() => {
  const form = document.querySelector("#upload-form");
  form.addEventListener("htmx:xhr:progress", () => {
    const box = document.querySelector("#upload-progress-box");
    console.log("upload-progress " + (box.hidden ? "hidden " : "shown ") + document.querySelector("#upload-progress").value);
  });
}
"""


def test_drop_profile_accept_suggestions_and_build_an_interval_hierarchy(browser, stack, tmp_path):
    from playwright.sync_api import expect

    context, page = log_in(browser, stack, "steward")
    progress: list[str] = []
    page.on(
        "console",
        lambda message: (
            progress.append(message.text) if message.text.startswith("upload-progress") else None
        ),
    )
    page.click("text=Datasets")

    # Drag the file in: the drop zone names it; the upload shows its progress bar.
    data = base64.b64encode((ADULT / "adult.csv").read_bytes()).decode()
    page.evaluate(DROP, [data, "adult.csv"])
    expect(page.locator("#dropzone-file")).to_contain_text("adult.csv")
    page.evaluate(WATCH_PROGRESS)
    page.click("#upload-form button[type=submit]")
    expect(page.locator("h1")).to_have_text("adult.csv")
    assert progress and progress[-1] == "upload-progress shown 100", progress

    # The worker profiles it while the page polls; then the profile is shown.
    expect(page.locator("table.preview thead")).to_contain_text("native-country", timeout=60_000)
    age = page.locator("tr[data-column='age']")
    expect(age.locator(".column-type")).to_contain_text("Integer")
    expect(age.locator(".suggestion")).to_contain_text("Quasi-identifier")
    expect(age.locator(".suggestion")).to_contain_text("ages")
    expect(page.locator("[data-column-detail='age'] svg.chart rect").first).to_be_attached()
    expect(page.locator("[data-column-detail='sex'] .top-values")).to_contain_text("Male")
    expect(page.locator("#risk")).to_contain_text("Tag quasi-identifiers")

    # Accept the suggestions: roles follow them; the risk of the data as it is appears.
    page.click("#accept-suggestions")
    expect(page.locator(".messages")).to_contain_text("Accepted the suggested roles")
    expect(age.locator("select")).to_have_value("quasi")
    expect(page.locator("tr[data-column='salary-class'] select")).to_have_value("sensitive")
    expect(page.locator("tr[data-column='workclass'] select")).to_have_value("insensitive")
    unique_rows = page.locator("#unique-rows")
    expect(unique_rows).to_be_visible()
    assert int(unique_rows.inner_text()) > 0

    # An interval hierarchy on age: the preview follows the widths typed, then it is used.
    wait_for_htmx(page)
    builder = page.locator("[data-column-detail='age'] .builder")
    builder.locator("select").select_option("intervals")
    builder.locator("input[name^=widths]").fill("5, 10, 20")
    expect(builder.locator(".preview")).to_contain_text("5 levels")
    expect(builder.locator(".preview table")).to_contain_text("35-39")
    expect(builder.locator(".preview table")).to_contain_text("20-39")
    builder.locator("input[name^=widths]").fill("5, 7")
    expect(builder.locator(".preview .error")).to_contain_text("each a multiple of the one before")
    builder.locator("input[name^=widths]").fill("5, 10, 20")
    expect(builder.locator(".preview")).to_contain_text("5 levels")
    builder.locator("button.save-hierarchy").click()
    expect(age.locator(".hierarchy-status")).to_have_text("numeric intervals (5 levels)")

    with page.expect_download() as download_info:
        age.locator("a.download-hierarchy").click()
    target = tmp_path / "age.csv"
    download_info.value.save_as(target)
    assert "39;35-39;30-39;20-39;*" in target.read_text().splitlines()
    context.close()
