"""Faults caused for real: a worker's pool process killed with -9 at several points of a run
and of a profiling, a dataset deleted while it is profiled, hostile files on a worker with a
memory ceiling, Redis stopped during every kind of submission and restarted while a task
waits in its queue. Every piece of work must reach a final state by itself, within a bound.

One prefork worker with Celery beat serves the module, with short leases and sweeps
(``FAST``) and pauses at named stages (``WORK_PAUSE_AT``) so that a kill lands in the phase
it names. The test that restarts Redis with no worker running comes first: it must not
share the database with a sweeping worker.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings
from django.urls import reverse

from releases.background import leases
from releases.datasets import services as datasets
from releases.models import (
    AuditEvent,
    Dataset,
    OutboxMessage,
    ReleaseRequest,
    Reproduction,
    Review,
    Role,
)
from releases.requests import reproduction
from releases.requests import services as release
from releases.requests.parameters import ReleaseParameters
from tests.support import factories, processes
from tests.support.factories import synthetic_csv
from tests.support.leftovers import stored_files, unreferenced_files
from tests.support.workflow import approve, tag
from tests.test_io import giant_field_csv, wide_csv, zip_bomb_xlsx

pytestmark = [
    pytest.mark.integration,
    pytest.mark.chaos,
    pytest.mark.django_db(transaction=True),
]

State = ReleaseRequest.State
PARAMS = ReleaseParameters(k=5, suppression_limit=0.05)
LEASE_SECONDS = 2
#: Short leases and sweeps, and a pause at each named stage so that a kill lands there.
FAST = {
    "HEARTBEAT_SECONDS": "0.3",
    "LEASE_SECONDS": str(LEASE_SECONDS),
    "SWEEP_SECONDS": "1",
    "REDELIVER_SECONDS": "3",
    "WORK_MAX_ATTEMPTS": "2",
    "WORK_PAUSE_AT": "Loading,lattice,Recording,rows of,Profiled",
    "WORK_PAUSE_SECONDS": "1",
    "WORKER_MEMORY_LIMIT_MB": "1024",
}
#: From a kill to the next attempt: the lease, a sweep, a new pool process, with margin.
RECOVERY_BOUND = LEASE_SECONDS + 1 + 12


class Redis(processes.RestartableRedis):
    def queued(self) -> int:
        return redis.Redis.from_url(self.url).llen("celery")


def worker_env(
    database: str, redis_url: str, folder: Path, media_root: Path | None = None, **extra: str
) -> dict:
    env = processes.app_environment(
        database_url=f"sqlite:///{database}",
        redis_url=redis_url,
        media_root=media_root or folder / "media",
        var_dir=folder,
    )
    env.update(
        FILE_UPLOAD_TEMP_DIR=str(folder / "tmp"),
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
        EMAIL_FILE_PATH=str(folder / "mail"),
        **extra,
    )
    (folder / "tmp").mkdir(exist_ok=True)
    return env


def wait_for(check, seconds: float, what: str):
    return processes.wait_until(check, seconds, what, interval=0.05)


def ready_dataset(steward) -> Dataset:
    dataset = factories.make_dataset(steward, synthetic_csv(), "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "zip": Role.QUASI_IDENTIFIER})
    return dataset


# --- Redis restarted while a task waits in its queue (no worker running) ----------------------


def test_a_task_waiting_in_the_queue_survives_a_redis_restart(
    steward, django_db_setup, tmp_path_factory
):
    folder = tmp_path_factory.mktemp("restart")
    broker = Redis(folder)
    broker.start()
    try:
        dataset = ready_dataset(steward)
        with processes.producer_for(broker.url):
            release_request = release.request_release(steward, dataset, PARAMS)
        assert OutboxMessage.objects.get(task_name="releases.run_release").sent_at is not None
        assert broker.queued() == 1
        broker.stop()
        broker.start()  # same port, same folder: the append-only file brings the queue back
        assert broker.queued() == 1
        # No redelivery here: the work completes from the message that survived the restart.
        env = worker_env(
            django_settings.DATABASES["default"]["NAME"],
            broker.url,
            folder,
            media_root=django_settings.MEDIA_ROOT,
            REDELIVER_SECONDS="600",
        )
        with processes.celery_worker(env, folder, name="after-restart"):
            wait_for(
                lambda: ReleaseRequest.objects.get(pk=release_request.pk).state == State.READY,
                60,
                "the queued run to complete after the restart",
            )
        assert OutboxMessage.objects.count() == 1  # it was never sent again
    finally:
        broker.stop()


# --- The module's worker ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def chaos(django_db_setup, tmp_path_factory):
    """Persistent Redis and a prefork worker with beat, sharing the test database."""
    folder = tmp_path_factory.mktemp("chaos")
    broker = Redis(folder)
    broker.start()
    env = worker_env(django_settings.DATABASES["default"]["NAME"], broker.url, folder, **FAST)
    try:
        with (
            processes.producer_for(broker.url),
            processes.celery_worker(env, folder, pool="prefork", beat=True, name="chaos") as worker,
        ):
            yield {"worker": worker, "redis": broker, "folder": folder, "env": env}
    finally:
        broker.stop()


@pytest.fixture
def chaos_media(settings, chaos):
    """The worker's MEDIA_ROOT, emptied before each test."""
    media = chaos["folder"] / "media"
    shutil.rmtree(media, ignore_errors=True)
    media.mkdir()
    settings.MEDIA_ROOT = media
    return media


