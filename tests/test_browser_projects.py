"""Projects in Debian's chromium, on the two-project demo (``seed_demo``): a project admin adds
a member and changes a role on the members page, and is refused the removal of the project's
last admin with the reason shown; project B's officer neither sees project A's request in the
review queue nor opens it; a site administrator creates a project on the projects page.

Runs against real web, worker and Redis processes.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.support import processes
from tests.support.browser import log_in, wait_for_htmx

# Chromium, and the app on real processes (Redis, a Celery worker, the web server).
pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    seed = [("-m", "tests.support.projects_scenario")]
    with processes.app_stack(tmp_path_factory.mktemp("stack"), seed=seed) as stack:
        # The scenario's JSON is its last line (the console e-mail backend may print before it).
        made = json.loads(stack["seeded"][0].strip().splitlines()[-1])
        stack["accounts"].update(made.pop("accounts"))
        yield {**stack, "ids": made}


def _roles_in_db(site, username: str, project: str) -> set[str]:
    """The roles the database holds, read apart from the app."""
    with sqlite3.connect(site["workdir"] / "db.sqlite3") as db:
        rows = db.execute(
            "SELECT m.role FROM releases_membership m JOIN auth_user u ON u.id = m.user_id "
            "JOIN releases_project p ON p.id = m.project_id WHERE u.username = ? AND p.slug = ?",
            (username, project),
        ).fetchall()
    return {role for (role,) in rows}


def _role_box(page, username: str, role: str):
    return page.locator(f"tr[data-member='{username}'] input[name=roles][value={role}]")


def test_a_project_admin_adds_a_member_changes_a_role_and_keeps_the_last_admin(browser, site):
    from playwright.sync_api import expect

    # ``officer`` is the first project's only admin.
    context, page = log_in(browser, site, "officer")
    page.click("#nav-projects")
    page.click("tr[data-project=default] >> text=Members")
    expect(page.locator("h1")).to_contain_text("members")

    # Add a member as a recipient.
    page.fill("#member-add input[name=username]", "newcomer")
    page.check("#member-add input[name=roles][value=recipient]")
    page.click("#member-add button[type=submit]")
    wait_for_htmx(page)
    expect(_role_box(page, "newcomer", "recipient")).to_be_checked()
    assert _roles_in_db(site, "newcomer", "default") == {"recipient"}

    # Change the role: a data steward instead.
    _role_box(page, "newcomer", "steward").check()
    _role_box(page, "newcomer", "recipient").uncheck()
    page.click("tr[data-member=newcomer] button[type=submit]")
    wait_for_htmx(page)
    expect(_role_box(page, "newcomer", "steward")).to_be_checked()
    expect(_role_box(page, "newcomer", "recipient")).not_to_be_checked()
    assert _roles_in_db(site, "newcomer", "default") == {"steward"}

    # Removing the last admin is refused, with the reason on the page.
    _role_box(page, "officer", "admin").uncheck()
    page.click("tr[data-member=officer] button[type=submit]")
    wait_for_htmx(page)
    expect(page.locator("#members-error")).to_contain_text("no project admin left")
    assert "admin" in _roles_in_db(site, "officer", "default")
    page.reload()
    expect(_role_box(page, "officer", "admin")).to_be_checked()
    context.close()

    # The new role takes effect: newcomer now works with datasets.
    context, page = log_in(browser, site, "newcomer")
    page.click("text=Datasets")
    expect(page.locator("h1")).to_contain_text("Datasets")
    context.close()


def test_the_second_projects_officer_neither_sees_nor_opens_the_first_projects_request(
    browser, site
):
    from playwright.sync_api import expect

    ready = site["ids"]["ready"]
    # The first project's officer sees it waiting (so its absence below means something).
    context, page = log_in(browser, site, "officer")
    page.goto(site["url"] + "/reviews/")
    expect(page.locator(f"a[href='/requests/{ready}/']").first).to_be_visible()
    context.close()

    context, page = log_in(browser, site, "officer_b")
    page.goto(site["url"] + "/reviews/")
    expect(page.locator("h1")).to_be_visible()
    assert page.locator(f"a[href='/requests/{ready}/']").count() == 0
    assert "project-a-people" not in page.content()
    response = page.goto(site["url"] + f"/requests/{ready}/")
    assert response is not None and response.status == 404
    # The stack runs with DEBUG on: the refusal page names the Http404's sentence.
    expect(page.locator("body")).to_contain_text("No such release request.")
    assert "project-a-people" not in page.content()
    context.close()


def test_a_site_administrator_creates_a_project(browser, site):
    from playwright.sync_api import expect

    context, page = log_in(browser, site, "siteadmin")
    page.click("#nav-projects")
    page.fill("#project-create input[name=name]", "Cardiology study")
    page.fill("#project-create input[name=slug]", "cardiology")
    page.fill("#project-create input[name=required_approvals]", "2")
    page.click("#project-create button[type=submit]")
    # Its members page opens next (to name its admin), then it is in the list.
    expect(page.locator("h1")).to_have_text("Cardiology study: members")
    expect(page.locator("body")).to_contain_text("Created Cardiology study.")
    page.click("text=All projects")
    expect(page.locator("tr[data-project=cardiology]")).to_contain_text("Cardiology study")
    with sqlite3.connect(site["workdir"] / "db.sqlite3") as db:
        found = db.execute(
            "SELECT name, required_approvals FROM releases_project WHERE slug = 'cardiology'"
        ).fetchall()
    assert found == [("Cardiology study", 2)]
    # A short name already taken is refused with a sentence, and makes nothing.
    page.fill("#project-create input[name=name]", "Another")
    page.fill("#project-create input[name=slug]", "cardiology")
    page.click("#project-create button[type=submit]")
    expect(page.locator("#project-create .error")).to_be_visible()
    assert page.locator("tr[data-project=cardiology]").count() == 1
    context.close()


def _unread_in_db(site, username: str) -> list[str]:
    """The links of ``username``'s unread notifications, read apart from the app."""
    with sqlite3.connect(site["workdir"] / "db.sqlite3") as db:
        rows = db.execute(
            "SELECT n.link FROM releases_notification n JOIN auth_user u ON u.id = n.user_id "
            "WHERE u.username = ? AND n.read_at IS NULL ORDER BY n.id",
            (username,),
        ).fetchall()
    return [link for (link,) in rows]


