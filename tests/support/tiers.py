"""The two tiers of the suite: ``pytest --fast`` (no process, browser or PostgreSQL) and the
whole suite. A test that needs more than the fast tier says so with one of ``FULL_TIER``'s
markers; in the fast tier, a test that starts a process without one fails, naming the marker."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator, Sequence
from typing import NoReturn

import pytest

#: The markers of the full tier (declared in pyproject.toml): a test carrying one of them needs
#: a process, a browser, PostgreSQL or a long run, and ``--fast`` leaves it out.
FULL_TIER = (
    "integration",
    "browser",
    "postgres",
    "s3",
    "load",
    "chaos",
    "process",
    "slow",
    "pycanon",
    "spark",
)


#: The shared fixtures that start processes or servers, and the marker a test using one needs.
FIXTURE_MARKERS = {
    "redis_url": "integration",
    "start_worker": "integration",
    "worker": "integration",
    "stack": "integration",
    "browser": "browser",
    "s3_server": "s3",
    "postgres_server": "postgres",
    "postgres_database": "postgres",
    "spark_cluster": "spark",
}


def in_full_tier(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in FULL_TIER)


def missing_markers(item: pytest.Item) -> list[str]:
    """The "fixture needs marker" line of each fixture of ``item`` whose marker it lacks."""
    return [
        f"{fixture} needs @pytest.mark.{marker}"
        for fixture, marker in FIXTURE_MARKERS.items()
        if fixture in getattr(item, "fixturenames", ()) and not item.get_closest_marker(marker)
    ]


def marker_for(command: Sequence[str | bytes | os.PathLike]) -> str:
    """The marker a test needs to start ``command``."""
    paths = [os.fsdecode(word) for word in command]
    words = [os.path.basename(path) for path in paths]
    if {"redis-server", "celery", "gunicorn", "runserver"} & set(words):
        return "integration"
    if {"initdb", "pg_ctl", "psql", "postgres", "runuser"} & set(words):
        return "postgres"
    if any("chromium" in path or "playwright" in path for path in paths):
        return "browser"
    if any("locust" in word for word in words) or "load.py" in words:
        return "load"
    if any(word in ("spark-class", "spark-submit", "java") for word in words):
        return "spark"
    # pycanon's checker, in the venv of its own (tests/support/pycanon.py).
    if any("pycanon" in path for path in paths):
        return "pycanon"
    return "process"


def refuse(nodeid: str, what: str, marker: str) -> NoReturn:
    # ``pytest.fail`` raises a BaseException: no ``except Exception`` in the code under test
    # can swallow it.
    pytest.fail(
        f"{nodeid} {what} in the fast tier: mark it @pytest.mark.{marker} "
        f"(or its whole module: pytestmark = pytest.mark.{marker}).",
        pytrace=False,
    )


@contextlib.contextmanager
def processes_forbidden(nodeid: str) -> Iterator[None]:
    """Within the block, starting a process fails ``nodeid``: ``subprocess`` and everything
    built on it (``subprocess.run``, asyncio's subprocesses, Playwright's driver), and
    ``os.fork`` / ``os.posix_spawn`` (``multiprocessing``)."""

    def execute_child(self, args, *rest, **kwargs) -> NoReturn:
        command = [args] if isinstance(args, str | bytes | os.PathLike) else list(args)
        shown = " ".join(os.fsdecode(word) for word in command)[:200]
        refuse(nodeid, f"starts a process ({shown})", marker_for(command))

    def fork(*args, **kwargs) -> NoReturn:
        refuse(nodeid, "forks a process", "process")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", execute_child)
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                patch.setattr(os, name, fork)
        yield


def refuse_in_fast_tier(request: pytest.FixtureRequest, marker: str, what: str) -> None:
    """For a server that runs in a thread of this process, which ``processes_forbidden`` does
    not see: the fast tier keeps only tests without ``marker``, so any test that gets here in
    the fast tier lacks it."""
    if request.config.getoption("fast"):
        refuse(request.node.nodeid, f"starts {what}", marker)
