"""Concurrent statistics releases on PostgreSQL: several releases run at the same moment by
processes of their own (as Celery workers would), through the service path, against a budget
that only some of them fit. Exactly those are ready for review; the others fail with the
reason, spend nothing, and the ledger never holds more than the budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

import psycopg
import pytest

from tests.support import processes

pytestmark = pytest.mark.postgres

SCENARIO = [sys.executable, "-m", "tests.support.stats_scenario"]


@pytest.fixture(scope="module")
def environment(tmp_path_factory, postgres_database):
    workdir = tmp_path_factory.mktemp("statistics")
    env = processes.app_environment(
        postgres_database, "redis://127.0.0.1:1/0", workdir / "media", workdir
    )
    processes.manage(env, "migrate", "--noinput")
    return env


def step(env: dict, *args: str) -> dict:
    done = subprocess.run(
        [*SCENARIO, *args], cwd=processes.REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_at_once(env: dict, requests: list[int], go) -> list[dict]:
    running = [
        subprocess.Popen(
            [*SCENARIO, "run", str(request), str(go)],
            cwd=processes.REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for request in requests
    ]
    try:
        for process in running:  # every process is up, connected and waiting
            assert process.stdout.readline().strip() == "ready", process.stderr.read()
        go.touch()
        outcomes = []
        for process in running:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            outcomes.append(json.loads(out.strip().splitlines()[-1]))
        return outcomes
    finally:
        for process in running:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_concurrent_releases_spend_at_most_the_budget_and_the_rest_fail_with_the_reason(
    environment, tmp_path
):
    """Six releases of ε 0.3 run at once against a budget of 1: exactly three fit."""
    made = step(environment, "setup", "1.0", "6", "0.3")
    outcomes = run_at_once(environment, made["requests"], tmp_path / "go")
    ready = [o for o in outcomes if o["state"] == "ready"]
    failed = [o for o in outcomes if o["state"] == "failed"]
    assert len(ready) == 3 and len(failed) == 3, outcomes
    assert all("needs ε 0.3, but only ε 0.1" in o["error"] for o in failed), failed

    url = environment["DATABASE_URL"].replace("postgres://", "postgresql://")
    with psycopg.connect(url) as connection:
        spent = connection.execute(
            "SELECT statistics_release_id, epsilon, epsilon_remaining FROM releases_budgetentry "
            "WHERE dataset_id = %s AND kind = 'dp_spend'",
            [made["dataset"]],
        ).fetchall()
        files = connection.execute(
            "SELECT request_id, format FROM releases_releasefile ORDER BY request_id, format"
        ).fetchall()
    assert sorted(r for r, _, _ in spent) == sorted(o["request"] for o in ready)
    assert sum(Decimal(str(e)) for _, e, _ in spent) == Decimal("0.9") <= 1
    # Each spend saw the ones before it, under the lock.
    assert sorted(Decimal(str(left)) for _, _, left in spent) == [
        Decimal("0.1"),
        Decimal("0.4"),
        Decimal("0.7"),
    ]
    # Only the releases that spent have tables.
    assert files == sorted((o["request"], f) for o in ready for f in ("csv", "json"))
