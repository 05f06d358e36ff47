"""The transactional outbox: a broker outage never fails a request, and loses nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from releases.background import outbox as dispatch
from releases.background import recovery
from releases.models import Dataset, OutboxMessage, ReleaseRequest, Role
from tests.support import processes
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import tag

pytestmark = pytest.mark.django_db(transaction=True)


def unreachable_broker() -> str:
    return f"redis://127.0.0.1:{processes.free_port()}/0"  # nothing listens there


def test_a_request_made_while_the_broker_is_down_succeeds_and_waits_in_the_outbox(client, steward):
    dataset = make_dataset(steward, synthetic_csv(), "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "name": Role.IDENTIFIER})
    client.force_login(steward)
    with processes.producer_for(unreachable_broker()):
        response = client.post(
            reverse("releases:request_create", args=[dataset.pk]),
            {
                "use__k-anonymity": "on",
                "k-anonymity__k": 5,
                "suppression_percent": 5,
                "algorithm": "optimal",
            },
        )
    assert response.status_code == 302  # never a 500
    release_request = ReleaseRequest.objects.get()
    assert release_request.state == ReleaseRequest.State.QUEUED
    message = OutboxMessage.objects.get(task_name="releases.run_release")
    assert message.args == [release_request.pk]
    assert message.sent_at is None and message.attempts == 1
    assert "connect" in message.last_error.lower()
    # The page says why nothing moves, and that nothing needs doing.
    for name in ("request_detail", "request_status"):
        page = client.get(reverse(f"releases:{name}", args=[release_request.pk])).content.decode()
        assert 'id="queue-waiting"' in page and "starts by itself" in page
    OutboxMessage.objects.filter(pk=message.pk).update(sent_at=timezone.now())
    page = client.get(reverse("releases:request_status", args=[release_request.pk]))
    assert 'id="queue-waiting"' not in page.content.decode()


@pytest.mark.integration
def test_an_upload_made_while_the_broker_is_down_is_profiled_once_the_broker_is_back(
    client, steward, redis_url, start_worker
):
    client.force_login(steward)
    with processes.producer_for(unreachable_broker()):
        response = client.post(
            reverse("releases:dataset_list"),
            {"file": processes_upload(synthetic_csv(40)), "name": "people"},
        )
    assert response.status_code == 302
    dataset = Dataset.objects.get()
    assert dataset.status == Dataset.Status.PENDING
    assert dispatch.waiting_count() == 1
    page = client.get(reverse("releases:dataset_detail", args=[dataset.pk])).content.decode()
    assert 'id="queue-waiting"' in page and "read by itself" in page

    with processes.producer_for(redis_url), start_worker():
        # The sweeper sends what waited (a starting worker sweeps, then beat does, and so
        # may this process): sent once, the worker profiles it.
        recovery.sweep()

        def profiled():
            dataset.refresh_from_db()
            return dataset.is_final

        processes.wait_until(profiled, 60, "the worker to profile the dataset")
    assert dataset.status == Dataset.Status.READY, dataset.error
    assert dispatch.waiting_count() == 0
    assert OutboxMessage.objects.get().sent_at is not None


@pytest.mark.integration
def test_a_message_is_sent_once_even_when_two_senders_try(steward, redis_url):
    dataset = make_dataset(steward, synthetic_csv(20), "people.csv")
    message = OutboxMessage.objects.create(task_name="releases.profile_dataset", args=[dataset.pk])
    with processes.producer_for(redis_url):
        assert dispatch.deliver(message.pk) is True
        assert dispatch.deliver(message.pk) is False  # already sent
    message.refresh_from_db()
    assert message.sent_at is not None and message.attempts == 1


def processes_upload(text: str):
    from tests.conftest import csv_upload

    return csv_upload(text, "people.csv")


@pytest.mark.django_db
def test_sent_messages_are_purged_after_the_retention_and_beat_does_it_daily(settings):
    from datetime import timedelta

    settings.OUTBOX_RETENTION_DAYS = 3
    now = timezone.now()

    def message(pk: int, sent_days_ago: float | None) -> OutboxMessage:
        sent = None if sent_days_ago is None else now - timedelta(days=sent_days_ago)
        return OutboxMessage.objects.create(
            task_name="releases.profile_dataset", args=[pk], sent_at=sent
        )

    old, recent, unsent = message(1, 4), message(2, 2), message(3, None)
    beat = settings.CELERY_BEAT_SCHEDULE["purge-outbox"]
    assert beat["schedule"] == 24 * 3600
    dispatch.registered()[beat["task"]]()  # what beat runs, here
    assert set(OutboxMessage.objects.values_list("pk", flat=True)) == {recent.pk, unsent.pk}
    assert old.pk not in OutboxMessage.objects.values_list("pk", flat=True)


@pytest.mark.django_db
def test_old_sign_in_records_are_purged_daily_and_lockout_counters_are_kept(settings):
    from datetime import timedelta

    from axes.models import AccessAttempt, AccessFailureLog, AccessLog

    settings.LOGIN_RECORD_RETENTION_DAYS = 30
    now = timezone.now()
    kept, purged = [], []
    for model in (AccessLog, AccessFailureLog, AccessAttempt):
        extra = {"failures_since_start": 5} if model is AccessAttempt else {}
        for days in (40, 10):
            row = model.objects.create(username="ann", ip_address=f"10.0.0.{days}", **extra)
            # attempt_time is set on creation (auto_now_add): backdate it.
            model.objects.filter(pk=row.pk).update(attempt_time=now - timedelta(days=days))
            old = days > 30 and model is not AccessAttempt
            (purged if old else kept).append((model, row.pk))
    beat = settings.CELERY_BEAT_SCHEDULE["purge-login-records"]
    assert beat["schedule"] == 24 * 3600
    dispatch.registered()[beat["task"]]()  # what beat runs, here
    for model, pk in kept:
        assert model.objects.filter(pk=pk).exists(), model
    for model, pk in purged:
        assert not model.objects.filter(pk=pk).exists(), model