def kill_pool_process(chaos, worker_field: str) -> int:
    """Kill -9 the pool process a row names as holding its lease (a child of our worker)."""
    pid = leases.pid_of(worker_field)
    assert pid in processes.child_pids(chaos["worker"].pid), (pid, worker_field)
    os.kill(pid, signal.SIGKILL)
    return pid


def wait_for_request(pk: int, check, seconds: float, what: str) -> ReleaseRequest:
    def current():
        row = ReleaseRequest.objects.get(pk=pk)
        return row if check(row) else None

    return wait_for(current, seconds, what)


def wait_for_dataset(pk: int, check, seconds: float, what: str) -> Dataset:
    def current():
        row = Dataset.objects.filter(pk=pk).first()
        return row if row is not None and check(row) else None

    return wait_for(current, seconds, what)


def in_stage(stage: str, attempt: int):
    return lambda row: row.attempts == attempt and stage.lower() in row.stage.lower()


def test_a_run_killed_on_every_attempt_fails_with_a_reason_then_is_resubmitted(
    chaos, steward, chaos_media
):
    release_request = release.request_release(steward, ready_dataset(steward), PARAMS)
    for attempt in (1, 2):
        running = wait_for_request(
            release_request.pk, in_stage("Loading", attempt), 30, f"attempt {attempt} loading"
        )
        assert running.state == State.RUNNING
        kill_pool_process(chaos, running.worker)
    killed_at = time.monotonic()
    failed = wait_for_request(
        release_request.pk, lambda r: r.state == State.FAILED, RECOVERY_BOUND, "the failure"
    )
    print(f"\nkilled twice while loading: failed {time.monotonic() - killed_at:.1f} s after")
    assert "stopped before it finished, 2 times" in failed.error
    assert unreferenced_files(chaos_media) == []

    release.resubmit(steward, release_request.pk, PARAMS, "Try again on a quieter worker.")
    ready = wait_for_request(
        release_request.pk, lambda r: r.state == State.READY, 60, "the resubmitted run"
    )
    assert (ready.round, ready.attempts) == (2, 1)
    assert unreferenced_files(chaos_media) == []


@pytest.mark.parametrize("stage", ["lattice", "Recording"])
def test_a_run_killed_in_the_search_or_while_writing_is_retried_and_completes(
    chaos, steward, chaos_media, stage
):
    release_request = release.request_release(steward, ready_dataset(steward), PARAMS)
    running = wait_for_request(release_request.pk, in_stage(stage, 1), 30, f"the run at {stage}")
    if stage == "Recording":  # the package is written: the dead attempt leaves three files
        assert len(unreferenced_files(chaos_media)) == 3
    killed = kill_pool_process(chaos, running.worker)
    killed_at = time.monotonic()
    ready = wait_for_request(
        release_request.pk,
        lambda r: r.state == State.READY,
        RECOVERY_BOUND + 15,
        "the retried run",
    )
    print(f"\nkilled at {stage}: ready {time.monotonic() - killed_at:.1f} s after")
    assert ready.attempts == 2 and leases.pid_of(ready.worker) != killed
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.RUN_RETRIED, request=release_request
    ).exists()
    assert unreferenced_files(chaos_media) == []
    assert not (chaos["folder"] / "tmp" / "anonymizer-work" / str(killed)).exists()


@pytest.mark.parametrize("stage", ["rows of", "Profiled"])
def test_a_profiling_killed_while_reading_or_profiling_is_retried_and_completes(
    chaos, steward, chaos_media, stage
):
    dataset = datasets.create_dataset(steward, factories.upload(synthetic_csv(), "people.csv"))
    profiling_row = wait_for_dataset(dataset.pk, in_stage(stage, 1), 30, f"profiling at {stage}")
    killed = kill_pool_process(chaos, profiling_row.worker)
    killed_at = time.monotonic()
    ready = wait_for_dataset(
        dataset.pk, lambda d: d.is_final, RECOVERY_BOUND + 10, "the retried profiling"
    )
    print(f"\nkilled at {stage}: profiled {time.monotonic() - killed_at:.1f} s after")
    assert (ready.status, ready.attempts, ready.row_count) == (Dataset.Status.READY, 2, 300)
    assert ready.columns.count() == 5
    assert unreferenced_files(chaos_media) == []
    assert not (chaos["folder"] / "tmp" / "anonymizer-work" / str(killed)).exists()


