"""A bounded load run on the production shape, on loopback only.

    python bench/load.py [--users 50] [--seconds 60] [--web-workers 3] [--json FILE]

Starts a throwaway PostgreSQL cluster, Redis, a Celery worker (with beat) and gunicorn
(``--web-workers`` processes) on 127.0.0.1 with DEBUG off; migrates; seeds the demo accounts
and the approved Adult release (``seed_demo --with-release``), then more volume: requests
waiting for review (copies of the release's result, ``--ready``) and audit events on the
release (``--events``: the downloads of a busy release). Then locust, headless, runs
``--users`` simulated people for ``--seconds`` (``bench/locustfile.py``: officers on the
review queue, request pages and classes tables; recipients on their page, the report and the
downloads) and this prints requests, errors and the 50th/95th/99th percentiles per endpoint.
Exits non-zero when a request failed.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import processes  # noqa: E402
from tests.support.postgres import postgres_cluster  # noqa: E402

BIN = Path(sys.executable).parent


def _django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")
    import django

    django.setup()


def seed_volume(ready: int, events: int) -> dict:
    """More data beside the demo release: ``ready`` requests waiting for review (copies of its
    result and classes) and ``events`` audit events on it; the recipient accepts its terms.
    Returns what locust needs to know."""
    _django()
    from django.contrib.auth import get_user_model

    from releases.models import AuditEvent, EquivalenceClass, ReleaseRequest
    from releases.requests import services as sharing

    users = get_user_model().objects
    steward, recipient = users.get(username="steward"), users.get(username="recipient")
    demo = ReleaseRequest.objects.filter(state=ReleaseRequest.State.APPROVED).latest("pk")
    classes = list(EquivalenceClass.objects.filter(request=demo))
    copies = []
    for _ in range(ready):
        copy = ReleaseRequest.objects.get(pk=demo.pk)
        copy.pk = None
        copy.state = ReleaseRequest.State.READY
        copy.decided_at = None
        copy.save()
        copies.append(copy.pk)
        EquivalenceClass.objects.bulk_create(
            [
                EquivalenceClass(
                    request=copy,
                    values=c.values,
                    size=c.size,
                    risk=c.risk,
                    sensitive=c.sensitive,
                    fails=c.fails,
                    borderline=c.borderline,
                )
                for c in classes
            ],
            batch_size=1000,
        )
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                action=AuditEvent.Action.DOWNLOAD,
                actor=recipient if i % 2 else steward,
                dataset=demo.dataset,
                request=demo,
                detail={"file": "csv", "sha256": demo.extract_sha256},
            )
            for i in range(events)
        ],
        batch_size=1000,
    )
    sharing.accept_terms(recipient, demo.pk)
    filters = {}
    for name in [q["name"] for q in demo.config["quasi_identifiers"]][:3]:
        values = {c.values[name] for c in classes[:200]}
        filters[name] = sorted(values)[:5]
    return {
        "release": demo.pk,
        "ready": copies,
        "classes": len(classes),
        "filters": filters,
    }


def _wait_for_http(url: str, seconds: float) -> None:
    def answers() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    processes.wait_until(answers, seconds, url)


@contextlib.contextmanager
def gunicorn(env: dict, workdir: Path, workers: int):
    port = processes.free_port()
    log = open(workdir / "gunicorn.log", "wb")  # noqa: SIM115 - open for the process's life
    process = subprocess.Popen(
        [
            str(BIN / "gunicorn"),
            "anonymizer_site.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--timeout",
            "120",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_http(url + "/accounts/login/", 60)
        yield url
    finally:
        processes._stop(process)
        log.close()


def _run_locust(env: dict, url: str, users: int, seconds: int, workdir: Path) -> list[dict]:
    """Ramp up ``users``, two a second, each logging in once (PBKDF2: a deliberately slow
    hash); once the last has logged in, the locustfile resets the statistics and measures
    ``seconds``, so what is measured is the work, not the arrival."""
    prefix = workdir / "load"
    rate = 2
    ceiling = users // rate + 60 + seconds  # in case the last login never comes
    subprocess.run(
        [
            str(BIN / "locust"),
            "-f",
            str(ROOT / "bench" / "locustfile.py"),
            "--headless",
            "--users",
            str(users),
            "--spawn-rate",
            str(rate),
            "--run-time",
            f"{ceiling}s",
            "--host",
            url,
            "--csv",
            str(prefix),
            "--only-summary",
            "--loglevel",
            "WARNING",
            "--exit-code-on-error",
            "0",
        ],
        cwd=ROOT,
        env=dict(env, LOAD_USERS=str(users), LOAD_SECONDS=str(seconds)),
        check=True,
    )
    with open(f"{prefix}_stats.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    if os.environ.get("LOAD_KEEP"):
        for suffix in ("_stats.csv", "_stats_history.csv"):
            Path(os.environ["LOAD_KEEP"] + suffix).write_bytes(
                Path(f"{prefix}{suffix}").read_bytes()
            )
    return [
        {
            "name": row["Name"],
            "requests": int(row["Request Count"]),
            "errors": int(row["Failure Count"]),
            "p50": float(row["50%"]),
            "p95": float(row["95%"]),
            "p99": float(row["99%"]),
            "rps": float(row["Requests/s"]),
        }
        for row in rows
        if int(row["Request Count"])  # logins happen before the measured window
    ]


def run(users: int, seconds: int, web_workers: int, ready: int, events: int) -> dict:
    with (
        tempfile.TemporaryDirectory(prefix="anonymizer-load-") as folder,
        postgres_cluster() as database_url,
    ):
        workdir = Path(folder)
        with processes.redis_server(workdir) as redis_url:
            env = processes.app_environment(
                database_url=database_url,
                redis_url=redis_url,
                media_root=workdir / "media",
                var_dir=workdir,
            )
            env.update(DEBUG="0", SECURE_COOKIES="0", ALLOWED_HOSTS="127.0.0.1")
            started = time.perf_counter()
            processes.manage(env, "migrate", "--noinput")
            processes.manage(env, "seed_demo", "--with-release")
            seeded = json.loads(
                subprocess.run(
                    [sys.executable, __file__, "_seed", str(ready), str(events)],
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.splitlines()[-1]
            )
            print(
                f"Seeded in {time.perf_counter() - started:.0f} s: release #{seeded['release']} "
                f"({seeded['classes']} classes), {len(seeded['ready'])} requests waiting for "
                f"review, {events} audit events."
            )
            accounts = json.loads((workdir / "demo-accounts.txt").read_text())
            load_env = dict(
                env,
                LOAD_ACCOUNTS=json.dumps(accounts),
                LOAD_RELEASE=str(seeded["release"]),
                LOAD_READY=",".join(str(pk) for pk in seeded["ready"]),
                LOAD_FILTERS=json.dumps(seeded["filters"]),
            )
            with (
                processes.celery_worker(env, workdir, beat=True),
                gunicorn(env, workdir, web_workers) as url,
            ):
                print(f"{users} users for {seconds} s on {url} ({web_workers} gunicorn workers)")
                endpoints = _run_locust(load_env, url, users, seconds, workdir)
    return {
        "users": users,
        "seconds": seconds,
        "web_workers": web_workers,
        "endpoints": endpoints,
    }


def show(result: dict) -> None:
    print(f"\n{result['users']} users, {result['seconds']} s measured after the ramp-up")
    print(f"{'endpoint':<26}{'requests':>9}{'errors':>8}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}")
    for row in result["endpoints"]:
        print(
            f"{row['name']:<26}{row['requests']:>9}{row['errors']:>8}"
            f"{row['p50']:>8.0f}{row['p95']:>8.0f}{row['p99']:>8.0f}"
        )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_seed":
        print(json.dumps(seed_volume(int(sys.argv[2]), int(sys.argv[3]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--ready", type=int, default=6, help="requests waiting for review")
    parser.add_argument("--events", type=int, default=5000, help="audit events on the release")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    result = run(args.users, args.seconds, args.web_workers, args.ready, args.events)
    show(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 1 if any(row["errors"] for row in result["endpoints"]) else 0


if __name__ == "__main__":
    sys.exit(main())