def test_the_projects_officer_is_told_of_the_waiting_request_and_the_other_is_not(browser, site):
    from playwright.sync_api import expect

    ready = site["ids"]["ready"]
    link = f"/requests/{ready}/"
    unread = _unread_in_db(site, "officer")
    assert link in unread
    context, page = log_in(browser, site, "officer")
    # The unread count in the navigation bar is the database's.
    expect(page.locator("#notification-badge .badge")).to_contain_text(str(len(unread)))
    page.click("#nav-notifications")
    row = page.locator("#notifications tr.unread").filter(has=page.locator(f"a[href='{link}']"))
    expect(row).to_have_count(1)
    row.locator("button", has_text="Mark read").click()
    expect(
        page.locator("#notifications tr.read").filter(has=page.locator(f"a[href='{link}']"))
    ).to_have_count(1)
    assert link not in _unread_in_db(site, "officer")
    # The link leads to the request waiting for review.
    page.click(f"#notifications a[href='{link}']")
    expect(page.locator("h1")).to_contain_text(f"#{ready}")
    # Nothing unread is left once all are marked read: no badge.
    page.click("#nav-notifications")
    if page.locator("button", has_text="Mark all").count():
        page.click("button:has-text('Mark all')")
    page.reload()
    expect(page.locator("#notification-badge .badge")).to_have_count(0)
    assert _unread_in_db(site, "officer") == []

    # Preferences: a kind switched off is kept as chosen.
    page.goto(site["url"] + "/account/notifications/preferences/")
    page.check("input[name=review_ready][value=off]")
    page.click("main button[type=submit]")
    page.goto(site["url"] + "/account/notifications/preferences/")
    expect(page.locator("input[name=review_ready][value=off]")).to_be_checked()
    context.close()

    # The second project's officer reviews nothing of the first: told nothing of it.
    assert _unread_in_db(site, "officer_b") == []
    context, page = log_in(browser, site, "officer_b")
    expect(page.locator("#notification-badge .badge")).to_have_count(0)
    page.click("#nav-notifications")
    assert page.locator(f"a[href='{link}']").count() == 0
    assert "project-a-people" not in page.content()
    context.close()
