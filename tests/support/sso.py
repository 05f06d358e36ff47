"""Single sign-on against a real OpenID provider: the test provider
(``tests/support/oidc_provider/``, django-oauth-toolkit) and the app each in a process of its
own on 127.0.0.1, and a browser-like HTTP client (requests, following redirects) that walks the
authorization code flow through both."""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.processes import (
    _stop,
    app_environment,
    free_port,
    manage,
    wait_until,
    web_server,
)

SUPPORT = Path(__file__).resolve().parent
CLIENT_ID = "anonymizer-test"
CLIENT_SECRET = "a-long-test-client-secret-0123456789"
PROVIDER_NAME = "Test Provider"


class Provider:
    """The test provider's process: started, stopped for real, told about users and the app."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        key_path = workdir / "signing-key.pem"
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        self.env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(SUPPORT),
            "DJANGO_SETTINGS_MODULE": "oidc_provider.settings",
            "IDP_DATABASE": str(workdir / "idp.sqlite3"),
            "IDP_SIGNING_KEY": str(key_path),
            "PYTHONUNBUFFERED": "1",
        }
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.discovery_url = f"{self.url}/o/.well-known/openid-configuration"
        self.process: subprocess.Popen | None = None
        self.django("migrate", "--noinput")

    def django(self, *args: str) -> None:
        completed = subprocess.run(
            [sys.executable, "-m", "django", *args],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"provider {' '.join(args)} failed:\n{completed.stderr}")

    def user(self, username: str, password: str, groups: list[str]) -> None:
        self.django(
            "idp_user",
            username,
            password,
            f"--email={username}@example.org",
            f"--groups={','.join(groups)}",
        )

    def register(self, app_url: str) -> None:
        self.django(
            "idp_client",
            CLIENT_ID,
            CLIENT_SECRET,
            f"{app_url}/oidc/callback/",
            f"{app_url}/accounts/login/",
        )

    def start(self) -> None:
        log = open(  # noqa: SIM115 - open for the life of the process
            self.workdir / "idp.log", "ab"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            cwd=self.workdir,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

        def answers() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    "The provider exited:\n" + (self.workdir / "idp.log").read_text()
                )
            try:
                with urllib.request.urlopen(self.discovery_url, timeout=2) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_until(answers, 60, "the OpenID provider")

    def kill(self) -> None:
        """Gone at once (SIGKILL), as a crashed provider is."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process)
            self.process = None


@contextlib.contextmanager
def provider(workdir: Path) -> Iterator[Provider]:
    idp = Provider(workdir)
    idp.start()
    try:
        yield idp
    finally:
        idp.stop()


def migrated_database(workdir: Path) -> Path:
    """A migrated app database to copy (migrating once is the slow part of starting the app)."""
    path = workdir / "template.sqlite3"
    env = app_environment(f"sqlite:///{path}", "redis://127.0.0.1:1/0", workdir, workdir)
    manage(env, "migrate", "--noinput")
    return path


@contextlib.contextmanager
def app(
    workdir: Path, template: Path, discovery_url: str, **settings: str
) -> Iterator[tuple[str, dict]]:
    """The app's web server with single sign-on on; yields its URL and its environment."""
    workdir.mkdir(parents=True, exist_ok=True)
    database = workdir / "db.sqlite3"
    shutil.copy(template, database)
    env = app_environment(
        f"sqlite:///{database}", "redis://127.0.0.1:1/0", workdir / "media", workdir
    )
    env.update(
        OIDC_ENABLED="1",
        OIDC_PROVIDER_NAME=PROVIDER_NAME,
        OIDC_DISCOVERY_URL=discovery_url,
        OIDC_CLIENT_ID=CLIENT_ID,
        OIDC_CLIENT_SECRET=CLIENT_SECRET,
        OIDC_GROUP_CLAIM="groups",
        OIDC_GROUP_ROLES="alpha-admins=alpha:admin,alpha-officers=alpha:officer,"
        "beta-stewards=beta:steward",
        OIDC_TIMEOUT_SECONDS="3",
    )
    env.update(settings)
    with web_server(env, workdir) as url:
        yield url, env


def app_python(env: dict, code: str) -> str:
    """Python run against the app's database (Django set up), e.g. to add a local account."""
    return manage(env, "shell", "-c", code)


def query(database: Path, sql: str, *args: object) -> list[tuple]:
    """Rows read straight from the app's SQLite file: what was written, seen independently."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        return connection.execute(sql, args).fetchall()


def csrf(html: str, form_id: str) -> str:
    """The CSRF token in the form ``form_id`` of a page."""
    form = re.search(rf'<form[^>]*id="{form_id}".*?</form>', html, re.S)
    assert form, f"no form {form_id} on the page"
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.group(0))
    assert token
    return token.group(1)


def start_sso(client: requests.Session, app_url: str) -> requests.Response:
    """Press "Sign in with ..." on the login page; the response the browser ends on."""
    page = client.get(f"{app_url}/accounts/login/")
    token = csrf(page.text, "sso-form")
    return client.post(f"{app_url}/oidc/authenticate/", data={"csrfmiddlewaretoken": token})


def provider_sign_in(
    client: requests.Session, page: requests.Response, username: str, password: str, **kw
) -> requests.Response:
    """Fill in the provider's login form (``page``) and send it."""
    next_url = re.search(r'name="next" value="([^"]*)"', page.text)
    assert next_url, page.text[:500]
    return client.post(
        page.url.split("?")[0],
        data={
            "csrfmiddlewaretoken": csrf(page.text, "idp-login"),
            "username": username,
            "password": password,
            "next": unescape(next_url.group(1)),
        },
        **kw,
    )


def sso_login(
    client: requests.Session, app_url: str, username: str, password: str
) -> requests.Response:
    """The whole authorization code flow; the app's page the browser ends on."""
    page = start_sso(client, app_url)
    assert "idp-login" in page.text, page.text[:500]
    return provider_sign_in(client, page, username, password)


def logout(client: requests.Session, app_url: str, page_html: str) -> requests.Response:
    """Press "Log out" (the form in the header of every signed-in page)."""
    form = re.search(r'<form class="logout".*?</form>', page_html, re.S)
    assert form
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.group(0))
    assert token
    return client.post(f"{app_url}/accounts/logout/", data={"csrfmiddlewaretoken": token.group(1)})
