"""Writes of webhooks and notifications: each checks who acts, and audits webhook changes."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from releases.core import audit, roles
from releases.core.errors import InvalidInput
from releases.events import secrets
from releases.models import (
    AuditEvent,
    Dataset,
    Notification,
    NotificationPreference,
    WebhookEndpoint,
)


@dataclass(frozen=True)
class NewEndpoint:
    endpoint: WebhookEndpoint
    #: Shown once: only its encrypted form is stored.
    secret: str


def _check_steward(user) -> None:
    if not roles.is_steward(user):
        raise PermissionDenied("Only data stewards can register webhooks.")


def _clean_url(url: str) -> str:
    url = (url or "").strip()
    refusal = "A webhook URL starts with http:// or https:// and names a host."
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port
    except ValueError:  # an unclosed IPv6 bracket, a port out of range
        raise InvalidInput(refusal) from None
    if parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in url):
        raise InvalidInput(refusal)
    if len(url) > 500:
        raise InvalidInput("A webhook URL has at most 500 characters.")
    return url


def _own_dataset(user, dataset_id: int | None) -> Dataset | None:
    if dataset_id is None:
        return None
    dataset = Dataset.objects.filter(pk=dataset_id, owner=user).select_related("project").first()
    if dataset is None:
        raise InvalidInput("Choose one of your own datasets, or none for all of them.")
    if not dataset.project.webhooks_allowed:
        raise InvalidInput(
            f"The project {dataset.project.name} does not allow webhooks, so none can be "
            f"registered for {dataset.name}; ask a site administrator to allow them."
        )
    return dataset


def get_endpoint_for(user, endpoint_id: int) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id, owner=user).first()
    if endpoint is None:
        raise Http404("No such webhook.")
    return endpoint


def create_endpoint(
    user, url: str, dataset_id: int | None = None, active: bool = True
) -> NewEndpoint:
    _check_steward(user)
    url = _clean_url(url)
    secret = secrets.new_secret()
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            owner=user,
            url=url,
            dataset=_own_dataset(user, dataset_id),
            active=active,
            secret_encrypted=secrets.encrypt(secret),
        )
        audit.record(
            AuditEvent.Action.WEBHOOK_CREATED,
            user,
            dataset=endpoint.dataset,
            webhook=endpoint.pk,
            url=url,
            active=active,
        )
    return NewEndpoint(endpoint, secret)


def set_active(user, endpoint_id: int, active: bool) -> WebhookEndpoint:
    _check_steward(user)
    with transaction.atomic():
        endpoint = get_endpoint_for(user, endpoint_id)
        endpoint.active = active
        endpoint.save(update_fields=["active"])
        audit.record(
            AuditEvent.Action.WEBHOOK_CHANGED,
            user,
            dataset=endpoint.dataset,
            webhook=endpoint.pk,
            active=active,
        )
    return endpoint


def delete_endpoint(user, endpoint_id: int) -> None:
    _check_steward(user)
    with transaction.atomic():
        endpoint = get_endpoint_for(user, endpoint_id)
        audit.record(
            AuditEvent.Action.WEBHOOK_DELETED,
            user,
            dataset=endpoint.dataset,
            webhook=endpoint.pk,
            url=endpoint.url,
        )
        endpoint.delete()


def mark_read(user, notification_id: int) -> None:
    """Mark one of ``user``'s notifications read (404 for anyone else's)."""
    updated = Notification.objects.filter(pk=notification_id, user=user).update(
        read_at=timezone.now()
    )
    if not updated:
        raise Http404("No such notification.")


def mark_all_read(user) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).update(
        read_at=timezone.now()
    )


def set_preferences(user, choices: dict[str, str]) -> None:
    """``choices``: kind -> off / immediately / digest."""
    kinds = set(Notification.Kind.values)
    deliveries = set(NotificationPreference.Delivery.values)
    for kind, delivery in choices.items():
        if kind not in kinds:
            raise InvalidInput(f"Unknown kind of notification {kind!r}.")
        if delivery not in deliveries:
            raise InvalidInput(f"Choose off, immediately or digest for {kind}.")
    with transaction.atomic():
        for kind, delivery in choices.items():
            NotificationPreference.objects.update_or_create(
                user=user, kind=kind, defaults={"delivery": delivery}
            )
