"""``make run`` (scripts/run-dev.sh) keeps going when its Celery worker dies: the worker is
started again after a short back-off while Redis and the web server stay up; Ctrl-C still
stops everything it started."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.support.processes import REPO, child_pids, free_port, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.process]

STARTED = re.compile(r"Celery worker started \(pid (\d+),")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too (the script has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def children(pid: int) -> list[int]:
    return [child for child in child_pids(pid) if alive(child)]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def test_a_killed_worker_is_started_again_and_the_web_server_stays_up(tmp_path):
    port, redis_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG"}}
    env.update(VAR_DIR=str(tmp_path), PORT=str(port), REDIS_PORT=str(redis_port))
    log = tmp_path / "run-dev.out"
    with log.open("wb") as out:
        script = subprocess.Popen(
            ["bash", "scripts/run-dev.sh"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/accounts/login/"
    try:

        def workers() -> list[int]:
            return [int(pid) for pid in STARTED.findall(log.read_text())]

        wait_until(lambda: "Anonymizer is running" in log.read_text(), 240, "make run to start")
        assert answers(url)
        first = workers()[0]
        assert alive(first)

        orphans = wait_until(lambda: children(first), 60, "the worker's pool processes")
        os.kill(first, signal.SIGKILL)
        second = wait_until(lambda: workers()[1:], 60, "a new worker")[0]
        assert second != first
        output = log.read_text()
        assert f"The Celery worker (pid {first}) stopped with status 137; starting another" in (
            output
        )
        assert script.poll() is None  # the script still runs
        # What the dead worker left behind (its pool processes) was stopped with it.
        wait_until(lambda: not any(alive(pid) for pid in orphans), 10, "the old pool to stop")
        assert answers(url)  # the web server stayed up
        # The new worker is a real one: it reaches Redis and reports ready in its log.
        wait_until(
            lambda: alive(second) and (tmp_path / "worker.log").read_text().count(" ready.") >= 2,
            90,
            "the new worker to be ready",
        )
        assert answers(url)
        redis_pid = int(
            subprocess.run(
                ["redis-cli", "-p", str(redis_port), "info", "server"],
                capture_output=True,
                text=True,
                timeout=10,
            )
            .stdout.split("process_id:")[1]
            .split()[0]
        )
        pool = children(second)
        assert pool
        # Ctrl-C stops everything it started.
        os.killpg(script.pid, signal.SIGINT)
        script.wait(timeout=60)
        wait_until(
            lambda: not any(alive(pid) for pid in [second, redis_pid, *pool]),
            30,
            "the worker, its pool and Redis to stop",
        )
        assert not answers(url)
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
            script.wait(timeout=30)
