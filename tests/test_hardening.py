"""Safe defaults: DEBUG off unless asked, a generated secret key, login throttling, CSP."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.conftest import make_user
from tests.support.processes import REPO

pytestmark = pytest.mark.django_db


def settings_in_fresh_process(env: dict[str, str], expression: str) -> str:
    """Import the settings module in a new interpreter with exactly this environment."""
    base = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY"}}
    result = subprocess.run(
        [sys.executable, "-c", f"import anonymizer_site.settings as s; print({expression})"],
        cwd=REPO,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.process
def test_debug_is_off_unless_asked_for(tmp_path):
    assert settings_in_fresh_process({"VAR_DIR": str(tmp_path)}, "s.DEBUG") == "False"
    assert settings_in_fresh_process({"VAR_DIR": str(tmp_path), "DEBUG": "1"}, "s.DEBUG") == "True"


@pytest.mark.process
def test_without_a_secret_key_one_is_generated_once_and_kept_private(tmp_path):
    env = {"VAR_DIR": str(tmp_path)}
    first = settings_in_fresh_process(env, "s.SECRET_KEY")
    second = settings_in_fresh_process(env, "s.SECRET_KEY")
    key_file = tmp_path / "secret-key"
    assert first == second == key_file.read_text()
    assert len(first) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    # A key from the environment wins, and nothing is written then.
    other = tmp_path / "other"
    chosen = "k" * 40
    assert (
        settings_in_fresh_process({"VAR_DIR": str(other), "SECRET_KEY": chosen}, "s.SECRET_KEY")
        == chosen
    )
    assert not (other / "secret-key").exists()


def login_post(client, username: str, password: str):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_repeated_wrong_passwords_make_the_address_wait_then_it_may_try_again(client, settings):
    from datetime import timedelta

    from axes.models import AccessAttempt

    make_user("victim")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = login_post(client, "victim", "wrong")
        assert response.status_code == 200  # the login form again, with its error
    response = login_post(client, "victim", "wrong")
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    # While the address waits, even the right password is refused from it.
    response = login_post(client, "victim", "pw-victim")
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    # Once the wait (LOGIN_DELAY_MINUTES) is over, the right password works again.
    past = timezone.now() - timedelta(minutes=settings.LOGIN_DELAY_MINUTES, seconds=1)
    AccessAttempt.objects.update(attempt_time=past)
    response = login_post(client, "victim", "pw-victim")
    assert response.status_code == 302
    assert client.session["_auth_user_id"]


def test_the_admin_login_is_throttled_too(client, settings):
    make_user("admin-victim")
    url = reverse("admin:login")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(url, {"username": "admin-victim", "password": "wrong"})
    response = client.post(url, {"username": "admin-victim", "password": "pw-admin-victim"})
    assert response.status_code == 429


def test_pages_carry_a_content_security_policy_without_inline_code(client):
    response = client.get(reverse("login"))
    policy = response.headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


@pytest.mark.process
def test_behind_a_tls_proxy_plain_http_is_redirected_and_hsts_sent(tmp_path):
    env = {"VAR_DIR": str(tmp_path), "BEHIND_TLS_PROXY": "1"}
    shown = "(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER)"
    assert settings_in_fresh_process(env, shown) == (
        "(True, 31536000, ('HTTP_X_FORWARDED_PROTO', 'https'))"
    )
    # Each can still be set on its own; without a proxy neither is on by default.
    chosen = {**env, "SECURE_SSL_REDIRECT": "0", "SECURE_HSTS_SECONDS": "60"}
    assert settings_in_fresh_process(chosen, "(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS)") == (
        "(False, 60)"
    )
    plain = {"VAR_DIR": str(tmp_path)}
    assert settings_in_fresh_process(plain, "(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS)") == (
        "(False, 0)"
    )
