"""A chaos benchmark: faults caused for real during every kind of background job; it prints
figures instead of asserting.

    python bench/chaos.py [--kinds profiling,run,statistics,reproduction]
                          [--faults kill,redis-stop,redis-restart,postgres-stop] [--quick]

Starts, on 127.0.0.1 only, a throwaway PostgreSQL cluster, a persistent Redis (append-only
file, as ``make run`` starts it) and one prefork Celery worker with beat (one pool process),
with short leases and sweeps and a pause at named stages of every job (``WORK_PAUSE_AT``), so
that a fault lands in the phase it names. This process plays the web side: it calls the
services the views call, on the same database.

For each job kind (a profiling after an upload, an extract run, a differentially private
statistics run, a reproduction) and each fault:

* ``kill``: ``kill -9`` of the pool process running the job;
* ``redis-stop``: Redis stopped for ``DOWN_SECONDS``, a second job of the kind submitted
  while it is down, then Redis started again;
* ``redis-restart``: a second job queued behind the first, then Redis restarted at once;
* ``postgres-stop``: PostgreSQL stopped (``pg_ctl stop -m fast``: every connection ends) for
  ``DOWN_SECONDS``, then started again;

each at three points of the job (``POINTS``): right after its claim, mid-work, and while it
stores its result (``--quick``: mid-work only).

In every trial a companion job of the kind (not for a reproduction, which cannot be
cancelled) is submitted behind the faulted one and cancelled (a dataset: deleted) before the
fault. Each job must reach a final state within ``BOUND_SECONDS`` of its submission. Then:

* *lost*: a job missing or not final in time, a finished job without its result (files,
  classes, columns, spend), a message of the trial still unsent in the outbox;
* *resurrected*: a cancelled job that ran or came back, a deleted dataset that came back, a
  job whose result was written twice (two spends, two sets of files or columns, two outcomes),
  checked after the trial and again at the end of the run;
* *stray files*: files in storage that no row names (what a dead attempt left).

Prints a table (one row per fault x kind) and a summary line; exits non-zero when a job did
not reach a final state in time, or a record was lost or resurrected (targets: 100 %, 0, 0).
Everything started is stopped and every temporary folder removed, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import processes  # noqa: E402
from tests.support.postgres import Cluster  # noqa: E402

KINDS = ("profiling", "run", "statistics", "reproduction")
FAULTS = ("kill", "redis-stop", "redis-restart", "postgres-stop")
#: A job must reach a final state this long after its submission.
BOUND_SECONDS = 120.0
#: How long Redis or PostgreSQL stays down.
DOWN_SECONDS = 5.0
#: The pause at each named stage (enough for this process to see it and strike).
PAUSE_SECONDS = 1.5
#: Short leases and sweeps, as the fault tests use (production: 10 s, 60 s, 30 s, 120 s).
WORKER_SETTINGS = {
    "HEARTBEAT_SECONDS": "0.3",
    "LEASE_SECONDS": "2",
    "SWEEP_SECONDS": "1",
    "REDELIVER_SECONDS": "3",
    "WORK_MAX_ATTEMPTS": "2",
    "WORK_PAUSE_SECONDS": str(PAUSE_SECONDS),
}
#: The three points of each kind (after the claim, mid-work, while storing): a part of the
#: stage where the job pauses.
POINTS = {
    "profiling": ("Reading the file", "rows of", "Storing the columns"),
    "run": ("Loading the dataset", "Searching for the best", "equivalence classes"),
    "statistics": ("Spending the privacy budget", "Drawing the noise", "Writing the tables"),
    "reproduction": ("Re-running the round", "package of the re-run", "Comparing the files"),
}
MID = 1  # the mid-work point, the only one with --quick

# --- The throwaway servers, and Django configured to use them (before the app is imported) ---

WORKDIR = Path(tempfile.mkdtemp(prefix="anonymizer-chaos-"))
POSTGRES = Cluster()
REDIS = processes.RestartableRedis(WORKDIR)
MEDIA = WORKDIR / "media"
os.environ.update(
    processes.app_environment(
        database_url=POSTGRES.url, redis_url=REDIS.url, media_root=MEDIA, var_dir=WORKDIR
    )
)
os.environ.update(
    FILE_UPLOAD_TEMP_DIR=str(WORKDIR / "tmp"),
    EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
    EMAIL_FILE_PATH=str(WORKDIR / "mail"),
    # Only the worker pauses at the named stages (the runs made here to prepare never do).
    WORK_PAUSE_AT="",
)

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import InterfaceError, OperationalError, connection  # noqa: E402

from releases.background import leases  # noqa: E402
from releases.background import outbox as dispatch  # noqa: E402
from releases.core import roles  # noqa: E402
from releases.datasets import budget, column_store  # noqa: E402
from releases.datasets import services as datasets  # noqa: E402
from releases.models import (  # noqa: E402
    AuditEvent,
    BudgetEntry,
    Dataset,
    DatasetColumn,
    EquivalenceClass,
    OutboxMessage,
    ReleaseFile,
    ReleaseRequest,
    Reproduction,
    Role,
)
from releases.requests import reproduction as reproductions  # noqa: E402
from releases.requests import run as release_run  # noqa: E402
from releases.requests import services as release  # noqa: E402
from releases.requests.parameters import ReleaseParameters  # noqa: E402
from releases.statistics import services as statistics_release  # noqa: E402
from tests.support import factories, members  # noqa: E402
from tests.support.leftovers import unreferenced_files  # noqa: E402
from tests.support.workflow import tag  # noqa: E402

State = ReleaseRequest.State
PARAMS = ReleaseParameters(k=5, suppression_limit=0.05)
QUERIES = [
    {"kind": "count", "epsilon": 0.25},
    {"kind": "mean", "column": "income", "lower": 0, "upper": 10_000, "epsilon": 0.25},
]
ROWS = 300


def retrying(read: Callable[[], Any], seconds: float = 30) -> Any:
    """``read()`` against the database, reconnecting while PostgreSQL comes back."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return read()
        except (OperationalError, InterfaceError):
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# --- The worker ----------------------------------------------------------------------------


