"""Posting webhook deliveries: signed, with a short timeout, retried with backoff.

A delivery is claimed (a conditional update) before it is posted, so two senders never post
it at once; a network error or a non-2xx answer schedules another attempt after
``WEBHOOK_RETRY_SECONDS * 2**(attempts-1)``, which the sweeper sends, until
``WEBHOOK_MAX_ATTEMPTS``, when the delivery is marked failed. Every attempt carries the same
``X-Anonymizer-Delivery`` id, so a receiver can drop a repeat.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from releases.background import outbox
from releases.events import secrets
from releases.models import WebhookDelivery

logger = logging.getLogger(__name__)

Status = WebhookDelivery.Status

#: The task that posts one delivery (events.emit enqueues it too).
WEBHOOK_TASK = "releases.deliver_webhook"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer other than 2xx: the delivery is not followed elsewhere."""

    def redirect_request(self, *args, **kwargs):
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def payload(delivery: WebhookDelivery) -> bytes:
    event = delivery.event
    body = {
        "event": event.name,
        "request": event.request_id,
        "dataset": event.request.dataset_id,
        "state": event.state,
        "previous_state": event.previous_state or None,
        "at": event.at.isoformat(),
        "delivery": str(delivery.delivery_id),
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def _claim(delivery_id: int) -> bool:
    now = timezone.now()
    return bool(
        WebhookDelivery.objects.filter(
            Q(claimed_until__isnull=True) | Q(claimed_until__lt=now),
            Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now),
            pk=delivery_id,
            status=Status.PENDING,
        ).update(claimed_until=now + timedelta(seconds=settings.WEBHOOK_TIMEOUT_SECONDS + 30))
    )


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """(HTTP status or None, error): one attempt."""
    body = payload(delivery)
    timestamp = str(int(time.time()))
    try:
        secret = secrets.decrypt(delivery.endpoint.secret_encrypted)
    except ValueError as exc:
        return None, str(exc)
    request = urllib.request.Request(
        delivery.endpoint.url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "Anonymizer-Webhooks/1",
            "X-Anonymizer-Event": delivery.event.name,
            "X-Anonymizer-Delivery": str(delivery.delivery_id),
            "X-Anonymizer-Timestamp": timestamp,
            "X-Anonymizer-Signature": secrets.signature(secret, timestamp, body),
        },
    )
    try:
        with _opener.open(request, timeout=settings.WEBHOOK_TIMEOUT_SECONDS) as response:
            return response.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:  # refused, timed out, DNS, bad URL
        return None, str(getattr(exc, "reason", exc))[:300]


def deliver(delivery_id: int) -> str:
    """Post one pending, due delivery; its status after the attempt ("" when not ours)."""
    if not _claim(delivery_id):
        return ""
    delivery = WebhookDelivery.objects.select_related("endpoint", "event__request").get(
        pk=delivery_id
    )
    code, error = _post(delivery)
    attempts = delivery.attempts + 1
    now = timezone.now()
    fields: dict = {"attempts": attempts, "response_status": code, "claimed_until": None}
    if code is not None and 200 <= code < 300:
        fields.update(status=Status.DELIVERED, finished_at=now, last_error="")
    elif attempts >= settings.WEBHOOK_MAX_ATTEMPTS or not delivery.endpoint.active:
        fields.update(status=Status.FAILED, finished_at=now, last_error=error or f"HTTP {code}")
    else:
        backoff = settings.WEBHOOK_RETRY_SECONDS * 2 ** (attempts - 1)
        fields.update(next_attempt_at=now + timedelta(seconds=backoff), last_error=error)
    WebhookDelivery.objects.filter(pk=delivery_id).update(**fields)
    if fields.get("status") != Status.DELIVERED:
        logger.info("Webhook delivery %s: %s", delivery.delivery_id, error or code)
    return fields.get("status", Status.PENDING)


def retry_due() -> int:
    """Send the pending deliveries whose backoff has passed (the sweeper's periodic step)."""
    now = timezone.now()
    # A retry whose backoff passed; or a first attempt still pending long after the outbox
    # sent it (a broker that lost the message, a worker that stopped while posting).
    lost_before = now - timedelta(seconds=settings.REDELIVER_SECONDS)
    due = (
        WebhookDelivery.objects.filter(status=Status.PENDING)
        .filter(
            Q(next_attempt_at__lte=now)
            | Q(next_attempt_at__isnull=True, created_at__lt=lost_before)
        )
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
    )
    sent = 0
    for pk in due.values_list("pk", flat=True)[:200]:
        outbox.enqueue(WEBHOOK_TASK, pk)
        sent += 1
    return sent
