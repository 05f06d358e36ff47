"""Webhooks over the HTTP API: the same services as the page, the secret shown once, a
steward's own endpoints only, and the read-only scope refused."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from releases.events import secrets
from releases.models import ApiToken, AuditEvent, WebhookEndpoint
from tests.support import factories
from tests.support.api import client_for, token_for

pytestmark = pytest.mark.django_db

HOOKS = "/api/v1/webhooks"


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()


def _post(client, body: dict):
    return client.post(HOOKS, body, content_type="application/json")


def test_a_steward_registers_lists_pauses_and_removes_a_webhook(steward):
    client = client_for(token_for(steward))
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    made = _post(client, {"url": "https://ci.example.org/hook", "dataset_id": dataset.pk})
    assert made.status_code == 201, made.content
    body = made.json()
    endpoint = WebhookEndpoint.objects.get(pk=body["id"])
    assert body["secret"] == secrets.decrypt(endpoint.secret_encrypted)
    assert endpoint.dataset == dataset and endpoint.active
    listed = client.get(HOOKS).json()
    assert listed["count"] == 1 and "secret" not in listed["items"][0]
    paused = client.patch(
        f"{HOOKS}/{endpoint.pk}", {"active": False}, content_type="application/json"
    )
    assert paused.status_code == 200 and paused.json()["active"] is False
    assert client.get(f"{HOOKS}/{endpoint.pk}/deliveries").json()["count"] == 0
    assert client.delete(f"{HOOKS}/{endpoint.pk}").status_code == 204
    assert not WebhookEndpoint.objects.exists()
    assert list(
        AuditEvent.objects.filter(action__startswith="webhook").values_list("action", flat=True)
    ) == ["webhook_created", "webhook_changed", "webhook_deleted"]


def test_bad_urls_and_other_roles_are_refused_as_problems(steward, recipient):
    client = client_for(token_for(steward))
    bad = _post(client, {"url": "ftp://example.org/x"})
    assert bad.status_code == 400
    assert bad["Content-Type"].startswith("application/problem+json")
    assert "http:// or https://" in bad.json()["detail"]
    refused = _post(client_for(token_for(recipient)), {"url": "https://ci.example.org/hook"})
    assert refused.status_code == 403
    read_only = _post(
        client_for(token_for(steward, ApiToken.Scope.READ)), {"url": "https://ci.example.org/x"}
    )
    assert read_only.status_code == 403
    assert not WebhookEndpoint.objects.exists()


def test_another_stewards_webhooks_are_out_of_reach(steward, other_steward):
    made = _post(client_for(token_for(steward)), {"url": "https://ci.example.org/hook"}).json()
    other = client_for(token_for(other_steward))
    assert other.get(HOOKS).json()["count"] == 0
    assert other.get(f"{HOOKS}/{made['id']}/deliveries").status_code == 404
    assert (
        other.patch(
            f"{HOOKS}/{made['id']}", {"active": False}, content_type="application/json"
        ).status_code
        == 404
    )
    assert other.delete(f"{HOOKS}/{made['id']}").status_code == 404
    assert WebhookEndpoint.objects.get().active
    assert client_for("anon_nope").get(HOOKS).status_code == 401
