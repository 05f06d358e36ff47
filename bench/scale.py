"""The command line at scale, stage by stage: ``python bench/scale.py --rows 1000000 [--rows
20000000 ...]``.

For each size, ``bench/generate.py`` writes that many adult-like rows (seeded) into a temporary
folder, or ``--dir`` (where ``adult-ROWS.csv`` is reused if present; about 82 MB per million
rows: 20 million rows are 1.7 GB), then ``python manage.py anonymize FILE --out ...
--report ... --qi age=... (the 8 Adult quasi-identifiers with their hierarchies) --k 5
--suppression-limit 0.05 --seed 1 --verbose`` runs as typed in a child process. Its ``--verbose`` lines give each stage's rows,
time and peak resident memory (the process's VmHWM, reset at each stage): reading and the
frequency table, the search, releasing and writing the rows. Printed too: the whole run's wall
time and peak memory (the largest stage's: the command restarts the kernel's peak at each
stage, so the child's ``ru_maxrss`` holds the last stage's only). The files are deleted
afterwards unless ``--keep``.

Memory is what this measures reliably; on a shared machine the times are upper bounds.
Goal (issue 23): 20 million rows under 1.5 GB.
"""

from __future__ import annotations

import argparse
import os
import re
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
STAGE = re.compile(
    r"stage (?P<name>[^:]+): (?P<rows>[\d,]+) rows in (?P<seconds>[\d.]+) s "
    r"\((?P<rate>[\d,]+) rows/s\), peak RSS (?P<peak>[\d,]+) MB"
)


def command(source: Path, out: Path, extra: list[str]) -> list[str]:
    args = [sys.executable, "manage.py", "anonymize", str(source), "--out", str(out)]
    args += ["--report", str(out.with_suffix(".json")), "--qi"]
    args += [f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}" for q in QIS]
    return [*args, "--k", "5", "--suppression-limit", "0.05", "--seed", "1", "--verbose", *extra]


def run(args: list[str]) -> tuple[float, float, int, str, str]:
    """(wall seconds, peak MB, exit status, stdout, stderr) of a child process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0), err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), stdout, stderr


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark `manage.py anonymize` at scale.")
    parser.add_argument("--rows", type=int, action="append", help="rows (repeatable)")
    parser.add_argument(
        "--dir", type=Path, help="where the data goes (default: a temporary folder)"
    )
    parser.add_argument("--chunk-rows", type=int, help="passed to the command")
    parser.add_argument("--in-memory", action="store_true", help="passed to the command")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args(argv)
    extra = ["--chunk-rows", str(args.chunk_rows)] if args.chunk_rows else []
    extra += ["--in-memory"] if args.in_memory else []
    # A folder given is used as it is (a file of the right name there is reused); else a
    # temporary one.
    folder = args.dir or Path(tempfile.mkdtemp(prefix="scale-"))
    try:
        for rows in args.rows or [1_000_000]:
            source = folder / f"adult-{rows}.csv"
            if not source.exists():
                started = time.perf_counter()
                generate(rows, source)
                print(
                    f"generated {rows:,} rows, {source.stat().st_size / 1e6:,.0f} MB "
                    f"({time.perf_counter() - started:.0f} s)",
                    flush=True,
                )
            out = folder / f"released-{rows}.csv"
            wall, peak, status, stdout, stderr = run(command(source, out, extra))
            if status != 0:
                print(f"  failed (exit {status}): {stderr.strip()[-500:]}")
                sys.exit(1)
            print(f"manage.py anonymize, {rows:,} rows: {stdout.strip()}")
            for match in STAGE.finditer(stderr):
                print(
                    f"  {match['name']:<24} {match['seconds']:>8} s {match['rate']:>12} rows/s "
                    f"peak {match['peak']:>7} MB"
                )
                # Each stage restarts the peak (ru_maxrss too): the run's is the largest.
                peak = max(peak, float(match["peak"].replace(",", "")))
            print(
                f"  {'whole run':<24} {wall:>8.1f} s {rows / wall:>12,.0f} rows/s "
                f"peak {peak:>7,.0f} MB (goal at 20M: < 1,536 MB)",
                flush=True,
            )
            if not args.keep:
                for path in (source, out, out.with_suffix(".json")):
                    path.unlink(missing_ok=True)
    finally:
        if not args.keep and args.dir is None:
            for path in folder.iterdir():
                path.unlink()
            folder.rmdir()


if __name__ == "__main__":
    main()
