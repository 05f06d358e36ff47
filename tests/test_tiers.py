"""The fast tier's guard: a test that starts a process without a full-tier marker fails, and
the message names the marker to add."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import processes, slow, tiers


@pytest.mark.parametrize(
    ("command", "marker"),
    [
        (["/usr/bin/redis-server", "--port", "6390"], "integration"),
        ([str(processes.VENV_BIN / "celery"), "-A", "anonymizer_site", "worker"], "integration"),
        ([sys.executable, "manage.py", "runserver", "127.0.0.1:8000", "--noreload"], "integration"),
        (["runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/initdb"], "postgres"),
        (["/usr/lib/postgresql/15/bin/pg_ctl", "-D", "data", "start"], "postgres"),
        (["/venv/lib/site-packages/playwright/driver/node", "cli.js", "run-driver"], "browser"),
        ([sys.executable, "bench/load.py", "--users", "10"], "load"),
        ([".venv-pycanon/bin/python", "-I", "tests/support/pycanon_check.py"], "pycanon"),
        ([sys.executable, "-m", "tests.support.budget_scenario", "spend"], "process"),
        ([sys.executable, "-c", "print(1)"], "process"),
    ],
)
def test_each_command_the_suite_starts_names_its_marker(command, marker):
    assert tiers.marker_for(command) == marker


def test_a_process_started_in_the_fast_tier_fails_the_test_with_the_marker_to_add():
    start = subprocess.Popen._execute_child
    with tiers.processes_forbidden("tests/test_x.py::test_y"):
        with pytest.raises(pytest.fail.Exception, match=r"test_y starts a process .*redis-server"):
            subprocess.run(["redis-server", "--port", "0"], check=False)
        with pytest.raises(pytest.fail.Exception, match=r"mark it @pytest\.mark\.process"):
            subprocess.run([sys.executable, "-c", "pass"], check=False)
        with pytest.raises(pytest.fail.Exception, match=r"forks a process"):
            os.fork()
        # Not an Exception: code under test that catches Exception cannot hide the start.
        with pytest.raises(pytest.fail.Exception, match="starts a process"):
            try:
                subprocess.check_output([sys.executable, "--version"])
            except Exception:  # noqa: BLE001 - the point of the test
                pytest.fail("swallowed")
    assert subprocess.Popen._execute_child is start


def test_a_process_fixture_without_its_marker_is_named():
    class Item:
        fixturenames = ("db", "worker", "browser")

        def __init__(self, *markers: str):
            self.markers = markers

        def get_closest_marker(self, name):
            return name if name in self.markers else None

    assert tiers.missing_markers(Item()) == [
        "worker needs @pytest.mark.integration",
        "browser needs @pytest.mark.browser",
    ]
    assert tiers.missing_markers(Item("browser", "integration")) == []
    assert tiers.in_full_tier(Item("slow")) and not tiers.in_full_tier(Item("django_db"))


def test_the_long_tests_list_matches_names_and_reports_entries_naming_no_test(monkeypatch):
    monkeypatch.setattr(
        slow, "SLOW", {"tests/m.py": ("long", ("test_a", "test_b[1]", "test_c[k2-*"))}
    )
    assert slow.reason("tests/m.py", "test_a[x]") == "long"  # every case of a function
    assert slow.reason("tests/m.py", "test_a") == "long"
    assert slow.reason("tests/m.py", "test_ab") is None
    assert slow.reason("tests/m.py", "test_b[1]") == "long"
    assert slow.reason("tests/m.py", "test_b[2]") is None
    assert slow.reason("tests/m.py", "test_c[k2-0.1]") == "long"
    assert slow.reason("tests/m.py", "test_c[k3-0.1]") is None
    assert slow.reason("tests/other.py", "test_a") is None
    collected = ["tests/m.py::test_a[x]", "tests/m.py::test_c[k2-0.1]", "tests/m.py::test_b[2]"]
    assert slow.stale(collected) == ["tests/m.py::test_b[1]"]
    assert slow.stale([]) == [
        "tests/m.py::test_a",
        "tests/m.py::test_b[1]",
        "tests/m.py::test_c[k2-*",
    ]


def test_every_long_test_listed_is_in_the_suite(request):
    if request.config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        pytest.skip("the list is checked when the whole suite is collected")
    assert slow.stale(request.config.stash[slow.COLLECTED]) == []
