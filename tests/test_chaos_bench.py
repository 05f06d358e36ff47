"""The chaos benchmark (``bench/chaos.py``) as a user runs it: a short run prints its table and
exits 0 when every job reached a final state and nothing was lost or came back; Ctrl-C stops
everything it started and removes its folders. Its figures belong to the benchmark
(docs/operations.md), not to this test."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAOS = [sys.executable, str(ROOT / "bench" / "chaos.py")]

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.postgres]

HEADER = re.compile(
    r"PostgreSQL postgres://\S+:(\d+)/\S+, Redis redis://\S+:(\d+)/0, folders (\S+) (\S+)"
)


def started_with(output: str) -> tuple[list[int], list[Path]]:
    """The ports and folders the benchmark says it uses."""
    match = HEADER.search(output)
    assert match, output
    return [int(match[1]), int(match[2])], [Path(match[3]), Path(match[4])]


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_a_quick_run_with_a_kill_prints_the_table_and_meets_its_targets():
    done = subprocess.run(
        [*CHAOS, "--quick", "--kinds", "run", "--faults", "kill"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    row = re.search(
        r"^kill +run +1 +1 +(\d+)% +1 +[\d.]+ / [\d.]+ +[\d.]+ +(\d+) +(\d+)", done.stdout, re.M
    )
    assert row and row.groups() == ("100", "0", "0"), done.stdout
    assert "Summary: 1 trials, 1 jobs, 100 % final" in done.stdout
    assert "(attempt 2)" in done.stdout  # the killed attempt was followed by another
    ports, folders = started_with(done.stdout)
    assert [p for p in ports if answers(p)] == []
    assert [f for f in folders if f.exists()] == []


def test_unknown_names_are_refused_with_a_sentence():
    done = subprocess.run(
        [*CHAOS, "--faults", "flood"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "unknown flood: choose from kill, redis-stop, redis-restart, postgres-stop" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr


def test_ctrl_c_stops_every_server_and_removes_the_folders():
    process = subprocess.Popen(
        [*CHAOS, "--quick", "--kinds", "profiling", "--faults", "redis-stop"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline()]
        ports, folders = started_with(lines[0])
        deadline = time.monotonic() + 60
        while "the worker starts" not in lines[-1] and time.monotonic() < deadline:
            lines.append(process.stdout.readline())
        assert all(answers(p) for p in ports), lines
        time.sleep(2)  # the worker is starting: its processes exist
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, "".join(lines) + rest
    assert "Interrupted: stopping everything." in rest
    assert [p for p in ports if answers(p)] == []
    assert [f for f in folders if f.exists()] == []
    leftover = subprocess.run(
        ["ps", "-eo", "args"], capture_output=True, text=True, check=True
    ).stdout
    assert str(folders[0]) not in leftover