class Worker:
    """The Celery worker (prefork, one pool process, beat) and its log, where the jobs say
    where they pause."""

    PAUSING = re.compile(r"WORK_PAUSE_AT: pausing (\S+ \d+) at ['\"](.*)['\"]")

    def __init__(self) -> None:
        self.log = WORKDIR / "chaos.log"
        self.offset = 0
        self.process: Any = None

    @contextlib.contextmanager
    def running(self) -> Iterator[Worker]:
        env = dict(os.environ, **WORKER_SETTINGS)
        env["WORK_PAUSE_AT"] = ",".join(p for points in POINTS.values() for p in points)
        pool: set[int] = set()
        try:
            with processes.celery_worker(
                env, WORKDIR, pool="prefork", beat=True, name="chaos"
            ) as process:
                self.process = process
                try:
                    yield self
                finally:
                    pool = set(processes.child_pids(process.pid))
        finally:
            for pid in pool:  # a pool process left behind by a stopped worker
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def pauses(self) -> list[tuple[str, str]]:
        """(work, stage) of each pause logged since the last call."""
        with open(self.log, "rb") as handle:
            handle.seek(self.offset)
            text = handle.read()
        cut = text.rfind(b"\n") + 1
        self.offset += cut
        return self.PAUSING.findall(text[:cut].decode("utf-8", "replace"))

    def wait_for_pause(self, work: str, point: str, seconds: float = 60) -> None:
        def seen() -> bool:
            return any(w == work and point.lower() in s.lower() for w, s in self.pauses())

        processes.wait_until(seen, seconds, f"{work} to pause at {point!r}", interval=0.05)

    def pool_pids(self) -> list[int]:
        return processes.child_pids(self.process.pid)


# --- The job kinds -------------------------------------------------------------------------


@dataclass
class People:
    steward: User
    officer: User
    run_dataset: Dataset
    stats_dataset: Dataset
    ready: list[int]  # requests ready for review, for reproductions


@dataclass
class Job:
    kind: str
    pk: int
    submitted: float
    final_at: float | None = None
    state: str = ""
    attempts: int = 0


