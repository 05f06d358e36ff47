"""How fast the review pages answer on a large release: milliseconds per page, its size and its
number of queries, on SQLite and on PostgreSQL.

    python bench/pages.py [--rows 1000000] [--classes 100000] [--events 10000] [--sqlite-only]

In a throwaway database per engine: an Adult-like file of ``--rows`` rows is uploaded,
profiled and released (k=5, 5 %) through the services, as the worker would; then
``--classes`` equivalence classes and ``--events`` downloads are added in bulk
(tests/support/scale.py), and each page is asked for through Django's test client (the whole
view, middleware and template; no network): the request (review) page, the classes table in
each order, filtered and far in, one class expanded, an older page of activity, the
recipient's page and the dataset's risk panel. Printed: the median of 5 answers per page.
Goal (issue 10): each under 300 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from generate import generate  # noqa: E402

ADULT = ROOT / "tests" / "data" / "adult"
QUASI_IDENTIFIERS = [
    "sex",
    "age",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
]
REPEAT = 5


def _child(args: argparse.Namespace) -> dict:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import UploadedFile
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from releases.core import roles
    from releases.datasets import profiling
    from releases.datasets import services as datasets
    from releases.models import Role
    from releases.requests import services as release
    from releases.requests import services as sharing
    from releases.requests.services import Additions
    from releases.review import services as review
    from tests.support import members, scale

    call_command("migrate", verbosity=0)
    users = {}
    for name, group in (
        ("steward", roles.STEWARDS),
        ("officer", roles.OFFICERS),
        ("recipient", roles.RECIPIENTS),
    ):
        users[name] = get_user_model().objects.create_user(name, password="x")
        members.grant(users[name], group)
    steward, officer, recipient = users["steward"], users["officer"], users["recipient"]

    t0 = time.perf_counter()
    with open(args.csv, "rb") as handle:
        upload = UploadedFile(handle, name=Path(args.csv).name, size=Path(args.csv).stat().st_size)
        dataset = datasets.create_dataset(steward, upload)
    profiling.profile_dataset(dataset.pk)
    dataset.refresh_from_db()
    for column in dataset.columns.all():
        if column.name in QUASI_IDENTIFIERS:
            datasets.set_column_role(steward, dataset, column.pk, Role.QUASI_IDENTIFIER)
            text = (ADULT / f"adult_hierarchy_{column.name}.csv").read_bytes()
            datasets.set_hierarchy_file(
                steward, dataset, column.pk, _file(text, f"adult_hierarchy_{column.name}.csv")
            )
        else:
            datasets.set_column_role(steward, dataset, column.pk, Role.SENSITIVE)
    request = release.request_release(
        steward, dataset, release.ReleaseParameters(k=5, suppression_limit=0.05)
    )
    request.refresh_from_db()  # run by the (eager) task on commit, as a worker would
    assert request.state == "ready", request.error
    review.review(officer, request.pk, "approve", additions=Additions(recipients=[recipient]))
    sharing.accept_terms(recipient, request.pk)
    scale.add_classes(request, args.classes)
    scale.add_downloads(request, recipient, args.events)
    built = time.perf_counter() - t0

    def timed(client: Client, url: str, htmx: bool = False) -> dict:
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        times = []
        for _ in range(REPEAT):
            with CaptureQueriesContext(connection) as queries:
                t = time.perf_counter()
                response = client.get(url, **headers)
                times.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        return {
            "ms": round(statistics.median(times), 1),
            "kb": round(len(response.content) / 1024, 1),
            "queries": len(queries),
        }

    officer_client, recipient_client = Client(), Client()
    officer_client.force_login(officer)
    recipient_client.force_login(recipient)
    steward_client = Client()
    steward_client.force_login(steward)
    page = reverse("releases:request_detail", args=[request.pk])
    classes = reverse("releases:request_classes", args=[request.pk])
    first = request.classes.order_by("size", "id").first()
    value = first.values["sex"]
    pages = {
        "review page": (officer_client, page, False),
        "classes by size": (officer_client, classes + "?order=size", True),
        "classes largest first": (officer_client, classes + "?order=-size", True),
        "classes by risk": (officer_client, classes + "?order=risk", True),
        "classes flagged first": (officer_client, classes + "?order=flagged", True),
        "classes page 2000": (officer_client, classes + "?page=2000", True),
        "classes filtered": (
            officer_client,
            classes + f"?attribute=sex&value={value}&order=-size",
            True,
        ),
        "class expanded": (
            officer_client,
            reverse("releases:class_detail", args=[request.pk, first.pk]),
            True,
        ),
        "activity page 100": (
            officer_client,
            reverse("releases:request_activity", args=[request.pk]) + "?events=100",
            True,
        ),
        "recipient page": (recipient_client, page, False),
        "dataset risk panel": (
            steward_client,
            reverse("releases:dataset_risk", args=[dataset.pk]),
            True,
        ),
    }
    if os.environ.get("BENCH_PROFILE"):  # "page name=file": where that page's time goes
        import cProfile
        import pstats

        name, _, target = os.environ["BENCH_PROFILE"].partition("=")
        client, url, htmx = pages[name]
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        client.get(url, **headers)
        with CaptureQueriesContext(connection) as queries:
            profile = cProfile.Profile()
            profile.runcall(client.get, url, **headers)
        with open(target, "w") as out:
            pstats.Stats(profile, stream=out).sort_stats("cumtime").print_stats(40)
            for query in queries.captured_queries:
                print(query["time"], query["sql"][:400], file=out)
    results = {name: timed(client, url, htmx) for name, (client, url, htmx) in pages.items()}
    return {
        "rows": dataset.row_count,
        "classes": request.classes.count(),
        "events": request.events.count(),
        "setup_s": round(built, 1),
        "pages": results,
    }


def _file(content: bytes, name: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, content, content_type="text/csv")


def _run(database_url: str, args: argparse.Namespace, tmp: Path) -> dict:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="anonymizer_site.settings",
        DATABASE_URL=database_url,
        MEDIA_ROOT=str(tmp / "media"),
        VAR_DIR=str(tmp),
        FILE_UPLOAD_TEMP_DIR=str(tmp),
        DEBUG="0",
        ALLOWED_HOSTS="testserver",
        CELERY_TASK_ALWAYS_EAGER="1",
    )
    command = [sys.executable, __file__, "--child", "--csv", str(args.csv)]
    command += ["--classes", str(args.classes), "--events", str(args.events)]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-4000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--classes", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--data-dir", type=Path, default=ROOT / "var" / "bench")
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args)))
        return
    if args.csv is None:
        args.data_dir.mkdir(parents=True, exist_ok=True)
        args.csv = args.data_dir / f"adult-{args.rows}.csv"
        if not args.csv.exists():
            generate(args.rows, args.csv.with_suffix(".part"))
            args.csv.with_suffix(".part").rename(args.csv)

    from tests.support.postgres import postgres_cluster

    engines = {"SQLite": None} if args.sqlite_only else {"SQLite": None, "PostgreSQL": None}
    with tempfile.TemporaryDirectory(prefix="anonymizer-pages-bench-") as tmp:
        out = {}
        for engine in engines:
            folder = Path(tmp) / engine
            folder.mkdir()
            if engine == "SQLite":
                out[engine] = _run(f"sqlite:///{folder / 'db.sqlite3'}", args, folder)
            else:
                with postgres_cluster() as url:
                    out[engine] = _run(url, args, folder)
    for engine, result in out.items():
        print(
            f"{engine}: {result['rows']:,} rows, {result['classes']:,} classes, "
            f"{result['events']:,} events (built in {result['setup_s']} s)",
            file=sys.stderr,
        )
        for name, figures in result["pages"].items():
            flag = "" if figures["ms"] < 300 else "  <-- over 300 ms"
            print(
                f"  {name:<24} {figures['ms']:7.1f} ms {figures['kb']:7.1f} KB "
                f"{figures['queries']:3d} queries{flag}",
                file=sys.stderr,
            )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
