"""What the sweeper does for the review (registered from ``ReleasesConfig.ready``): a decision
e-mail not yet sent goes out again, for a day (a mail server down for a day is an outage the
administrators know of; the decision itself is on the page)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from releases.background import recovery
from releases.models import Review
from releases.review.services import NOTIFY_TASK

NOTIFY_RETRY_FOR = timedelta(days=1)


def waiting_notifications() -> list[tuple[str, int]]:
    return [
        (NOTIFY_TASK, pk)
        for pk in recovery.pks(
            Review.objects.filter(
                notified_at__isnull=True, created_at__gte=timezone.now() - NOTIFY_RETRY_FOR
            )
        )
    ]


recovery.register_waiting(waiting_notifications)
