"""Every piece of work reaches a final state by itself: leases, the sweeper, redelivery,
cancellation and deletion, in this process (tests/test_chaos.py does it to real workers)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.core.files.base import ContentFile
from django.urls import reverse
from django.utils import timezone

from releases.models import (
    AuditEvent,
    Dataset,
    DatasetColumn,
    OutboxMessage,
    ReleaseRequest,
    Role,
)
from releases.services import (
    column_store,
    datasets,
    dispatch,
    leases,
    profiling,
    recovery,
    release,
    storage,
)
from releases.services.release import ReleaseParameters
from tests.support import factories
from tests.support.factories import synthetic_csv
from tests.support.workflow import tag

State = ReleaseRequest.State
A = AuditEvent.Action
PARAMS = ReleaseParameters(k=5, suppression_limit=0.05)


def stored_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file())


def queued_request(steward) -> ReleaseRequest:
    dataset = factories.make_dataset(steward, synthetic_csv(), "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "zip": Role.QUASI_IDENTIFIER})
    with mock.patch.object(dispatch, "send"):
        return release.request_release(steward, dataset, PARAMS)


def lost_run(steward, attempts: int = 1, silent_for: timedelta = timedelta(minutes=5)):
    """A request a worker took and then died on: running, its lease long expired."""
    release_request = queued_request(steward)
    ReleaseRequest.objects.filter(pk=release_request.pk).update(
        state=State.RUNNING,
        attempts=attempts,
        worker="gone:4242",
        started_at=timezone.now() - silent_for,
        heartbeat_at=timezone.now() - silent_for,
        progress=0.5,
    )
    release_request.refresh_from_db()
    return release_request


def pending_dataset(steward, text: str | None = None) -> Dataset:
    with mock.patch.object(datasets, "enqueue_profiling"):
        return datasets.create_dataset(
            steward, factories.upload(text or synthetic_csv(), "people.csv")
        )


def lost_profiling(steward, attempts: int = 1) -> Dataset:
    dataset = pending_dataset(steward)
    Dataset.objects.filter(pk=dataset.pk).update(
        status=Dataset.Status.PROFILING,
        attempts=attempts,
        worker="gone:4242",
        heartbeat_at=timezone.now() - timedelta(minutes=5),
    )
    dataset.refresh_from_db()
    return dataset


def attempt_file(release_request: ReleaseRequest, attempt: int) -> str:
    """A file an attempt stored before its worker died (no row names it)."""
    folder = f"extracts/{release_request.pk}/r{release_request.round}a{attempt}"
    return storage.private_storage().save(f"{folder}/half.csv", ContentFile(b"a,b\n"))


# --- Lost workers -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_run_whose_worker_died_gets_another_attempt_and_then_finishes(steward, settings):
    settings.WORK_MAX_ATTEMPTS = 2
    lost = lost_run(steward, attempts=1)
    half = attempt_file(lost, 1)

    swept = recovery.sweep()

    assert swept["runs"] == {"retried": 1, "failed": 0}
    lost.refresh_from_db()
    assert (lost.state, lost.progress) == (State.QUEUED, 0.0)
    assert "attempt 2 of 2" in lost.stage
    assert not storage.exists(half)  # what the dead attempt wrote is gone
    retried = AuditEvent.objects.get(action=A.RUN_RETRIED, request=lost)
    assert retried.detail == {"round": 1, "attempt": 1, "worker": "gone:4242"}
    assert dispatch.latest("releases.run_release", lost.pk).sent_at is None  # sent on commit
    # The retry runs like any queued request and is recorded as the second attempt.
    release.run_release(lost.pk)
    lost.refresh_from_db()
    assert (lost.state, lost.attempts) == (State.READY, 2)
    assert lost.worker == leases.worker_id()


@pytest.mark.django_db
def test_a_run_lost_on_its_last_attempt_fails_with_a_reason_and_can_be_resubmitted(
    steward, settings
):
    settings.WORK_MAX_ATTEMPTS = 2
    lost = lost_run(steward, attempts=2)
    half = attempt_file(lost, 2)

    assert recovery.sweep()["runs"] == {"retried": 0, "failed": 1}

    lost.refresh_from_db()
    assert lost.state == State.FAILED
    assert "stopped before it finished, 2 times" in lost.error
    assert "Resubmit" in lost.error and "memory" in lost.error
    assert not storage.exists(half)
    assert AuditEvent.objects.get(action=A.RUN_FAILED, request=lost).detail["attempt"] == 2
    release.resubmit(steward, lost.pk, PARAMS, "Again, please.")
    lost.refresh_from_db()
    assert (lost.state, lost.round, lost.attempts, lost.worker) == (State.QUEUED, 2, 0, "")


@pytest.mark.django_db
def test_a_run_past_the_hard_time_limit_says_so(steward, settings):
    settings.WORK_MAX_ATTEMPTS = 1
    settings.CELERY_TASK_TIME_LIMIT = 600
    lost = lost_run(steward, attempts=1)
    ReleaseRequest.objects.filter(pk=lost.pk).update(
        started_at=timezone.now() - timedelta(minutes=20)
    )
    recovery.sweep()
    lost.refresh_from_db()
    assert "TASK_TIME_LIMIT" in lost.error


@pytest.mark.django_db
def test_work_with_a_live_lease_is_left_alone(steward, settings):
    settings.LEASE_SECONDS = 60
    alive = lost_run(steward, silent_for=timedelta(seconds=5))
    profiled = lost_profiling(steward)
    Dataset.objects.filter(pk=profiled.pk).update(heartbeat_at=timezone.now())
    swept = recovery.sweep()
    assert swept["runs"] == swept["profilings"] == {"retried": 0, "failed": 0}
    alive.refresh_from_db()
    profiled.refresh_from_db()
    assert (alive.state, profiled.status) == (State.RUNNING, Dataset.Status.PROFILING)


@pytest.mark.django_db
def test_a_lost_profiling_is_retried_then_the_file_refused(steward, settings):
    settings.WORK_MAX_ATTEMPTS = 2
    retried = lost_profiling(steward, attempts=1)
    given_up = lost_profiling(steward, attempts=2)
    original = given_up.file_path

    assert recovery.sweep()["profilings"] == {"retried": 1, "failed": 1}

    retried.refresh_from_db()
    assert retried.status == Dataset.Status.PENDING and "attempt 2 of 2" in retried.stage
    assert AuditEvent.objects.filter(action=A.PROFILING_RETRIED, dataset=retried).exists()
    profiling.profile_dataset(retried.pk)
    retried.refresh_from_db()
    assert (retried.status, retried.attempts) == (Dataset.Status.READY, 2)

    given_up.refresh_from_db()
    assert given_up.status == Dataset.Status.FAILED
    assert "stopped before it finished, 2 times" in given_up.error
    assert "Upload the file again" in given_up.error
    assert not storage.exists(original)


# --- Lost messages ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_work_whose_message_was_lost_is_sent_again_with_a_backoff(steward, settings):
    settings.REDELIVER_SECONDS = 60
    release_request = queued_request(steward)
    first = dispatch.latest("releases.run_release", release_request.pk)
    assert recovery.redeliver_waiting_work() == 0  # still in the outbox: the outbox sends it

    def sent(message: OutboxMessage, seconds_ago: float) -> None:
        OutboxMessage.objects.filter(pk=message.pk).update(
            sent_at=timezone.now() - timedelta(seconds=seconds_ago), attempts=1
        )

    sent(first, 30)
    assert recovery.redeliver_waiting_work() == 0  # a worker may simply be busy
    sent(first, 90)
    assert recovery.redeliver_waiting_work() == 1
    second = dispatch.latest("releases.run_release", release_request.pk)
    assert (second.pk != first.pk, second.redelivery, second.args) == (
        True,
        1,
        [release_request.pk],
    )
    sent(second, 90)
    assert recovery.redeliver_waiting_work() == 0  # the second wait is twice as long
    sent(second, 130)
    assert recovery.redeliver_waiting_work() == 1
    assert dispatch.latest("releases.run_release", release_request.pk).redelivery == 2
    # A repeat is harmless: the first message runs it, the others find nothing to run.
    release.run_release(release_request.pk)
    release.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert (release_request.state, release_request.attempts) == (State.READY, 1)


@pytest.mark.django_db
def test_a_page_polling_one_item_resolves_its_lost_worker_without_beat(client, steward):
    lost = lost_run(steward)
    profiled = lost_profiling(steward)
    client.force_login(steward)
    response = client.get(reverse("releases:request_status", args=[lost.pk]))
    assert response.status_code == 200 and "attempt 2 of 2" in response.content.decode()
    lost.refresh_from_db()
    assert lost.state == State.QUEUED
    response = client.get(reverse("releases:dataset_status", args=[profiled.pk]))
    assert "attempt 2 of 2" in response.content.decode()
    profiled.refresh_from_db()
    assert profiled.status == Dataset.Status.PENDING


# --- Limits: a clear failure naming the setting -----------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fault", "setting"),
    [(SoftTimeLimitExceeded(), "TASK_SOFT_TIME_LIMIT"), (MemoryError(), "WORKER_MEMORY_LIMIT_MB")],
)
def test_a_run_past_its_time_or_memory_fails_naming_the_limit(
    steward, private_media_root, fault, setting
):
    release_request = queued_request(steward)
    before = stored_files(private_media_root)
    with mock.patch.object(release, "_summary", side_effect=fault):  # after the files are written
        release.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == State.FAILED
    assert setting in release_request.error and "internal error" not in release_request.error
    assert stored_files(private_media_root) == before  # the attempt's files are gone


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fault", "setting"),
    [(SoftTimeLimitExceeded(), "TASK_SOFT_TIME_LIMIT"), (MemoryError(), "WORKER_MEMORY_LIMIT_MB")],
)
def test_a_profiling_past_its_time_or_memory_refuses_the_file_naming_the_limit(
    steward, private_media_root, fault, setting
):
    dataset = pending_dataset(steward)
    with mock.patch.object(profiling, "_profile_columns", side_effect=fault):
        profiling.profile_dataset(dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.FAILED and setting in dataset.error
    assert stored_files(private_media_root) == []


# --- Cancelled or deleted while it runs: nothing comes back -----------------------------------


@pytest.mark.django_db
def test_a_run_cancelled_before_its_result_is_recorded_keeps_nothing(steward, private_media_root):
    release_request = queued_request(steward)
    before = stored_files(private_media_root)
    summary = release._summary

    def cancelled_meanwhile(*args):
        release.cancel(steward, release_request.pk, "Wrong columns.")
        return summary(*args)

    with mock.patch.object(release, "_summary", side_effect=cancelled_meanwhile):
        release.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == State.CANCELLED
    assert not release_request.classes.exists() and not release_request.files.exists()
    assert stored_files(private_media_root) == before
    assert AuditEvent.objects.filter(action=A.RUN_CANCELLED, request=release_request).exists()
    release.resubmit(steward, release_request.pk, PARAMS, "Columns fixed.")
    release.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == State.READY


@pytest.mark.django_db
def test_a_dataset_deleted_while_its_run_writes_cancels_the_run_and_nothing_comes_back(
    steward, private_media_root
):
    release_request = queued_request(steward)
    dataset = release_request.dataset
    summary = release._summary

    def deleted_meanwhile(*args):
        datasets.delete_dataset(steward, dataset)
        return summary(*args)

    with mock.patch.object(release, "_summary", side_effect=deleted_meanwhile):
        release.run_release(release_request.pk)
    assert not ReleaseRequest.objects.exists() and not Dataset.objects.exists()
    assert stored_files(private_media_root) == []
    cancel = AuditEvent.objects.get(action=A.CANCEL)
    assert cancel.detail["reason"] == "The dataset was deleted."
    assert cancel.detail["was"] == State.RUNNING
    assert AuditEvent.objects.get(action=A.DELETE).detail["runs_cancelled"] == [release_request.pk]


@pytest.mark.django_db
def test_a_dataset_deleted_while_it_is_profiled_never_comes_back(steward, private_media_root):
    dataset = pending_dataset(steward)
    save = column_store.save

    def deleted_first(target, local):
        # The deletion removes the row and the files; the store is written after it.
        datasets.delete_dataset(steward, target)
        return save(target, local)

    with mock.patch.object(column_store, "save", side_effect=deleted_first):
        assert profiling.profile_dataset(dataset.pk) is None
    assert not Dataset.objects.exists() and not DatasetColumn.objects.exists()
    assert stored_files(private_media_root) == []


@pytest.mark.django_db
def test_deleting_a_dataset_with_a_queued_request_cancels_it(steward, private_media_root):
    release_request = queued_request(steward)
    datasets.delete_dataset(steward, release_request.dataset)
    release.run_release(release_request.pk)  # its message arrives afterwards: nothing to run
    assert not ReleaseRequest.objects.exists() and not Dataset.objects.exists()
    assert stored_files(private_media_root) == []


# --- Leases with real threads -----------------------------------------------------------------


class Stopped(Exception):
    pass


@pytest.mark.django_db(transaction=True)
def test_a_lease_renews_and_stops_work_that_is_no_longer_its_own(steward, settings):
    settings.HEARTBEAT_SECONDS = 0.05
    dataset = lost_profiling(steward)
    Dataset.objects.filter(pk=dataset.pk).update(worker="me")
    lease = leases.Lease(
        Dataset, dataset.pk, interrupt=Stopped, status=Dataset.Status.PROFILING, worker="me"
    )
    with pytest.raises(Stopped), lease:
        deadline = time.monotonic() + 5
        while Dataset.objects.get(pk=dataset.pk).heartbeat_at < timezone.now() - timedelta(
            seconds=1
        ):
            assert time.monotonic() < deadline, "the lease was never renewed"
            time.sleep(0.01)
        Dataset.objects.filter(pk=dataset.pk).update(worker="another")
        stopped_at = time.monotonic()
        while time.monotonic() < stopped_at + 5:  # stands for a long phase with no progress
            time.sleep(0.01)
    assert lease.lost.is_set() and time.monotonic() - stopped_at < 2


def _in_thread(target, *args) -> threading.Thread:
    def body():
        from django.db import connection

        try:
            target(*args)
        finally:
            connection.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def _wait_for(check, seconds: float = 20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.02)
    raise AssertionError("timed out")


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_run_in_a_phase_without_progress_stops_it_within_seconds(
    steward, settings, private_media_root
):
    settings.HEARTBEAT_SECONDS = 0.1
    settings.WORK_PAUSE_AT = "Recording"  # the files are written; the pause stands for a long step
    settings.WORK_PAUSE_SECONDS = 60
    release_request = queued_request(steward)
    before = stored_files(private_media_root)
    worker = _in_thread(release.run_release, release_request.pk)
    _wait_for(lambda: ReleaseRequest.objects.get(pk=release_request.pk).stage.startswith("Record"))
    written = [f for f in stored_files(private_media_root) if f not in before]
    assert len(written) == 3  # CSV, Excel, Parquet of this attempt

    release.cancel(steward, release_request.pk, "Not needed any more.")
    cancelled_at = time.monotonic()
    worker.join(timeout=10)

    assert not worker.is_alive() and time.monotonic() - cancelled_at < 3
    release_request.refresh_from_db()
    assert release_request.state == State.CANCELLED
    assert stored_files(private_media_root) == before
    assert AuditEvent.objects.filter(action=A.RUN_CANCELLED, request=release_request).exists()


@pytest.mark.django_db(transaction=True)
def test_deleting_a_dataset_while_it_is_profiled_stops_the_profiling(
    steward, settings, private_media_root
):
    settings.HEARTBEAT_SECONDS = 0.1
    settings.WORK_PAUSE_AT = "Profiled"
    settings.WORK_PAUSE_SECONDS = 60
    dataset = pending_dataset(steward)
    worker = _in_thread(profiling.profile_dataset, dataset.pk)
    _wait_for(lambda: Dataset.objects.get(pk=dataset.pk).stage.startswith("Profiled"))
    datasets.delete_dataset(steward, dataset)
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert not Dataset.objects.exists() and not DatasetColumn.objects.exists()
    assert stored_files(private_media_root) == []
    assert AuditEvent.objects.get(action=A.DELETE).detail["status"] == Dataset.Status.PROFILING


@pytest.mark.django_db
def test_a_lost_statistics_run_is_retried_with_its_own_task_and_spends_once(
    steward, officer, settings
):
    from releases.engine import dp
    from releases.models import BudgetEntry
    from releases.services import budget, statistics
    from tests.test_statistics_release import COUNT, people_csv

    settings.WORK_MAX_ATTEMPTS = 2
    dataset = factories.make_dataset(steward, people_csv(), "people.csv")
    budget.set_budget(officer, dataset, "2", "0")
    with mock.patch.object(dispatch, "send"):
        release_request = statistics.request_statistics(steward, dataset, [dict(COUNT)])
    # A worker takes it, spends, and is killed before the tables are written.
    with (
        mock.patch.object(dp, "run_release", side_effect=SystemExit("killed")),
        pytest.raises(SystemExit),
    ):
        statistics.run_statistics(release_request.pk)
    ReleaseRequest.objects.filter(pk=release_request.pk).update(
        heartbeat_at=timezone.now() - timedelta(minutes=5)
    )

    assert recovery.sweep()["runs"] == {"retried": 1, "failed": 0}
    assert dispatch.latest("releases.run_statistics", release_request.pk).sent_at is None
    statistics.run_statistics(release_request.pk)
    release_request.refresh_from_db()
    assert (release_request.state, release_request.attempts) == (State.READY, 2)
    spends = BudgetEntry.objects.filter(dataset=dataset, kind=BudgetEntry.Kind.DP_SPEND)
    assert spends.count() == 1
