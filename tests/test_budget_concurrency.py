"""Concurrent spending: many releases at once never spend more than the budget.

Each spend runs in a process of its own (as web and worker processes would), all released at
the same moment, against a throwaway PostgreSQL cluster and, for the embedded default, a
SQLite file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from tests.support import processes

# Each spend is a process of its own, on either database.
pytestmark = pytest.mark.process

SCENARIO = [sys.executable, "-m", "tests.support.budget_scenario"]


@pytest.fixture(
    scope="module",
    params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"],
)
def database(request, tmp_path_factory):
    workdir = tmp_path_factory.mktemp(request.param)
    if request.param == "postgres":
        return request.getfixturevalue("postgres_database"), workdir
    return f"sqlite:///{workdir / 'db.sqlite3'}", workdir


@pytest.fixture(scope="module")
def environment(database):
    url, workdir = database
    env = processes.app_environment(url, "redis://127.0.0.1:1/0", workdir / "media", workdir)
    processes.manage(env, "migrate", "--noinput")
    return env


def run(env: dict, *args: str) -> dict:
    done = subprocess.run(
        [*SCENARIO, *args], cwd=processes.REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def spend_at_once(env: dict, dataset: int, amounts: list[str], go: Path) -> list[dict]:
    running = [
        subprocess.Popen(
            [*SCENARIO, "spend", str(dataset), amount, str(go)],
            cwd=processes.REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for amount in amounts
    ]
    try:
        for process in running:  # every process is up, connected and waiting
            assert process.stdout.readline().strip() == "ready", process.stderr.read()
        go.touch()
        outcomes = []
        for process in running:
            out, err = process.communicate(timeout=60)
            assert process.returncode == 0, err
            outcomes.append(json.loads(out.strip().splitlines()[-1]))
        return outcomes
    finally:
        for process in running:
            if process.poll() is None:
                process.kill()
                process.wait()


def ledger(env: dict, dataset: int) -> list[Decimal]:
    url = env["DATABASE_URL"]
    query = "SELECT epsilon FROM releases_budgetentry WHERE dataset_id = %s AND kind = 'dp_spend'"
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
            rows = connection.execute(query.replace("%s", "?"), [dataset]).fetchall()
    else:
        with psycopg.connect(url.replace("postgres://", "postgresql://")) as connection:
            rows = connection.execute(query, [dataset]).fetchall()
    return [Decimal(str(r[0])) for r in rows]


def test_concurrent_spends_never_exceed_the_budget(environment, tmp_path):
    """12 releases of ε 0.3 at once against a budget of 1: exactly three fit."""
    dataset = run(environment, "setup", "1.0")["dataset"]
    outcomes = spend_at_once(environment, dataset, ["0.3"] * 12, tmp_path / "go")
    granted = [o for o in outcomes if o["ok"]]
    refused = [o for o in outcomes if not o["ok"]]
    assert len(granted) == 3, outcomes
    # Each granted spend saw the ones before it: what remained after each is distinct.
    assert sorted(Decimal(o["remaining"]) for o in granted) == [
        Decimal("0.1"),
        Decimal("0.4"),
        Decimal("0.7"),
    ]
    assert all("only ε 0.1 of the privacy budget" in o["error"] for o in refused), refused
    spent = ledger(environment, dataset)
    assert len(spent) == 3 and sum(spent) == Decimal("0.9") <= 1


def test_a_spend_waits_for_a_concurrent_one_and_sees_it(environment, tmp_path):
    """While another transaction holds the budget (PostgreSQL: its row lock; SQLite: the
    write lock every transaction takes at BEGIN IMMEDIATE), a spend waits, then sees what
    that transaction spent. Without the lock it would read the old sum and go ahead."""
    dataset = run(environment, "setup", "1.0")["dataset"]
    url = environment["DATABASE_URL"]
    go = tmp_path / "go"
    go.touch()
    insert = (
        "INSERT INTO releases_budgetentry (created_at, dataset_id, dataset_name, kind, "
        "epsilon, delta, detail) VALUES ('2026-01-01 00:00:00', {0}, 'people', 'dp_spend', "
        "'0.6', '0', '{{}}')"
    )
    if url.startswith("sqlite"):
        import sqlite3

        holder = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        sql, parameter = insert.format("?"), [dataset]
    else:
        holder = psycopg.connect(url.replace("postgres://", "postgresql://"))
        holder.execute(
            "SELECT id FROM releases_privacybudget WHERE dataset_id = %s FOR UPDATE", [dataset]
        )
        sql, parameter = insert.format("%s"), [dataset]
    try:
        waiting = subprocess.Popen(
            [*SCENARIO, "spend", str(dataset), "0.6", str(go)],
            cwd=processes.REPO,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert waiting.stdout.readline().strip() == "ready"
        time.sleep(1.5)
        assert waiting.poll() is None, "the spend did not wait for the concurrent one"
        # Meanwhile the holder spends 0.6 itself, as a concurrent release would.
        holder.execute(sql, parameter)
        if url.startswith("sqlite"):
            holder.execute("COMMIT")
        else:
            holder.commit()
    finally:
        holder.close()
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    outcome = json.loads(out.strip().splitlines()[-1])
    assert outcome["ok"] is False and "only ε 0.4" in outcome["error"], outcome
    assert ledger(environment, dataset) == [Decimal("0.6")]
