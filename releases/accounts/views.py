"""The page a refused sign-in gets (``AXES_LOCKOUT_CALLABLE``), and the password reset by e-mail,
which also releases a locked user name."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from axes.helpers import get_client_username
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from releases.accounts import services, throttle


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials=None
) -> HttpResponse:
    """Why this sign-in was refused and when to try again (429)."""
    username = get_client_username(request, credentials) or ""
    context: dict[str, Any] = {"username": username}
    if throttle.username_locked(username):
        context["username_locked"] = True
    else:
        ip_address = getattr(request, "axes_ip_address", None)
        until = throttle.address_waits_until(ip_address)
        if until is not None:
            # Shown to the minute, rounded up: never a time at which it is still refused.
            shown = until.replace(second=0, microsecond=0)
            if shown < until:
                shown += timedelta(minutes=1)
            context["until"] = shown
            context["wait"] = throttle.wait_after(throttle.address_failures(ip_address)[0])
    context["failure_limit"] = settings.AXES_FAILURE_LIMIT
    return render(request, "registration/locked_out.html", context, status=429)


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's reset from the e-mailed link; the new password also releases the user name if
    it was locked after failed sign-ins from many addresses."""

    def form_valid(self, form):
        response = super().form_valid(form)
        services.release_by_password_reset(form.user)
        return response