class Kind:
    """What the benchmark does with one kind of job."""

    name = ""
    model: Any = None

    def __init__(self, people: People) -> None:
        self.people = people

    def submit(self) -> int:
        raise NotImplementedError

    def cancel(self, pk: int) -> None:
        raise NotImplementedError

    def work(self, pk: int) -> str:
        """How the job names itself where it pauses."""
        raise NotImplementedError

    def state(self, pk: int) -> str | None:
        """The job's state; None when it is not final (or gone: "gone")."""
        raise NotImplementedError

    def completed(self, pk: int) -> bool:
        """Did it end as asked (profiled, ready for review, identical)?"""
        raise NotImplementedError

    def lost(self, pk: int) -> list[str]:
        """What a job ended as asked misses (its result), one line each."""
        raise NotImplementedError

    def doubled(self, pk: int) -> list[str]:
        """A result written more than once."""
        raise NotImplementedError

    def resurrected(self, pk: int) -> list[str]:
        """What a cancelled (or deleted) companion shows of having come back."""
        raise NotImplementedError

    def worker_of(self, pk: int) -> str:
        return self.model.objects.get(pk=pk).worker

    def attempts(self, pk: int) -> int:
        row = self.model.objects.filter(pk=pk).first()
        return row.attempts if row is not None else 0


class Profiling(Kind):
    name = "profiling"
    model = Dataset

    def submit(self) -> int:
        upload = factories.upload(factories.synthetic_csv(ROWS), "people.csv")
        return datasets.create_dataset(self.people.steward, upload).pk

    def cancel(self, pk: int) -> None:
        datasets.delete_dataset(self.people.steward, Dataset.objects.get(pk=pk))

    def work(self, pk: int) -> str:
        return f"dataset {pk}"

    def state(self, pk: int) -> str | None:
        row = Dataset.objects.filter(pk=pk).first()
        if row is None:
            return "gone"
        return row.status if row.is_final else None

    def completed(self, pk: int) -> bool:
        return Dataset.objects.filter(pk=pk, status=Dataset.Status.READY).exists()

    def lost(self, pk: int) -> list[str]:
        row = Dataset.objects.get(pk=pk)
        out = []
        if row.row_count != ROWS or DatasetColumn.objects.filter(dataset=row).count() < 5:
            out.append(f"dataset {pk}: profiled without its rows or columns")
        if not row.file_path or not (MEDIA / column_store.name_of(row)).exists():
            out.append(f"dataset {pk}: profiled without its column store")
        return out

    def doubled(self, pk: int) -> list[str]:
        columns = DatasetColumn.objects.filter(dataset_id=pk).count()
        profiled = AuditEvent.objects.filter(
            action=AuditEvent.Action.PROFILED, dataset_id=pk
        ).count()
        if columns > 5 or profiled > 1:
            return [f"dataset {pk}: {columns} columns, profiled {profiled} times"]
        return []

    def resurrected(self, pk: int) -> list[str]:
        out = []
        if Dataset.objects.filter(pk=pk).exists():
            out.append(f"deleted dataset {pk} is back")
        if DatasetColumn.objects.filter(dataset_id=pk).exists():
            out.append(f"deleted dataset {pk} has columns")
        return out


