"""Webhook deliveries to real receivers on 127.0.0.1, each its own process: signed and
verified by the receiver, retried with the same delivery id, and failed once the receiver
stays down."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone

from releases.background import outbox
from releases.events import secrets, services, webhooks
from releases.models import ReleaseRequest, WebhookDelivery
from tests.conftest import READY_ROLES
from tests.support import factories, processes, workflow

pytestmark = [pytest.mark.process, pytest.mark.django_db]

RECEIVER = Path(__file__).parent / "support" / "webhook_receiver.py"
State = ReleaseRequest.State
Status = WebhookDelivery.Status


@contextlib.contextmanager
def receiver(secret: str, record: Path, failures: int = 0) -> Iterator[str]:
    """A receiver process checking signatures with ``secret``; its URL."""
    port = processes.free_port()
    process = subprocess.Popen(
        [sys.executable, str(RECEIVER), str(port), secret, str(record), str(failures)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield f"http://127.0.0.1:{port}/hooks/anonymizer"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _records(record: Path) -> list[dict]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


def _endpoint_for(steward, url: str):
    """An endpoint at ``url`` and its secret (the placeholder URL is replaced afterwards)."""
    made = services.create_endpoint(steward, url)
    return made.endpoint, made.secret


def _retry_now(delivery: WebhookDelivery) -> None:
    """Let the backoff pass, and have the sweeper's step enqueue the retry."""
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    assert webhooks.retry_due() == 1
    assert outbox.latest(webhooks.WEBHOOK_TASK, delivery.pk) is not None


def test_every_state_change_reaches_the_receiver_signed(steward, officer, tmp_path):
    endpoint, secret = _endpoint_for(steward, "http://127.0.0.1:1/")
    record = tmp_path / "deliveries.jsonl"
    with receiver(secret, record) as url:
        endpoint.url = url
        endpoint.save()
        release_request = workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
        workflow.approve(officer, release_request)
        deliveries = list(WebhookDelivery.objects.order_by("id"))
        for delivery in deliveries:
            assert webhooks.deliver(delivery.pk) == Status.DELIVERED
            assert webhooks.deliver(delivery.pk) == ""  # delivered: never posted twice
    got = _records(record)
    assert [r["event"] for r in got] == [
        "request.queued",
        "request.running",
        "request.ready",
        "request.approved",
    ]
    assert all(r["valid"] and r["status"] == 200 for r in got)
    last = got[-1]["body"]
    assert last["request"] == release_request.pk
    assert last["dataset"] == release_request.dataset_id
    assert (last["previous_state"], last["state"]) == (State.READY, State.APPROVED)
    assert last["delivery"] == got[-1]["delivery"] == str(deliveries[-1].delivery_id)
    assert got[0]["body"]["previous_state"] is None
    assert len({r["delivery"] for r in got}) == 4


def test_a_wrong_secret_fails_the_receivers_check(steward, tmp_path):
    endpoint, _ = _endpoint_for(steward, "http://127.0.0.1:1/")
    record = tmp_path / "deliveries.jsonl"
    with receiver("not-the-secret", record) as url:
        endpoint.url = url
        endpoint.save()
        dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
        workflow.tag(steward, dataset, READY_ROLES)
        workflow.request_release(steward, dataset)
        delivery = WebhookDelivery.objects.get()
        assert webhooks.deliver(delivery.pk) == Status.PENDING  # 401: tried again later
    assert [r["valid"] for r in _records(record)] == [False]


def test_a_failing_receiver_gets_the_same_delivery_again(steward, tmp_path, settings):
    settings.WEBHOOK_RETRY_SECONDS = 60
    endpoint, secret = _endpoint_for(steward, "http://127.0.0.1:1/")
    record = tmp_path / "deliveries.jsonl"
    with receiver(secret, record, failures=1) as url:
        endpoint.url = url
        endpoint.save()
        dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
        workflow.tag(steward, dataset, READY_ROLES)
        workflow.request_release(steward, dataset)
        delivery = WebhookDelivery.objects.get()
        assert webhooks.deliver(delivery.pk) == Status.PENDING
        delivery.refresh_from_db()
        assert delivery.response_status == 500 and delivery.attempts == 1
        # The backoff holds it back until its time.
        assert delivery.next_attempt_at > timezone.now()
        assert webhooks.deliver(delivery.pk) == ""
        assert webhooks.retry_due() == 0
        _retry_now(delivery)
        assert webhooks.deliver(delivery.pk) == Status.DELIVERED
    got = _records(record)
    assert [r["status"] for r in got] == [500, 200]
    assert got[0]["delivery"] == got[1]["delivery"] == str(delivery.delivery_id)
    assert got[0]["body"] == got[1]["body"]
    assert all(r["valid"] for r in got)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == (
        Status.DELIVERED,
        2,
        200,
    )


def test_a_receiver_that_stays_down_ends_failed(steward, tmp_path, settings, client):
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    endpoint, secret = _endpoint_for(steward, "http://127.0.0.1:1/")
    record = tmp_path / "deliveries.jsonl"
    # A receiver stopped for real: its port is free and refuses connections.
    with receiver(secret, record) as url:
        pass
    endpoint.url = url
    endpoint.save()
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    workflow.tag(steward, dataset, READY_ROLES)
    release_request = workflow.request_release(steward, dataset)
    delivery = WebhookDelivery.objects.get()
    assert webhooks.deliver(delivery.pk) == Status.PENDING
    _retry_now(delivery)
    assert webhooks.deliver(delivery.pk) == Status.PENDING
    _retry_now(delivery)
    assert webhooks.deliver(delivery.pk) == Status.FAILED
    delivery.refresh_from_db()
    assert delivery.attempts == 3 and delivery.response_status is None
    assert "refused" in delivery.last_error.lower()
    assert webhooks.retry_due() == 0  # failed: never tried again
    assert _records(record) == []
    client.force_login(steward)
    page = client.get("/account/webhooks/").content.decode()
    assert "failed" in page and f"#{release_request.pk}" in page
    assert secrets.decrypt(endpoint.secret_encrypted) == secret
