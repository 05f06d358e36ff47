"""Webhooks over the API: a steward's endpoints (the secret shown once, when made) and their
recent deliveries, through the same services as the webhooks page."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from releases.api.common import ERRORS, page, user_of
from releases.api.problems import Problem
from releases.api.schemas import PageOut, PageParams
from releases.events import selectors, services
from releases.models import WebhookDelivery, WebhookEndpoint

router = Router(tags=["webhooks"])


class WebhookIn(Schema):
    url: str = Field(..., max_length=500)
    dataset_id: int | None = Field(None, ge=1, le=2**31 - 1)
    active: bool = True


class WebhookPatch(Schema):
    active: bool


class WebhookOut(Schema):
    id: int
    url: str
    dataset_id: int | None
    active: bool
    created_at: datetime


class NewWebhookOut(WebhookOut):
    #: Shown in this answer only; the app stores it encrypted.
    secret: str


class WebhookPage(PageOut):
    items: list[WebhookOut]


class DeliveryOut(Schema):
    delivery: UUID
    event: str
    request_id: int
    status: str
    attempts: int
    response_status: int | None
    last_error: str
    created_at: datetime
    finished_at: datetime | None


class DeliveryPage(PageOut):
    items: list[DeliveryOut]


def endpoint_out(endpoint: WebhookEndpoint) -> dict:
    return {
        "id": endpoint.pk,
        "url": endpoint.url,
        "dataset_id": endpoint.dataset_id,
        "active": endpoint.active,
        "created_at": endpoint.created_at,
    }


def delivery_out(delivery: WebhookDelivery) -> dict:
    return {
        "delivery": delivery.delivery_id,
        "event": delivery.event.name,
        "request_id": delivery.event.request_id,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "response_status": delivery.response_status,
        "last_error": delivery.last_error,
        "created_at": delivery.created_at,
        "finished_at": delivery.finished_at,
    }


@router.get("/webhooks", response={200: WebhookPage, ERRORS: Problem})
def list_webhooks(request: HttpRequest, params: Query[PageParams]):
    """The caller's webhooks."""
    return page(selectors.endpoints_of(user_of(request)), params, endpoint_out)


@router.post("/webhooks", response={201: NewWebhookOut, ERRORS: Problem})
def create_webhook(request: HttpRequest, body: WebhookIn):
    """Register a webhook (stewards); its signing secret is in this answer only."""
    made = services.create_endpoint(user_of(request), body.url, body.dataset_id, body.active)
    return Status(201, {**endpoint_out(made.endpoint), "secret": made.secret})


@router.patch("/webhooks/{webhook_id}", response={200: WebhookOut, ERRORS: Problem})
def update_webhook(request: HttpRequest, webhook_id: int, body: WebhookPatch):
    """Pause or activate a webhook."""
    return endpoint_out(services.set_active(user_of(request), webhook_id, body.active))


@router.delete("/webhooks/{webhook_id}", response={204: None, ERRORS: Problem})
def delete_webhook(request: HttpRequest, webhook_id: int):
    """Remove a webhook and its deliveries."""
    services.delete_endpoint(user_of(request), webhook_id)
    return Status(204, None)


@router.get("/webhooks/{webhook_id}/deliveries", response={200: DeliveryPage, ERRORS: Problem})
def webhook_deliveries(request: HttpRequest, webhook_id: int, params: Query[PageParams]):
    """A webhook's deliveries, newest first."""
    endpoint = services.get_endpoint_for(user_of(request), webhook_id)
    deliveries = endpoint.deliveries.select_related("event").order_by("-id")
    return page(deliveries, params, delivery_out)