class RequestKind(Kind):
    """A run of a release request (an extract or a statistics release)."""

    model = ReleaseRequest

    def cancel(self, pk: int) -> None:
        release.cancel(self.people.steward, pk, "Not this one.")

    def work(self, pk: int) -> str:
        return f"request {pk}"

    def state(self, pk: int) -> str | None:
        row = ReleaseRequest.objects.filter(pk=pk).first()
        if row is None:
            return "gone"
        return row.state if row.is_settled else None

    def completed(self, pk: int) -> bool:
        return ReleaseRequest.objects.filter(pk=pk, state=State.READY).exists()

    def lost(self, pk: int) -> list[str]:
        row = ReleaseRequest.objects.get(pk=pk)
        files = list(ReleaseFile.objects.filter(request=row, round=row.round))
        out = []
        if not files or not row.package_sha256:
            out.append(f"request {pk}: ready without its package")
        missing = [f.path for f in files if not (MEDIA / f.path).exists()]
        if missing:
            out.append(f"request {pk}: files missing from storage: {missing}")
        return out

    def doubled(self, pk: int) -> list[str]:
        row = ReleaseRequest.objects.get(pk=pk)
        formats = list(
            ReleaseFile.objects.filter(request=row, round=row.round).values_list(
                "format", flat=True
            )
        )
        if len(formats) != len(set(formats)):
            return [f"request {pk}: {len(formats)} files for {len(set(formats))} formats"]
        return []

    def resurrected(self, pk: int) -> list[str]:
        row = ReleaseRequest.objects.get(pk=pk)
        out = []
        if row.state != State.CANCELLED:
            out.append(f"cancelled request {pk} is {row.state}")
        if ReleaseFile.objects.filter(request=row).exists():
            out.append(f"cancelled request {pk} has files")
        return out


class Run(RequestKind):
    name = "run"

    def submit(self) -> int:
        return release.request_release(self.people.steward, self.people.run_dataset, PARAMS).pk

    def lost(self, pk: int) -> list[str]:
        out = super().lost(pk)
        if not EquivalenceClass.objects.filter(request_id=pk).exists():
            out.append(f"request {pk}: ready without its equivalence classes")
        return out

    def doubled(self, pk: int) -> list[str]:
        out = super().doubled(pk)
        classes = EquivalenceClass.objects.filter(request_id=pk)
        distinct = len({tuple(sorted(v.items())) for v in classes.values_list("values", flat=True)})
        if classes.count() != distinct:
            out.append(f"request {pk}: {classes.count()} classes, {distinct} distinct")
        return out

    def resurrected(self, pk: int) -> list[str]:
        out = super().resurrected(pk)
        if EquivalenceClass.objects.filter(request_id=pk).exists():
            out.append(f"cancelled request {pk} has classes")
        return out


class Statistics(RequestKind):
    name = "statistics"

    def submit(self) -> int:
        return statistics_release.request_statistics(
            self.people.steward, self.people.stats_dataset, QUERIES
        ).pk

    def lost(self, pk: int) -> list[str]:
        out = super().lost(pk)
        if not BudgetEntry.objects.filter(release_request_id=pk).exists():
            out.append(f"request {pk}: ready without its spend")
        return out

    def doubled(self, pk: int) -> list[str]:
        out = super().doubled(pk)
        spends = BudgetEntry.objects.filter(
            release_request_id=pk, kind=BudgetEntry.Kind.DP_SPEND
        ).count()
        if spends > 1:
            out.append(f"request {pk}: the budget spent {spends} times")
        return out

    def resurrected(self, pk: int) -> list[str]:
        out = super().resurrected(pk)
        if BudgetEntry.objects.filter(release_request_id=pk).exists():
            out.append(f"cancelled request {pk} spent the budget")
        return out


class Reproducing(Kind):
    name = "reproduction"
    model = Reproduction

    def submit(self) -> int:
        return reproductions.request_reproduction(self.people.officer, self.people.ready.pop()).pk

    def work(self, pk: int) -> str:
        return f"Reproduction {pk}"

    def state(self, pk: int) -> str | None:
        row = Reproduction.objects.filter(pk=pk).first()
        if row is None:
            return "gone"
        return row.state if row.is_final else None

    def completed(self, pk: int) -> bool:
        return Reproduction.objects.filter(pk=pk, state=Reproduction.State.IDENTICAL).exists()

    def lost(self, pk: int) -> list[str]:
        if not Reproduction.objects.get(pk=pk).outcome:
            return [f"reproduction {pk}: identical without its outcome"]
        return []

    def doubled(self, pk: int) -> list[str]:
        row = Reproduction.objects.get(pk=pk)
        told = AuditEvent.objects.filter(
            action=AuditEvent.Action.REPRODUCED, request_id=row.request_id, detail__round=row.round
        ).count()
        return [f"reproduction {pk}: its outcome recorded {told} times"] if told > 1 else []


