"""The command line as typed, on 1,000,000 adult-like rows: ``python bench/cli.py``.

Runs ``python manage.py anonymize million.csv --out ... --qi age=... (8 quasi-identifiers with
the Adult hierarchies) --k 5 --suppression-limit 0.05`` in a subprocess and prints its wall time
and peak memory (the child's ``ru_maxrss``, read with ``os.wait4``). The input is made by
``bench/generate.py`` (seeded) unless ``--csv`` names one. Goal: under 5 s and 1.5 GB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from generate import ADULT, generate  # noqa: E402

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


def run_command(args: list[str]) -> tuple[float, float, int, str]:
    """(wall seconds, peak MB, exit status, stderr) of a child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.stdout and proc.stdout.close()
    proc.stderr and proc.stderr.close()
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), stderr


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark `manage.py anonymize`.")
    parser.add_argument("--csv", type=Path, help="input (default: 1M generated rows)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        source = args.csv or generate(args.rows, Path(tmp) / "million.csv")
        out = Path(tmp) / "out.csv"
        command = [sys.executable, "manage.py", "anonymize", str(source), "--out", str(out)]
        command += ["--report", str(Path(tmp) / "report.json"), "--qi"]
        command += [f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}" for q in QIS]
        command += ["--k", "5", "--suppression-limit", "0.05"]
        size = source.stat().st_size
        print(f"manage.py anonymize on {source.name} ({size / 1e6:.0f} MB), k=5, 5 % suppression")
        for attempt in range(args.repeat):
            wall, peak, status, stderr = run_command(command)
            if status != 0:
                print(f"  failed (exit {status}): {stderr.strip()[-500:]}")
                sys.exit(1)
            print(
                f"  run {attempt + 1}: {wall:.2f} s, peak {peak:.0f} MB "
                f"(goal < 5 s, < 1536 MB), extract {out.stat().st_size / 1e6:.0f} MB"
            )


if __name__ == "__main__":
    main()
