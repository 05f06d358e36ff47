"""Records kept for a while and then deleted on a schedule (Celery beat), so that no table
grows with every sign-in forever. The audit log is never purged."""

from __future__ import annotations

from datetime import timedelta

from axes.models import AccessFailureLog, AccessLog
from django.utils import timezone


def purge_login_records(older_than: timedelta) -> int:
    """Delete the sign-in log (every sign-in and sign-out) and the log of failed sign-ins older
    than ``older_than``; returns how many rows went. The counters that decide lockouts
    (``AccessAttempt``) are not touched: they lapse with the cool-off, or an administrator
    lifts them."""
    cutoff = timezone.now() - older_than
    deleted = 0
    for model in (AccessLog, AccessFailureLog):
        count, _ = model.objects.filter(attempt_time__lt=cutoff).delete()
        deleted += count
    return deleted
