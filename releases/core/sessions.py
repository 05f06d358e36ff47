"""Sessions end after a spell without activity and after a fixed lifetime, and no signed-in page
is kept by a browser or a proxy cache.

The last activity travels in a signed, timestamped cookie rather than in the session row: a
page (or an htmx poll) then changes nothing on the server, as a GET must not, and a client
cannot make a session look fresher than its last request (the signature dates the cookie). The
sign-in time is written into the session once, at sign-in.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout, user_logged_in
from django.contrib.auth.views import redirect_to_login
from django.core import signing
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.utils.cache import patch_cache_control

SEEN_COOKIE = "seen"
SIGNED_IN_AT = "signed_in_at"


@receiver(user_logged_in)
def _record_sign_in(request: HttpRequest | None = None, **kwargs) -> None:
    if request is not None and hasattr(request, "session"):
        request.session[SIGNED_IN_AT] = time.time()


def _idle_seconds() -> float:
    return settings.SESSION_IDLE_MINUTES * 60


def _expired(request: HttpRequest) -> str | None:
    """Why the signed-in session must end now, or None."""
    now = time.time()
    signed_in = request.session.get(SIGNED_IN_AT)
    if not isinstance(signed_in, (int, float)):
        # A session from before lifetimes were recorded: start counting from now.
        return "Please sign in again."
    if now - signed_in > settings.SESSION_MAX_HOURS * 3600:
        hours = settings.SESSION_MAX_HOURS
        return f"You were signed out: a session lasts at most {hours:g} hours."
    try:
        # Any cookie younger than the idle timeout is proof of recent activity.
        request.get_signed_cookie(SEEN_COOKIE, salt=SEEN_COOKIE, max_age=int(_idle_seconds()))
        return None
    except (KeyError, signing.BadSignature):
        if now - signed_in <= _idle_seconds():
            return None  # just signed in: the first page sets the cookie
    minutes = settings.SESSION_IDLE_MINUTES
    return f"You were signed out after {minutes:g} minutes without activity."


class SessionLimitsMiddleware:
    """After authentication: ends idle or too old sessions, refreshes the activity cookie and
    marks every signed-in response ``Cache-Control: no-store``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return self.get_response(request)
        reason = _expired(request)
        if reason is not None:
            logout(request)
            messages.info(request, reason)
            response: HttpResponse = redirect_to_login(request.get_full_path())
            if request.headers.get("HX-Request") == "true":
                # htmx would follow a redirect inside the fragment: move the whole page.
                response = HttpResponse(status=204)
                response["HX-Redirect"] = resolve_url(settings.LOGIN_URL)
            response.delete_cookie(SEEN_COOKIE)
            patch_cache_control(response, no_store=True)
            return response
        response = self.get_response(request)
        response.set_signed_cookie(
            SEEN_COOKIE,
            "1",
            salt=SEEN_COOKIE,
            max_age=int(_idle_seconds()),
            httponly=True,
            secure=settings.SESSION_COOKIE_SECURE,
            samesite="Lax",
        )
        patch_cache_control(response, no_store=True, private=True)
        return response
