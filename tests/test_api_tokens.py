"""Personal access tokens: made on the account page (shown once) or by the command (printed
on its last line), stored as a hash only, refused once expired or revoked (401, no data, an
audit row), scoped (a read-only token cannot write: 403), and throttled (429)."""

from __future__ import annotations

import hashlib
import io
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from releases.api import tokens
from releases.models import ApiToken, AuditEvent
from tests.support import factories
from tests.support.api import client_for, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()  # the rate limit's counts (per token, per address): each test starts with none


ME = "/api/v1/datasets"


def _database_text() -> str:
    """Every row of every table, as text."""
    return repr([list(model.objects.values_list()) for model in apps.get_models()])


def test_the_page_shows_a_new_token_once_and_stores_only_its_hash(steward):
    client = Client()
    client.force_login(steward)
    response = client.post(
        reverse("account:api_tokens"),
        {"name": "monthly pipeline", "scope": "write", "expires_days": "30"},
    )
    assert response.status_code == 201
    page = response.content.decode()
    token = page.split('<code id="token-value">')[1].split("</code>")[0]
    assert token.startswith("anon_")
    row = ApiToken.objects.get()
    assert (row.name, row.scope, row.user) == ("monthly pipeline", "write", steward)
    assert abs(row.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    # Stored as its SHA-256 only: the token is nowhere in the database.
    assert row.token_sha256 == hashlib.sha256(token.encode()).hexdigest()
    assert token not in _database_text()
    secret = token.rsplit("_", 1)[1]
    assert secret not in _database_text()
    # The list shows the prefix, never the token again.
    listing = client.get(reverse("account:api_tokens")).content.decode()
    assert row.prefix in listing and token not in listing and secret not in listing
    assert "monthly pipeline" in listing and "Read and write" in listing
    assert AuditEvent.objects.filter(action="token_created", actor=steward).count() == 1
    # And it works.
    assert client_for(token).get(ME).status_code == 200


def test_the_page_refuses_a_lifetime_past_the_maximum(steward, settings):
    settings.API_TOKEN_MAX_DAYS = 30
    client = Client()
    client.force_login(steward)
    response = client.post(
        reverse("account:api_tokens"), {"name": "x", "scope": "read", "expires_days": "31"}
    )
    assert response.status_code == 400
    assert "A token lasts at most 30 days (API_TOKEN_MAX_DAYS)." in response.content.decode()
    assert not ApiToken.objects.exists()


def test_a_revoked_token_gets_401_and_no_data_and_the_refusal_is_audited(steward):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    token = token_for(steward, "read")
    api = client_for(token)
    listed = api.get(ME)
    assert listed.status_code == 200 and listed.json()["items"][0]["id"] == dataset.pk
    page = Client()
    page.force_login(steward)
    row = ApiToken.objects.get()
    response = page.post(reverse("account:api_token_revoke", args=[row.pk]))
    assert response.status_code == 302
    assert AuditEvent.objects.filter(action="token_revoked", actor=steward).count() == 1
    refused = api.get(ME)
    assert refused.status_code == 401
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json() == {
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "The API token was revoked.",
    }
    assert "people.csv" not in refused.content.decode()
    event = AuditEvent.objects.get(action="token_refused")
    assert event.actor == steward and event.detail["reason"] == "The API token was revoked."


def test_another_persons_token_cannot_be_revoked(steward, other_steward):
    token_for(steward)
    row = ApiToken.objects.get()
    page = Client()
    page.force_login(other_steward)
    assert page.post(reverse("account:api_token_revoke", args=[row.pk])).status_code == 404
    assert ApiToken.objects.get().revoked_at is None


def test_an_expired_token_gets_401(steward):
    token = token_for(steward)
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    response = client_for(token).get(ME)
    assert response.status_code == 401
    assert response.json()["detail"] == "The API token has expired."


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer",
        "Bearer anon_nosuch_secret",
        "Basic c3Rld2FyZDpwdy1zdGV3YXJk",
        "Token {token}",
        "Bearer {token}x",
    ],
)
def test_no_valid_token_gets_401_and_no_data(steward, header):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    token = token_for(steward)
    headers = {} if header is None else {"HTTP_AUTHORIZATION": header.format(token=token)}
    for path in (ME, f"{ME}/{dataset.pk}", f"{ME}/{dataset.pk}/columns"):
        response = Client().get(path, **headers)
        assert response.status_code == 401, (path, header)
        assert response["Content-Type"] == "application/problem+json"
        assert set(response.json()) == {"type", "title", "status", "detail"}
        assert "people.csv" not in response.content.decode()


