"""What failed sign-ins decide, read from django-axes' records (one ``AccessAttempt`` row per
user name, address and browser, with its failures and the time of the last one).

* An **address** that failed ``LOGIN_FAILURE_LIMIT`` times within ``LOGIN_FAILURE_MEMORY_HOURS``
  waits :func:`wait_after` after its last failure: ``LOGIN_DELAY_MINUTES``, doubled for each further
  failure, at most ``LOGIN_MAX_DELAY_MINUTES``. Only that address waits: the right password
  from another one is unaffected.
* A **user name** whose failures came from ``LOGIN_USERNAME_LOCK_IPS`` distinct addresses
  within the same memory is locked (a ``UsernameLock``) until it is released.

Reads only; the lock is written by ``services``.
"""

from __future__ import annotations

import ipaddress
from datetime import datetime, timedelta

from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Max, Sum
from django.http import HttpRequest
from django.utils import timezone

from releases.models import UsernameLock


def client_address(request: HttpRequest) -> str | None:
    """``AXES_CLIENT_IP_CALLABLE``: the address failures are counted against.

    The socket's address, unless ``BEHIND_TLS_PROXY``: then the last entry of
    X-Forwarded-For, the one the proxy appended (the address it saw). Entries before it are
    whatever the client sent, and are ignored."""
    remote = request.META.get("REMOTE_ADDR") or None
    if not settings.BEHIND_TLS_PROXY:
        return remote
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[-1].strip()
    try:
        return str(ipaddress.ip_address(forwarded))
    except ValueError:
        return remote


def memory() -> timedelta:
    """How long a failure counts."""
    return timedelta(hours=settings.LOGIN_FAILURE_MEMORY_HOURS)


def remembered(now: datetime | None = None):
    """The failure records still counted."""
    return AccessAttempt.objects.filter(attempt_time__gt=(now or timezone.now()) - memory())


def wait_after(failures: int) -> timedelta:
    """How long an address waits after its last failure, having failed ``failures`` times."""
    limit = settings.AXES_FAILURE_LIMIT
    if failures < limit:
        return timedelta(0)
    minutes = min(
        settings.LOGIN_DELAY_MINUTES * 2 ** min(failures - limit, 30),
        settings.LOGIN_MAX_DELAY_MINUTES,
    )
    return timedelta(minutes=minutes)


def address_failures(ip_address: str | None) -> tuple[int, datetime | None]:
    """The failures remembered from ``ip_address`` (whatever the user name) and the last one's
    time."""
    if not ip_address:
        return 0, None
    found = (
        remembered()
        .filter(ip_address=ip_address)
        .aggregate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
    )
    return found["failures"] or 0, found["last"]


def address_waits_until(ip_address: str | None) -> datetime | None:
    """When ``ip_address`` may try again, while it must wait; None when it need not."""
    failures, last = address_failures(ip_address)
    wait = wait_after(failures)
    if last is None or not wait:
        return None
    until = last + wait
    return until if until > timezone.now() else None


def cool_off(request: HttpRequest | None) -> timedelta:
    """``AXES_COOLOFF_TIME``: the delay the request's address has earned by its failures
    (zero while it has fewer than ``LOGIN_FAILURE_LIMIT``)."""
    failures, _ = address_failures(getattr(request, "axes_ip_address", None))
    return wait_after(failures)


def failing_addresses(username: str) -> int:
    """The distinct addresses failures for ``username`` came from, within the memory."""
    return remembered().filter(username=username).values("ip_address").distinct().count()


def username_locked(username: str | None) -> bool:
    return (
        bool(username)
        and UsernameLock.objects.filter(username=username, released_at__isnull=True).exists()
    )


def active_lock(username: str) -> UsernameLock | None:
    return UsernameLock.objects.filter(username=username, released_at__isnull=True).first()


def lock_addresses() -> int:
    """``LOGIN_USERNAME_LOCK_IPS``: how many distinct addresses failing lock a user name."""
    return max(2, int(settings.LOGIN_USERNAME_LOCK_IPS))
