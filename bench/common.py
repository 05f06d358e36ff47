"""What the benchmarks share: where the repository and the Adult data are, Adult's eight
quasi-identifiers, ``manage.py anonymize`` as typed on them, and a child process measured (wall
time and peak memory).

The scripts are run as ``python bench/NAME.py``, so this folder is on ``sys.path`` and they
import it as ``common``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "tests" / "data" / "adult"
#: Adult's quasi-identifiers, each with ARX's hierarchy in :data:`ADULT`.
QIS = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "occupation",
    "race",
    "salary-class",
    "sex",
]


def hierarchy_file(column: str) -> Path:
    """ARX's hierarchy of an Adult column."""
    return ADULT / f"adult_hierarchy_{column}.csv"


def anonymize_command(
    source: Path, out: Path, *extra: str, report: Path | None = None
) -> list[str]:
    """``python manage.py anonymize SOURCE --out OUT [--report REPORT] --qi (the 8
    quasi-identifiers with their hierarchies) --k 5 --suppression-limit 0.05 EXTRA...``, to run
    in :data:`ROOT`."""
    args = [sys.executable, "manage.py", "anonymize", str(source), "--out", str(out)]
    args += ["--report", str(report)] if report is not None else []
    args += ["--qi", *(f"{q}={hierarchy_file(q)}" for q in QIS)]
    return [*args, "--k", "5", "--suppression-limit", "0.05", *extra]


@dataclass
class Child:
    """A finished child process: its wall time, peak memory (``ru_maxrss``), exit status and
    output."""

    wall: float
    peak_mb: float
    status: int
    stdout: str
    stderr: str


def run_child(args: list[str]) -> Child:
    """Run ``args`` in :data:`ROOT` and measure it (``os.wait4`` gives the child's own
    ``ru_maxrss``); its output goes to temporary files, so a long one cannot stall it."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0), err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    return Child(wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), stdout, stderr)


def peak_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports ``ru_maxrss`` in kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child_case(args: list[str], timeout: float) -> dict:
    """Run a benchmark case in a fresh process (``args``, in :data:`ROOT`) that prints its
    figures as one JSON line last: those figures with ``wall`` (the process's seconds), or
    ``error`` saying why there are none."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - started
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    figures = json.loads(lines[-1])
    figures["wall"] = wall
    return figures