KIND_CLASSES: dict[str, type[Kind]] = {
    "profiling": Profiling,
    "run": Run,
    "statistics": Statistics,
    "reproduction": Reproducing,
}


def prepare(reproductions_needed: int) -> People:
    """Accounts, a profiled dataset for the runs, one with a budget for the statistics, and
    requests ready for review to reproduce: made here, before the worker starts."""

    def person(name: str, group: str) -> User:
        user, _ = User.objects.get_or_create(username=name)
        members.grant(user, group)
        return user

    steward, officer = person("steward", roles.STEWARDS), person("officer", roles.OFFICERS)
    run_dataset = factories.make_dataset(steward, factories.synthetic_csv(ROWS), "people.csv")
    tag(steward, run_dataset, {"age": Role.QUASI_IDENTIFIER, "zip": Role.QUASI_IDENTIFIER})
    lines = ["age,income"] + [f"{20 + i % 50},{1000 * (i % 7)}" for i in range(ROWS)]
    stats_dataset = factories.make_dataset(steward, "\n".join(lines) + "\n", "incomes.csv")
    tag(steward, stats_dataset, {"age": Role.QUASI_IDENTIFIER, "income": Role.SENSITIVE})
    budget.set_budget(officer, stats_dataset, 1000, 0)
    ready = []
    logging.getLogger("releases").setLevel(logging.WARNING)  # no line per run here
    with mock.patch.object(dispatch, "send"):  # run here, not by a worker
        for _ in range(reproductions_needed):
            pk = release.request_release(steward, run_dataset, PARAMS).pk
            release_run.run_release(pk)
            ready.append(pk)
    return People(steward, officer, run_dataset, stats_dataset, ready)


# --- A trial ---------------------------------------------------------------------------------


@dataclass
class Trial:
    fault: str
    kind: str
    point: str
    jobs: list[Job] = field(default_factory=list)
    companion: int | None = None
    fault_at: float = 0.0
    lost: list[str] = field(default_factory=list)
    resurrected: list[str] = field(default_factory=list)
    stray: int = 0
    error: str = ""


def wait_final(kind: Kind, jobs: list[Job]) -> None:
    """Until every job is final, or its bound passed."""
    while True:
        now = time.monotonic()
        open_jobs = [j for j in jobs if j.final_at is None and now - j.submitted < BOUND_SECONDS]
        if not open_jobs:
            return
        for job in open_jobs:
            state = retrying(lambda job=job: kind.state(job.pk))
            if state is not None:
                job.final_at, job.state = time.monotonic(), state
                job.attempts = retrying(lambda job=job: kind.attempts(job.pk))
        time.sleep(0.2)


def strike(trial: Trial, kind: Kind, worker: Worker, first: Job) -> None:
    """Cause the trial's fault while the first job pauses at the trial's point."""
    trial.fault_at = time.monotonic()
    if trial.fault == "kill":
        pid = leases.pid_of(kind.worker_of(first.pk))
        if pid is None or pid not in worker.pool_pids():
            raise RuntimeError(f"{kind.work(first.pk)} is not in the worker's pool ({pid}).")
        os.kill(pid, signal.SIGKILL)
    elif trial.fault == "redis-stop":
        REDIS.stop()
        trial.jobs.append(Job(kind.name, kind.submit(), time.monotonic()))
        time.sleep(max(0.0, trial.fault_at + DOWN_SECONDS - time.monotonic()))
        REDIS.start()
    elif trial.fault == "redis-restart":
        trial.jobs.append(Job(kind.name, kind.submit(), time.monotonic()))
        REDIS.stop()
        REDIS.start()
    elif trial.fault == "postgres-stop":
        POSTGRES.stop("fast")
        time.sleep(DOWN_SECONDS)
        POSTGRES.start()