def test_a_dataset_deleted_while_it_is_profiled_never_comes_back(chaos, steward, chaos_media):
    dataset = datasets.create_dataset(steward, factories.upload(synthetic_csv(), "people.csv"))
    wait_for_dataset(dataset.pk, in_stage("Profiled", 1), 30, "the profiling")
    datasets.delete_dataset(steward, dataset)
    # The next upload is profiled by the same single pool process: once it is done, the
    # deleted dataset's task has ended too.
    after = datasets.create_dataset(steward, factories.upload(synthetic_csv(), "later.csv"))
    wait_for_dataset(after.pk, lambda d: d.is_final, 40, "the next upload")
    time.sleep(LEASE_SECONDS + 1)  # and a sweep or two
    assert list(Dataset.objects.values_list("pk", flat=True)) == [after.pk]
    assert unreferenced_files(chaos_media) == []
    assert len(stored_files(chaos_media)) == 2  # the later upload and its column store


def _peak_memory_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def test_hostile_files_are_refused_within_seconds_and_the_worker_stays_under_its_ceiling(
    chaos, steward, chaos_media
):
    for filename, content, setting in [
        ("bomb.xlsx", zip_bomb_xlsx(), "MAX_COMPRESSION_RATIO"),
        ("wide.csv", wide_csv(), "MAX_COLUMNS"),
        ("giant.csv", giant_field_csv(), "MAX_CELL_BYTES"),
    ]:
        dataset = datasets.create_dataset(steward, factories.upload(content, filename))
        started = time.monotonic()
        refused = wait_for_dataset(dataset.pk, lambda d: d.is_final, 60, f"{filename} refused")
        print(f"\n{filename}: refused in {time.monotonic() - started:.1f} s")
        assert refused.status == Dataset.Status.FAILED and setting in refused.error
        pool = leases.pid_of(refused.worker)
        peak = _peak_memory_mb(pool)
        print(f"pool process peak memory {peak:.0f} MB")
        assert peak < int(FAST["WORKER_MEMORY_LIMIT_MB"])
    assert stored_files(chaos_media) == []


# --- Redis stopped during every kind of submission (last: it breaks the worker's link) --------


def test_redis_down_during_every_kind_of_submission_loses_nothing(
    chaos, client, steward, officer, recipient, chaos_media
):
    steward.email = "steward@example.org"
    steward.save()
    # The module's earlier faults may have mailed (a failed request tells its steward): only
    # this test's mails count.
    mail_folder = chaos["folder"] / "mail"
    earlier_mails = set(mail_folder.glob("*"))
    dataset = ready_dataset(steward)
    decided = release.request_release(steward, dataset, PARAMS)
    to_resubmit = release.request_release(steward, dataset, PARAMS)
    release.cancel(steward, to_resubmit.pk, "Wrong parameters.")
    wait_for_request(decided.pk, lambda r: r.state == State.READY, 60, "the first run")

    chaos["redis"].stop()
    client.force_login(steward)
    upload = client.post(
        reverse("releases:dataset_list"),
        {"file": factories.upload(synthetic_csv(), "during.csv"), "name": "during"},
    )
    assert upload.status_code == 302  # never a 500: the upload waits for the queue
    requested = client.post(
        reverse("releases:request_create", args=[dataset.pk]),
        {
            "use__k-anonymity": "on",
            "k-anonymity__k": 5,
            "suppression_percent": 5,
            "algorithm": "optimal",
        },
    )
    assert requested.status_code == 302
    page = client.get(requested.url)
    assert page.status_code == 200 and 'id="queue-waiting"' in page.content.decode()
    release.resubmit(steward, to_resubmit.pk, PARAMS, "Fixed.")
    rerun = reproduction.request_reproduction(officer, decided.pk)
    approve(officer, decided, recipient)  # the decision's e-mail waits in the outbox too
    waiting = OutboxMessage.objects.filter(sent_at__isnull=True).count()
    assert waiting == 5, list(OutboxMessage.objects.filter(sent_at__isnull=True))

    chaos["redis"].start()
    restarted_at = time.monotonic()
    new_dataset = Dataset.objects.get(name="during")
    new_request = ReleaseRequest.objects.exclude(pk__in=[decided.pk, to_resubmit.pk]).get()
    wait_for(
        lambda: (
            Dataset.objects.get(pk=new_dataset.pk).is_final
            and ReleaseRequest.objects.get(pk=new_request.pk).state == State.READY
            and ReleaseRequest.objects.get(pk=to_resubmit.pk).state == State.READY
            and Reproduction.objects.get(pk=rerun.pk).is_final
            and Review.objects.get(request=decided).notified_at is not None
            and any(set(mail_folder.glob("*")) - earlier_mails)
        ),
        90,
        "every submission to complete once Redis is back",
    )
    print(f"\nRedis back: everything done {time.monotonic() - restarted_at:.1f} s later")
    assert Dataset.objects.get(pk=new_dataset.pk).status == Dataset.Status.READY
    assert Reproduction.objects.get(pk=rerun.pk).state == Reproduction.State.IDENTICAL
    time.sleep(1.5)  # a sweep or two: a repeated message sends no second e-mail
    mails = sorted(set(mail_folder.glob("*")) - earlier_mails)
    assert len(mails) == 1 and "approved" in mails[0].read_text().lower()
    assert not OutboxMessage.objects.filter(sent_at__isnull=True).exists()
