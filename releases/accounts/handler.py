"""The django-axes handler (``AXES_HANDLER``): axes records each failure in its database as
usual; this decides who waits (``throttle``) and locks a user name (``services``)."""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.utils import timezone

from releases.accounts import services, throttle


class ThrottleHandler(AxesDatabaseHandler):
    """Throttle addresses with growing delays; lock a user name failed from many addresses."""

    def get_failures(self, request, credentials: dict | None = None) -> int:
        """The failures remembered from the request's address (axes locks the request once they
        reach ``AXES_FAILURE_LIMIT``: right after such a failure, the address waits)."""
        failures, _ = throttle.address_failures(request.axes_ip_address)
        return failures

    def is_locked(self, request, credentials: dict | None = None) -> bool:
        username = get_client_username(request, credentials)
        if throttle.username_locked(username):
            return True
        return bool(get_cool_off(request)) and (
            throttle.address_waits_until(request.axes_ip_address) is not None
        )

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs: Any) -> None:
        already_locked = request is not None and request.axes_locked_out
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is None or already_locked:
            return  # refused while waiting or locked: not one more failure
        username = get_client_username(request, credentials)
        if not username:
            return
        addresses = throttle.failing_addresses(username)
        if addresses >= throttle.lock_addresses() and not throttle.username_locked(username):
            services.lock_username(username, addresses)
        if throttle.username_locked(username):
            request.axes_locked_out = True
            request.axes_credentials = credentials

    def reset_user_attempts(self, request, credentials: dict | None = None) -> int:
        """A successful sign-in forgets that person's own failures from that address, never
        another address's nor other names' (an account someone holds must not clear the
        address's failures for other names)."""
        username = get_client_username(request, credentials)
        count, _ = AccessAttempt.objects.filter(
            username=username, ip_address=request.axes_ip_address
        ).delete()
        return count

    def clean_expired_user_attempts(self, request=None, credentials: dict | None = None) -> int:
        """Forget failures older than ``LOGIN_FAILURE_MEMORY_HOURS`` (axes would use the
        request's own cool-off here, which differs from address to address)."""
        count, _ = AccessAttempt.objects.filter(
            attempt_time__lte=timezone.now() - throttle.memory()
        ).delete()
        return count