def run_trial(trial: Trial, kind: Kind, worker: Worker) -> None:
    outbox_mark = retrying(lambda: OutboxMessage.objects.order_by("-pk").values("pk").first())
    outbox_mark = outbox_mark["pk"] if outbox_mark else 0
    strays_before = retrying(lambda: set(unreferenced_files(MEDIA)))
    worker.pauses()  # forget earlier pauses
    first = Job(kind.name, kind.submit(), time.monotonic())
    trial.jobs.append(first)
    try:
        worker.wait_for_pause(kind.work(first.pk), trial.point)
    except TimeoutError as exc:
        trial.error = str(exc)
        trial.fault_at = first.submitted  # no fault: times count from the submission
    else:
        if kind.name != "reproduction":
            trial.companion = kind.submit()
            kind.cancel(trial.companion)
        strike(trial, kind, worker, first)
    wait_final(kind, trial.jobs)
    # The outbox sends what waited, and a sweep or two runs: what would come back, comes back.
    _settle(outbox_mark)
    check(trial, kind, outbox_mark)
    trial.stray = len(retrying(lambda: set(unreferenced_files(MEDIA))) - strays_before)


def _settle(outbox_mark: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and retrying(
        lambda: OutboxMessage.objects.filter(pk__gt=outbox_mark, sent_at__isnull=True).exists()
    ):
        time.sleep(0.2)
    time.sleep(2.5)


def check(trial: Trial, kind: Kind, outbox_mark: int | None = None) -> None:
    """Count what was lost and what came back (``outbox_mark``: also the trial's messages)."""

    def look() -> tuple[list[str], list[str]]:
        lost, back = [], []
        for job in trial.jobs:
            state = kind.state(job.pk)
            if state == "gone":
                lost.append(f"{kind.work(job.pk)} is gone")
            elif job.final_at is None:
                lost.append(f"{kind.work(job.pk)} not final in {BOUND_SECONDS:.0f} s")
            elif kind.completed(job.pk):
                lost.extend(kind.lost(job.pk))
            if state != "gone":
                back.extend(kind.doubled(job.pk))
        if trial.companion is not None:
            back.extend(kind.resurrected(trial.companion))
        if outbox_mark is not None:
            unsent = OutboxMessage.objects.filter(pk__gt=outbox_mark, sent_at__isnull=True)
            lost.extend(f"outbox message {m.pk} ({m.task_name}) never sent" for m in unsent)
        return lost, back

    lost, back = retrying(look)
    trial.lost = sorted(set(trial.lost) | set(lost))
    trial.resurrected = sorted(set(trial.resurrected) | set(back))


# --- The report ------------------------------------------------------------------------------


def outcome(job: Job) -> str:
    return f"{job.state} (attempt {job.attempts})" if job.final_at else "not final"


def seconds(values: list[float]) -> str:
    """Median / max."""
    return f"{statistics.median(values):.1f} / {max(values):.1f}" if values else "-"


def report(trials: list[Trial], started: float) -> bool:
    header = (
        f"{'fault':<14} {'kind':<13} {'points':>6} {'jobs':>4} {'final<=2min':>11} "
        f"{'as asked':>8} {'s after fault':>13} {'s in all':>8} {'lost':>4} {'resurr.':>7} "
        f"{'stray':>5}"
    )
    print()
    print(header)
    print("-" * len(header))
    total_jobs = total_final = total_lost = total_back = 0
    for fault in FAULTS:
        for kind in KINDS:
            cell = [t for t in trials if t.fault == fault and t.kind == kind]
            if not cell:
                continue
            jobs = [j for t in cell for j in t.jobs]
            final = [j for j in jobs if j.final_at is not None]
            asked = sum(1 for t in cell for j in t.jobs if j.state in ("ready", "identical"))
            after = [j.final_at - t.fault_at for t in cell for j in t.jobs[:1] if j.final_at]
            whole = [j.final_at - j.submitted for t in cell for j in t.jobs if j.final_at]
            lost = sum(len(t.lost) + bool(t.error) for t in cell)
            back = sum(len(t.resurrected) for t in cell)
            stray = sum(t.stray for t in cell)
            share = 100 * len(final) / len(jobs) if jobs else 0
            print(
                f"{fault:<14} {kind:<13} {len(cell):>6} {len(jobs):>4} {share:>10.0f}% "
                f"{asked:>8} {seconds(after):>13} {max(whole, default=0):>8.1f} {lost:>4} "
                f"{back:>7} {stray:>5}"
            )
            total_jobs += len(jobs)
            total_final += len(final)
            total_lost += lost
            total_back += back
    problems = [
        f"  {t.fault} / {t.kind} at {t.point!r}: {line}"
        for t in trials
        for line in ([t.error] if t.error else []) + t.lost + t.resurrected
    ]
    if problems:
        print("\nWhat went wrong:")
        print("\n".join(problems))
    share = 100 * total_final / total_jobs if total_jobs else 0
    ok = total_jobs > 0 and total_final == total_jobs and total_lost == 0 and total_back == 0
    print(
        f"\nSummary: {len(trials)} trials, {total_jobs} jobs, {share:.0f} % final within "
        f"{BOUND_SECONDS:.0f} s (target 100 %), {total_lost} lost (target 0), {total_back} "
        f"resurrected (target 0), in {time.monotonic() - started:.0f} s: "
        + ("targets met." if ok else "TARGET MISSED.")
    )
    return ok


# --- The run ---------------------------------------------------------------------------------


def chosen(text: str, allowed: tuple[str, ...]) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {', '.join(unknown) or 'empty list'}: choose from {', '.join(allowed)}"
        )
    return names


