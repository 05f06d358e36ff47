"""Sessions end after 30 minutes without a request and 12 hours after sign-in (both set by the
environment), and no signed-in page may be stored by a browser or a proxy."""

from __future__ import annotations

import time

import pytest
from django.test import Client, override_settings
from django.urls import reverse

pytestmark = pytest.mark.django_db


class Clock:
    """``time.time`` under the test's control (the signed cookie's date and the checks both
    read it)."""

    def __init__(self, monkeypatch) -> None:
        self.now = time.time()
        monkeypatch.setattr(time, "time", lambda: self.now)

    def advance(self, minutes: float) -> None:
        self.now += minutes * 60


@pytest.fixture
def clock(monkeypatch):
    return Clock(monkeypatch)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_signed_in_page_is_not_stored_by_caches(steward):
    response = signed_in(steward).get(reverse("releases:home"))
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]


def test_activity_keeps_a_session_open_and_30_idle_minutes_end_it(steward, clock):
    client = signed_in(steward)
    home = reverse("releases:home")
    for _ in range(4):  # a request every 25 minutes: well past 30 minutes in all
        clock.advance(25)
        assert client.get(home).status_code == 200
    clock.advance(31)
    response = client.get(home)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert "no-store" in response["Cache-Control"]
    # Signed out for good: the next request is not let in either, and the page says why.
    page = client.get(home, follow=True)
    assert page.redirect_chain[-1][0].startswith(reverse("login"))
    assert "signed out after 30 minutes without activity" in page.content.decode()


def test_a_session_ends_12_hours_after_sign_in_however_active(steward, clock):
    client = signed_in(steward)
    home = reverse("releases:home")
    for _ in range(int(12 * 60 / 20)):
        clock.advance(20)
        assert client.get(home).status_code == 200
    clock.advance(21)
    response = client.get(home, follow=True)
    assert response.redirect_chain[0][0].startswith(reverse("login"))
    assert "a session lasts at most 12 hours" in response.content.decode()


def test_an_htmx_poll_after_the_timeout_sends_the_whole_page_to_sign_in(steward, clock):
    client = signed_in(steward)
    client.get(reverse("releases:home"))
    clock.advance(45)
    response = client.get(reverse("releases:home"), HTTP_HX_REQUEST="true")
    assert response.status_code == 204
    assert response["HX-Redirect"] == reverse("login")


def test_an_activity_cookie_cannot_be_forged(steward, clock):
    client = signed_in(steward)
    client.get(reverse("releases:home"))
    clock.advance(45)
    # Without the signing key a client can only send a value the server rejects.
    client.cookies["seen"] = "1:forged:signature"
    assert client.get(reverse("releases:home")).status_code == 302


@override_settings(SESSION_IDLE_MINUTES=5, SESSION_MAX_HOURS=1)
def test_both_limits_come_from_the_settings(steward, clock):
    client = signed_in(steward)
    clock.advance(4)
    assert client.get(reverse("releases:home")).status_code == 200
    clock.advance(6)
    assert client.get(reverse("releases:home")).status_code == 302