def test_a_session_cookie_is_not_accepted_by_the_api(steward):
    factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    client = Client()
    client.force_login(steward)
    response = client.get(ME)
    assert response.status_code == 401
    assert "people.csv" not in response.content.decode()


def test_a_read_only_token_cannot_write(steward):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    api = client_for(token_for(steward, "read"))
    response = api.patch(
        f"{ME}/{dataset.pk}/columns",
        {"roles": {"age": "quasi"}},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert "read-only" in response.json()["detail"]
    assert dataset.columns.get(name="age").role == ""
    assert AuditEvent.objects.filter(action="tagging").count() == 0
    event = AuditEvent.objects.get(action="token_refused")
    assert event.detail["reason"] == "read-only token" and event.detail["method"] == "PATCH"
    # A write token may.
    api = client_for(token_for(steward, "write"))
    response = api.patch(
        f"{ME}/{dataset.pk}/columns",
        {"roles": {"age": "quasi"}},
        content_type="application/json",
    )
    assert response.status_code == 200
    assert dataset.columns.get(name="age").role == "quasi"


def test_token_use_is_throttled(steward, settings):
    settings.API_RATE_LIMIT = "3/min"
    api = client_for(token_for(steward))
    answers = [api.get(ME).status_code for _ in range(5)]
    assert answers == [200, 200, 200, 429, 429]
    refused = api.get(ME)
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["status"] == 429
    assert int(refused["Retry-After"]) > 0
    # Another token is counted on its own.
    assert client_for(token_for(steward)).get(ME).status_code == 200


def test_guessing_tokens_is_throttled_by_address(settings, db):
    settings.API_RATE_LIMIT = "3/min"
    guesser = Client(HTTP_AUTHORIZATION="Bearer anon_0000_guess", REMOTE_ADDR="127.0.0.9")
    assert [guesser.get(ME).status_code for _ in range(5)] == [401, 401, 401, 429, 429]


def test_a_forged_forwarded_for_does_not_escape_the_throttle(settings, db):
    settings.API_RATE_LIMIT = "3/min"
    guesser = Client(HTTP_AUTHORIZATION="Bearer anon_0000_guess", REMOTE_ADDR="127.0.0.8")
    answers = [guesser.get(ME, HTTP_X_FORWARDED_FOR=f"10.1.1.{i}").status_code for i in range(5)]
    assert answers == [401, 401, 401, 429, 429]
    # Behind the TLS proxy, the address it appended counts: another client is not refused.
    settings.BEHIND_TLS_PROXY = True
    other = Client(HTTP_AUTHORIZATION="Bearer anon_0000_guess", REMOTE_ADDR="127.0.0.8")
    assert other.get(ME, HTTP_X_FORWARDED_FOR="203.0.113.50").status_code == 401


def test_last_used_is_recorded(steward):
    token = token_for(steward)
    assert ApiToken.objects.get().last_used_at is None
    client_for(token).get(ME)
    assert ApiToken.objects.get().last_used_at is not None


def test_the_command_prints_the_token_alone_on_its_last_line(steward):
    out = io.StringIO()
    call_command(
        "create_api_token", "steward", "--expires-days", "7", "--scope", "write", stdout=out
    )
    token = out.getvalue().rstrip("\n").splitlines()[-1]
    assert token.startswith("anon_") and " " not in token
    row = ApiToken.objects.get()
    assert row.scope == "write"
    assert abs(row.expires_at - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)
    assert client_for(token).get(ME).status_code == 200
    assert token not in _database_text()


def test_the_command_refuses_an_unknown_user_and_a_lifetime_past_the_maximum(steward, settings):
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("create_api_token", "nobody")
    settings.API_TOKEN_MAX_DAYS = 10
    with pytest.raises(CommandError, match="at most 10 days"):
        call_command("create_api_token", "steward", "--expires-days", "11")
    assert not ApiToken.objects.exists()


def test_a_token_is_compared_by_its_hash(steward):
    token = token_for(steward)
    row = ApiToken.objects.get()
    assert tokens.authenticate(token).pk == row.pk
    with pytest.raises(tokens.TokenRefused):
        tokens.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B"))