def plan(kinds: list[str], faults: list[str], quick: bool) -> list[Trial]:
    trials = []
    for fault in FAULTS:
        if fault not in faults:
            continue
        for kind in KINDS:
            if kind not in kinds:
                continue
            points = (POINTS[kind][MID],) if quick else POINTS[kind]
            trials.extend(Trial(fault, kind, point) for point in points)
    return trials


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS), type=lambda t: chosen(t, KINDS))
    parser.add_argument("--faults", default=",".join(FAULTS), type=lambda t: chosen(t, FAULTS))
    parser.add_argument("--quick", action="store_true", help="one point per kind (mid-work)")
    parser.add_argument("--worker-log", type=Path, help="keep the worker's log in this file")
    args = parser.parse_args(argv)
    trials = plan(args.kinds, args.faults, args.quick)
    started = time.monotonic()
    print(
        f"Chaos benchmark: {len(trials)} trials ({', '.join(args.faults)} x "
        f"{', '.join(args.kinds)}), PostgreSQL {POSTGRES.url}, Redis {REDIS.url}, "
        f"folders {WORKDIR} {POSTGRES.workdir}",
        flush=True,
    )
    POSTGRES.create()
    REDIS.start()
    (WORKDIR / "tmp").mkdir(exist_ok=True)
    call_command("migrate", verbosity=0, interactive=False)
    needed = 2 * sum(t.kind == "reproduction" for t in trials)  # a second job in some
    people = prepare(needed)
    print(f"Prepared in {time.monotonic() - started:.0f} s; the worker starts.", flush=True)
    worker = Worker()
    with worker.running():
        for number, trial in enumerate(trials, 1):
            kind = KIND_CLASSES[trial.kind](people)
            try:
                run_trial(trial, kind, worker)
            except Exception as exc:  # a trial that breaks is reported, and the run goes on
                trial.error = f"the trial broke: {exc!r}"
            first = trial.jobs[0]
            took = (
                f"{first.final_at - trial.fault_at:.1f} s after the fault"
                if first.final_at
                else "not final"
            )
            print(
                f"[{number}/{len(trials)}] {trial.fault} / {trial.kind} at {trial.point!r}: "
                f"{', '.join(outcome(j) for j in trial.jobs)} ({took}); "
                f"lost {len(trial.lost) + bool(trial.error)}, resurrected {len(trial.resurrected)}",
                flush=True,
            )
        time.sleep(3)  # a few more sweeps, then everything is looked at again
        for trial in trials:
            check(trial, KIND_CLASSES[trial.kind](people))
    if args.worker_log:
        shutil.copyfile(worker.log, args.worker_log)
    return 0 if report(trials, started) else 1


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        code = main()
    except KeyboardInterrupt:
        print("Interrupted: stopping everything.", file=sys.stderr)
        code = 130
    finally:
        REDIS.stop()
        POSTGRES.destroy()
        shutil.rmtree(WORKDIR, ignore_errors=True)
    sys.exit(code)
