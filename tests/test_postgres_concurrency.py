"""Concurrent decisions on PostgreSQL: two officers acting at once give one consistent outcome.

Each officer acts from a process of its own (as two web workers would), against a throwaway
PostgreSQL cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psycopg
import pytest

from tests.support import processes

pytestmark = pytest.mark.postgres

SCENARIO = [sys.executable, "-m", "tests.support.pg_scenario"]


@pytest.fixture
def scenario(postgres_database, tmp_path):
    """A fresh schema with a request ready for review; yields a function running a step."""
    database_url = postgres_database
    env = processes.app_environment(
        database_url, "redis://127.0.0.1:1/0", tmp_path / "media", tmp_path
    )
    with psycopg.connect(
        database_url.replace("postgres://", "postgresql://"), autocommit=True
    ) as c:
        c.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
    processes.manage(env, "migrate", "--noinput")

    def step(*args: str, required: int = 1, background: bool = False):
        step_env = {**env, "REQUIRED_APPROVALS": str(required), "CELERY_TASK_ALWAYS_EAGER": "1"}
        command = [*SCENARIO, *args]
        if background:
            return subprocess.Popen(
                command,
                cwd=processes.REPO,
                env=step_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        done = subprocess.run(
            command, cwd=processes.REPO, env=step_env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    step.url = database_url.replace("postgres://", "postgresql://")
    step.env = env
    return step


def outcome_of(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def database_state(url: str, request_id: int) -> tuple[str, list[tuple[str, str]]]:
    with psycopg.connect(url) as connection:
        state = connection.execute(
            "SELECT state FROM releases_releaserequest WHERE id = %s", [request_id]
        ).fetchone()[0]
        votes = connection.execute(
            "SELECT u.username, r.decision FROM releases_review r "
            "JOIN auth_user u ON u.id = r.reviewer_id WHERE r.request_id = %s ORDER BY u.username",
            [request_id],
        ).fetchall()
    return state, votes


def at_once(scenario, request_id: int, votes: list[tuple[str, str]], required: int) -> list[dict]:
    start = time.time() + 3  # both processes are up and waiting by then
    running = [
        scenario(
            "review",
            str(request_id),
            user,
            decision,
            str(start),
            required=required,
            background=True,
        )
        for user, decision in votes
    ]
    return [outcome_of(p) for p in running]


def test_two_approvals_at_once_when_one_is_required(scenario):
    request_id = scenario("setup")["request"]
    outcomes = at_once(scenario, request_id, [("officer1", "approve"), ("officer2", "approve")], 1)
    assert sorted(o["ok"] for o in outcomes) == [False, True]
    assert "approved" in next(o["error"] for o in outcomes if not o["ok"])
    state, votes = database_state(scenario.url, request_id)
    assert state == "approved" and len(votes) == 1


def test_approve_and_reject_at_once_give_one_decision(scenario):
    request_id = scenario("setup")["request"]
    outcomes = at_once(scenario, request_id, [("officer1", "approve"), ("officer2", "reject")], 1)
    winner = next(o for o in outcomes if o["ok"])
    assert sum(o["ok"] for o in outcomes) == 1
    state, votes = database_state(scenario.url, request_id)
    assert state == winner["state"] and len(votes) == 1


def test_two_required_approvals_at_once_both_count(scenario):
    """Without the row lock each would count only its own approval and leave it in review."""
    request_id = scenario("setup")["request"]
    outcomes = at_once(scenario, request_id, [("officer1", "approve"), ("officer2", "approve")], 2)
    assert all(o["ok"] for o in outcomes)
    assert sorted(o["state"] for o in outcomes) == ["approved", "ready"]
    state, votes = database_state(scenario.url, request_id)
    assert state == "approved"
    assert votes == [("officer1", "approve"), ("officer2", "approve")]
    # Both votes wrote audit events at once: each still follows the one before it.
    with psycopg.connect(scenario.url) as connection:
        links = connection.execute(
            "SELECT prev_hash, hash FROM releases_auditevent ORDER BY id"
        ).fetchall()
    assert all(prev == links[i - 1][1] for i, (prev, _) in enumerate(links) if i)
    assert "chain holds" in processes.manage(scenario.env, "verify_audit")


def test_a_decision_waits_for_a_concurrent_one_to_commit(scenario):
    request_id = scenario("setup")["request"]
    with psycopg.connect(scenario.url) as holder:
        # Another transaction holds the request row, as a decision in progress would.
        holder.execute(
            "SELECT id FROM releases_releaserequest WHERE id = %s FOR UPDATE", [request_id]
        )
        waiting = scenario("review", str(request_id), "officer1", "approve", "0", background=True)
        time.sleep(2)
        assert waiting.poll() is None, "the review did not wait for the row lock"
        holder.execute(
            "UPDATE releases_releaserequest SET state = 'rejected' WHERE id = %s", [request_id]
        )
        holder.commit()
    outcome = outcome_of(waiting)
    assert outcome == {"ok": False, "error": outcome["error"]}
    assert "rejected" in outcome["error"]
    assert database_state(scenario.url, request_id) == ("rejected", [])
