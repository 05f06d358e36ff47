"""What happened to release requests, and who is told: webhooks and notifications.

A :class:`RequestEvent` is written in the transaction of each state change; in the same
transaction it is fanned out into one :class:`WebhookDelivery` per endpoint that fires and one
:class:`Notification` per person told, whose sending goes through the outbox.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class RequestEvent(models.Model):
    """One transition of a release request (``previous_state`` empty when it was asked)."""

    request = models.ForeignKey(
        "releases.ReleaseRequest", on_delete=models.CASCADE, related_name="state_events"
    )
    previous_state = models.CharField(max_length=20, blank=True)
    state = models.CharField(max_length=20)
    round = models.PositiveIntegerField(default=1)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"request {self.request_id}: {self.previous_state or '-'} -> {self.state}"

    @property
    def name(self) -> str:
        """The event's name in a webhook: ``request.<state>``."""
        return f"request.{self.state}"


class WebhookEndpoint(models.Model):
    """A URL told of its owner's requests' state changes (one dataset's, when set)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    url = models.URLField(max_length=500)
    dataset = models.ForeignKey(
        "releases.Dataset",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="webhook_endpoints",
    )
    active = models.BooleanField(default=True)
    #: The signing secret, encrypted with a key derived from SECRET_KEY (events.secrets).
    secret_encrypted = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.url


class WebhookDelivery(models.Model):
    """One event sent to one endpoint: retried with backoff, then delivered or failed."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.ForeignKey(RequestEvent, on_delete=models.CASCADE, related_name="deliveries")
    #: The ``X-Anonymizer-Delivery`` header: the same on every attempt.
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    #: A pending delivery is not tried again before then (the backoff).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    #: A sender holds the delivery until then, so two senders do not both post it.
    claimed_until = models.DateTimeField(null=True, blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event"], name="one_delivery_per_event")
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]

    def __str__(self) -> str:
        return f"{self.delivery_id} ({self.status})"


class Notification(models.Model):
    """Something a person is told, kept in their in-app list; e-mailed as they chose."""

    class Kind(models.TextChoices):
        REVIEW_READY = "review_ready", "A request is ready for review"
        REQUEST_DECIDED = "request_decided", "Your request was decided"
        REQUEST_FAILED = "request_failed", "Your request failed"
        RELEASE_NAMED = "release_named", "A release names you"
        RELEASE_EXPIRING = "release_expiring", "A release you receive expires soon"

    class Mail(models.TextChoices):
        NONE = "none", "Not e-mailed"
        NOW = "now", "E-mailed at once"
        DIGEST = "digest", "In the daily digest"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    text = models.CharField(max_length=500)
    link = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    request = models.ForeignKey(
        "releases.ReleaseRequest",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="notifications",
    )
    event = models.ForeignKey(
        RequestEvent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="notifications",
    )
    mail = models.CharField(max_length=10, choices=Mail.choices, default=Mail.NONE)
    #: Set when the e-mail (alone or in a digest) was handed to the mail server; the claim.
    mailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["user", "read_at"], name="notification_unread"),
            models.Index(fields=["mail", "mailed_at"], name="notification_mail"),
        ]
        constraints = [
            # The expiry reminder goes out once per release and person, whatever sweeps run.
            models.UniqueConstraint(
                fields=["user", "request"],
                condition=models.Q(kind="release_expiring"),
                name="one_expiry_reminder",
            ),
            models.UniqueConstraint(
                fields=["user", "event", "kind"], name="one_notification_per_event"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.kind}"


class NotificationPreference(models.Model):
    """How a person wants one kind of notification e-mailed (none stored: at once)."""

    class Delivery(models.TextChoices):
        OFF = "off", "Off"
        IMMEDIATELY = "immediately", "Immediately"
        DIGEST = "digest", "Daily digest"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preferences"
    )
    kind = models.CharField(max_length=20, choices=Notification.Kind.choices)
    delivery = models.CharField(
        max_length=12, choices=Delivery.choices, default=Delivery.IMMEDIATELY
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "kind"], name="one_preference_per_kind")
        ]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.kind} {self.delivery}"
