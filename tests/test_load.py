"""A short load run on the production shape (gunicorn, PostgreSQL, Redis, a Celery worker) on
loopback: every endpoint answers every simulated person without an error. The timing figures
belong to ``bench/load.py`` (docs/operations.md), not to this test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.load]


def test_a_short_load_run_has_no_errors(tmp_path):
    figures = tmp_path / "load.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "load.py"),
            "--users",
            "10",
            "--seconds",
            "15",
            "--ready",
            "2",
            "--events",
            "500",
            "--json",
            str(figures),
        ],
        cwd=ROOT,
        check=False,
        timeout=400,
    )
    result = json.loads(figures.read_text())
    by_name = {row["name"]: row for row in result["endpoints"]}
    for name in (
        "review queue",
        "request page",
        "classes table",
        "recipient page",
        "download CSV",
        "Aggregated",
    ):
        assert by_name[name]["requests"] > 0, name
    assert {name: row["errors"] for name, row in by_name.items() if row["errors"]} == {}
