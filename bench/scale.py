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
import re
import sys
import tempfile
import time
from pathlib import Path

from common import anonymize_command, run_child
from generate import generate

STAGE = re.compile(
    r"stage (?P<name>[^:]+): (?P<rows>[\d,]+) rows in (?P<seconds>[\d.]+) s "
    r"\((?P<rate>[\d,]+) rows/s\), peak RSS (?P<peak>[\d,]+) MB"
)


def command(source: Path, out: Path, extra: list[str]) -> list[str]:
    report = out.with_suffix(".json")
    return anonymize_command(source, out, "--seed", "1", "--verbose", *extra, report=report)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark `manage.py anonymize` at scale.")
    parser.add_argument("--rows", type=int, action="append", help="rows (repeatable)")
    parser.add_argument(
        "--dir", type=Path, help="where the data goes (default: a temporary folder)"
    )
    parser.add_argument("--chunk-rows", type=int, help="passed to the command")
    parser.add_argument("--in-memory", action="store_true", help="passed to the command")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument(
        "--spark",
        metavar="MASTER",
        help="passed to the command: the run on Spark (local[N] or spark://HOST:PORT; the "
        "stages' peak is then the driver's Python process, the JVMs are apart)",
    )
    args = parser.parse_args(argv)
    extra = ["--chunk-rows", str(args.chunk_rows)] if args.chunk_rows else []
    extra += ["--in-memory"] if args.in_memory else []
    extra += ["--spark", args.spark] if args.spark else []
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
            child = run_child(command(source, out, extra))
            if child.status != 0:
                print(f"  failed (exit {child.status}): {child.stderr.strip()[-500:]}")
                sys.exit(1)
            print(f"manage.py anonymize, {rows:,} rows: {child.stdout.strip()}")
            wall, peak = child.wall, child.peak_mb
            for match in STAGE.finditer(child.stderr):
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
