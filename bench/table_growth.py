"""How much each table (and the file storage) grows per release: rows and bytes, scaled to
10,000 releases.

    python bench/table_growth.py [--releases 200] [--rows 300] [--statistics-every 4]

In a throwaway SQLite database and MEDIA_ROOT: a steward's dataset of ``--rows`` people
(tests/support/factories.synthetic_csv) is uploaded, profiled and tagged, with a privacy budget
large enough for every statistics release. Then ``--releases`` releases go through the services
as people would make them: requested, run (the worker's body, here), approved by an officer
naming a recipient, the terms accepted and the file downloaded once; every
``--statistics-every``-th release is a differentially private statistics release (a count and a
mean: two budget entries), the others k=5 extracts. The rows of every table and its bytes (data
and indexes, from SQLite's ``dbstat``) are measured before and after; printed per release and
per 10,000 releases, beside the bytes the storage gained.

Equivalence classes grow with the data (one row per class of each release): with another
dataset, multiply that line by its classes per release.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCALE = 10_000


def measure(database: Path) -> dict[str, tuple[int, int]]:
    """Rows and bytes (data and its indexes) of every table of the SQLite file."""
    import sqlite3

    with sqlite3.connect(database) as connection:
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        owner = dict(
            connection.execute(
                "SELECT name, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index')"
            ).fetchall()
        )
        sizes: dict[str, int] = dict.fromkeys(tables, 0)
        for name, pages in connection.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name)
            if table in sizes:
                sizes[table] += pages
        return {
            table: (
                connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0],
                sizes[table],
            )
            for table in tables
        }


def storage_bytes(root: Path) -> tuple[int, int]:
    files = [path for path in root.rglob("*") if path.is_file()]
    return len(files), sum(path.stat().st_size for path in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", type=int, default=200)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--statistics-every", type=int, default=4)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="anonymizer-growth-"))
    database = workdir / "db.sqlite3"
    os.environ.update(
        DJANGO_SETTINGS_MODULE="anonymizer_site.settings",
        DATABASE_URL=f"sqlite:///{database}",
        MEDIA_ROOT=str(workdir / "media"),
        VAR_DIR=str(workdir),
    )
    # Django is set up from the environment above, so its modules are imported after it.
    import django

    django.setup()
    from unittest import mock

    from django.core.management import call_command

    from releases.background import outbox as dispatch
    from releases.core import roles
    from releases.datasets import budget
    from releases.models import ReleaseRequest, Role
    from releases.requests.services import Sharing
    from releases.statistics import run as statistics_run
    from releases.statistics import services as statistics
    from tests.conftest import make_user
    from tests.support import factories, workflow

    call_command("migrate", verbosity=0)
    steward = make_user("steward", roles.STEWARDS)
    officer = make_user("officer", roles.OFFICERS)
    recipient = make_user("recipient", roles.RECIPIENTS)
    queries = [
        {"kind": "count", "epsilon": 0.01},
        {"kind": "mean", "column": "age", "lower": 0, "upper": 120, "epsilon": 0.01},
    ]
    # Work runs here, one release after the other: nothing is sent to a broker.
    with mock.patch.object(dispatch, "send"):
        dataset = factories.make_dataset(steward, factories.synthetic_csv(args.rows), "people.csv")
        workflow.tag(
            steward,
            dataset,
            {
                "name": Role.IDENTIFIER,
                "age": Role.QUASI_IDENTIFIER,
                "sex": Role.QUASI_IDENTIFIER,
                "zip": Role.QUASI_IDENTIFIER,
                "diagnosis": Role.SENSITIVE,
            },
        )
        budget.set_budget(officer, dataset, str(args.releases), "0")
        before, files_before = measure(database), storage_bytes(workdir / "media")
        started = time.perf_counter()
        kinds = {"extract": 0, "statistics": 0}
        for number in range(1, args.releases + 1):
            if args.statistics_every and number % args.statistics_every == 0:
                release = statistics.request_statistics(
                    steward, dataset, [dict(q) for q in queries], Sharing()
                )
                statistics_run.run_statistics(release.pk)
                kinds["statistics"] += 1
            else:
                release = workflow.run(workflow.request_release(steward, dataset, k=5))
                kinds["extract"] += 1
            release = workflow.approve(
                officer, ReleaseRequest.objects.get(pk=release.pk), recipient
            )
            assert release.state == ReleaseRequest.State.APPROVED, release.error
            workflow.download(recipient, release)
        elapsed = time.perf_counter() - started
    after, files_after = measure(database), storage_bytes(workdir / "media")

    n = args.releases
    print(
        f"{n} releases ({kinds['extract']} extracts, {kinds['statistics']} statistics) of a "
        f"{args.rows}-row dataset in {elapsed:.0f} s; growth per release and per {SCALE:,}:"
    )
    print(f"| table | rows per release | rows per {SCALE:,} | MB per {SCALE:,} |")
    print("|---|---:|---:|---:|")
    total_bytes = 0
    for table in sorted(after, key=lambda t: -(after[t][1] - before.get(t, (0, 0))[1])):
        rows = after[table][0] - before.get(table, (0, 0))[0]
        size = after[table][1] - before.get(table, (0, 0))[1]
        if rows == 0 and size == 0:
            continue
        total_bytes += size
        print(
            f"| {table} | {rows / n:,.2f} | {rows * SCALE / n:,.0f} | "
            f"{size * SCALE / n / 1024**2:,.1f} |"
        )
    print(f"| database, all tables | | | {total_bytes * SCALE / n / 1024**2:,.1f} |")
    count = files_after[0] - files_before[0]
    size = files_after[1] - files_before[1]
    print(
        f"| storage: files | {count / n:,.2f} | {count * SCALE / n:,.0f} | "
        f"{size * SCALE / n / 1024**2:,.1f} |"
    )
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
