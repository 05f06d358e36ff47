"""Single sign-on with OpenID Connect against a real provider (django-oauth-toolkit, its own
process on 127.0.0.1) and the app's own web server: the authorization code flow walked by an
HTTP client that follows redirects and fills in the provider's login form, as a browser does."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urljoin

import pytest
import requests

from tests.support import sso
from tests.support.processes import free_port

pytestmark = pytest.mark.process

GROUPS_SQL = (
    "SELECT p.slug, m.role, m.source FROM releases_membership m "
    "JOIN releases_project p ON p.id = m.project_id JOIN auth_user u ON u.id = m.user_id "
    "WHERE u.username = ? ORDER BY p.slug, m.role"
)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return sso.migrated_database(tmp_path_factory.mktemp("sso-template"))


@pytest.fixture(scope="module")
def world(tmp_path_factory, template):
    """The provider with its users and groups, the app with two projects and a local account."""
    root = tmp_path_factory.mktemp("sso")
    with sso.provider(root / "idp") as idp:
        idp.user("ada", "ada-password-1", ["alpha-admins", "alpha-officers", "beta-stewards"])
        idp.user("bob", "bob-password-1", ["alpha-officers", "unmapped"])
        with sso.app(root / "app", template, idp.discovery_url) as (url, env):
            idp.register(url)
            sso.app_python(
                env,
                "from releases.models import Project; from django.contrib.auth.models import User;"
                "Project.objects.get_or_create(slug='alpha', defaults={'name': 'Alpha'});"
                "Project.objects.get_or_create(slug='beta', defaults={'name': 'Beta'});"
                "User.objects.create_user('local', password='local-password-1')",
            )
            yield {"idp": idp, "url": url, "env": env, "db": root / "app" / "db.sqlite3"}


def memberships(world, username: str) -> list[tuple]:
    return sso.query(world["db"], GROUPS_SQL, username)


def test_first_login_creates_the_user_with_the_mapped_roles(world):
    client = requests.Session()
    page = sso.sso_login(client, world["url"], "bob", "bob-password-1")
    assert page.status_code == 200
    assert page.url == world["url"] + "/", page.url
    assert 'class="who">bob<' in page.text
    # Found by the provider's subject, stored; no password works for the account.
    rows = sso.query(
        world["db"],
        "SELECT u.username, u.email, u.password, s.subject FROM auth_user u "
        "JOIN releases_ssoidentity s ON s.user_id = u.id WHERE u.username = 'bob'",
    )
    assert len(rows) == 1
    assert rows[0][1] == "bob@example.org"
    assert rows[0][2].startswith("!")  # Django's unusable password
    assert rows[0][3]
    # alpha-officers maps to officer in alpha; "unmapped" gives nothing.
    assert memberships(world, "bob") == [("alpha", "officer", "idp")]
    actions = [
        row[0]
        for row in sso.query(
            world["db"],
            "SELECT e.action FROM releases_auditevent e JOIN auth_user u ON u.id = e.actor_id "
            "WHERE u.username = 'bob' ORDER BY e.id",
        )
    ]
    assert actions == ["login_sso", "membership"]
    # A second login finds the same account (no bob-2) and changes no role.
    client2 = requests.Session()
    assert sso.sso_login(client2, world["url"], "bob", "bob-password-1").url == world["url"] + "/"
    assert [r[0] for r in sso.query(world["db"], "SELECT username FROM auth_user")].count(
        "bob"
    ) == 1
    assert memberships(world, "bob") == [("alpha", "officer", "idp")]


def test_removed_from_a_group_loses_the_role_at_the_next_login(world):
    idp, url = world["idp"], world["url"]
    client = requests.Session()
    sso.sso_login(client, url, "ada", "ada-password-1")
    assert memberships(world, "ada") == [
        ("alpha", "admin", "idp"),
        ("alpha", "officer", "idp"),
        ("beta", "steward", "idp"),
    ]
    assert client.get(f"{url}/projects/alpha/members/").status_code == 200
    # A project admin grants ada a role in the app: it is kept apart from the provider's.
    sso.app_python(
        world["env"],
        "from releases.models import Project, Membership; from django.contrib.auth.models "
        "import User; Membership.objects.create(project=Project.objects.get(slug='beta'), "
        "user=User.objects.get(username='ada'), role='recipient')",
    )
    # Removed from alpha-admins and beta-stewards at the provider.
    idp.user("ada", "ada-password-1", ["alpha-officers"])
    client = requests.Session()
    page = sso.sso_login(client, url, "ada", "ada-password-1")
    assert page.url == url + "/"
    assert memberships(world, "ada") == [
        ("alpha", "officer", "idp"),
        ("beta", "recipient", "local"),
    ]
    assert client.get(f"{url}/projects/alpha/members/").status_code == 403
    events = sso.query(
        world["db"],
        "SELECT e.detail FROM releases_auditevent e JOIN auth_user u ON u.id = e.actor_id "
        "WHERE u.username = 'ada' AND e.action = 'membership' ORDER BY e.id",
    )
    last = [json.loads(row[0]) for row in events][-2:]
    assert {(e["project"], tuple(e["roles_before"]), tuple(e["roles_after"])) for e in last} == {
        ("alpha", ("admin", "officer"), ("officer",)),
        ("beta", ("recipient", "steward"), ("recipient",)),
    }


def test_logout_ends_the_app_session_and_the_providers(world):
    url = world["url"]
    client = requests.Session()
    home = sso.sso_login(client, url, "bob", "bob-password-1")
    page = sso.logout(client, url, home.text)
    # Through the provider's end-session endpoint, back to the app's login page.
    assert any(r.url.startswith(world["idp"].url + "/o/logout") for r in page.history)
    assert page.url.startswith(url + "/accounts/login/")
    assert client.get(url + "/", allow_redirects=False).status_code == 302
    # The provider asks for the password again: its session ended too.
    again = sso.start_sso(client, url)
    assert "idp-login" in again.text


def test_local_accounts_still_work_beside_sso(world):
    client = requests.Session()
    page = client.get(world["url"] + "/accounts/login/")
    assert "Sign in with Test Provider" in page.text
    response = client.post(
        world["url"] + "/accounts/login/",
        data={
            "csrfmiddlewaretoken": sso.csrf(page.text, "local-login"),
            "username": "local",
            "password": "local-password-1",
        },
    )
    assert response.url == world["url"] + "/"
    assert 'class="who">local<' in response.text


def local_login(client: requests.Session, url: str) -> requests.Response:
    page = client.get(url + "/accounts/login/")
    return client.post(
        url + "/accounts/login/",
        data={
            "csrfmiddlewaretoken": sso.csrf(page.text, "local-login"),
            "username": "local",
            "password": "local-password-1",
        },
    )


def test_a_provider_that_is_down_is_said_so_and_local_login_still_works(tmp_path, template):
    nothing_there = f"http://127.0.0.1:{free_port()}/.well-known/openid-configuration"
    with sso.app(tmp_path / "app", template, nothing_there) as (url, env):
        sso.app_python(
            env,
            "from django.contrib.auth.models import User;"
            "User.objects.create_user('local', password='local-password-1')",
        )
        client = requests.Session()
        page = sso.start_sso(client, url)
        assert page.url == url + "/accounts/login/"
        assert "Test Provider cannot be reached right now" in page.text
        assert "sign in with your local account" in page.text
        assert "Traceback" not in page.text
        assert local_login(client, url).url == url + "/"


def test_a_provider_that_dies_before_the_token_exchange(tmp_path, template):
    with (
        sso.provider(tmp_path / "idp") as idp,
        sso.app(tmp_path / "app", template, idp.discovery_url) as (url, env),
    ):
        idp.register(url)
        idp.user("eve", "eve-password-1", ["alpha-officers"])
        client = requests.Session()
        page = sso.start_sso(client, url)
        answer = sso.provider_sign_in(client, page, "eve", "eve-password-1", allow_redirects=False)
        # Follow the provider's redirects by hand, up to the app's callback with the code.
        location = urljoin(answer.url, answer.headers["Location"])
        while not location.startswith(url):
            answer = client.get(location, allow_redirects=False)
            location = urljoin(answer.url, answer.headers["Location"])
        callback = location
        assert "/oidc/callback/?" in callback and "code=" in callback
        idp.kill()
        page = client.get(callback)
        assert page.url == url + "/accounts/login/"
        assert "Test Provider cannot be reached right now" in page.text
        assert sso.query(tmp_path / "app" / "db.sqlite3", GROUPS_SQL, "eve") == []
        assert client.get(url + "/", allow_redirects=False).status_code == 302


def test_sso_only_refuses_the_local_form(tmp_path, template):
    nothing_there = f"http://127.0.0.1:{free_port()}/.well-known/openid-configuration"
    with sso.app(tmp_path / "app", template, nothing_there, LOCAL_LOGIN_ENABLED="0") as (
        url,
        env,
    ):
        sso.app_python(
            env,
            "from django.contrib.auth.models import User;"
            "User.objects.create_superuser('local', password='local-password-1')",
        )
        client = requests.Session()
        page = client.get(url + "/accounts/login/")
        assert "Sign in with Test Provider" in page.text
        assert 'id="local-login"' not in page.text
        assert 'name="password"' not in page.text
        refused = client.post(
            url + "/accounts/login/",
            data={
                "csrfmiddlewaretoken": sso.csrf(page.text, "sso-form"),
                "username": "local",
                "password": "local-password-1",
            },
        )
        assert refused.status_code == 403
        assert "switched off" in refused.text
        assert client.get(url + "/", allow_redirects=False).status_code == 302
        # The admin's own login form takes no password either.
        admin = client.get(url + "/admin/login/")
        token = sso.csrf(admin.text, "login-form")
        client.post(
            url + "/admin/login/",
            data={
                "csrfmiddlewaretoken": token,
                "username": "local",
                "password": "local-password-1",
            },
        )
        assert client.get(url + "/admin/", allow_redirects=False).status_code == 302


@pytest.mark.browser
def test_in_a_browser_the_button_signs_in_and_log_out_signs_out(world, browser):
    """chromium, with the app's Content-Security-Policy: the redirects from the button's and
    the logout's forms to the provider are allowed (form-action)."""
    world["idp"].user("cyd", "cyd-password-1", ["alpha-admins"])
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(world["url"] + "/")
    page.click("#sso-login")
    page.wait_for_selector("#idp-login")
    page.fill("input[name=username]", "cyd")
    page.fill("input[name=password]", "cyd-password-1")
    page.click("#idp-login button[type=submit]")
    page.wait_for_selector("text=Welcome, cyd")
    page.goto(world["url"] + "/projects/alpha/members/")
    assert "cyd" in page.inner_text("main")
    page.click("form.logout button[type=submit]")
    page.wait_for_url(world["url"] + "/accounts/login/**")
    assert page.is_visible("#sso-login")
    context.close()
