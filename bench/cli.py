"""The command line as typed, on 1,000,000 adult-like rows: ``python bench/cli.py``.

Runs ``python manage.py anonymize million.csv --out ... --qi age=... (8 quasi-identifiers with
the Adult hierarchies) --k 5 --suppression-limit 0.05`` in a subprocess and prints its wall time
and peak memory (the child's ``ru_maxrss``, read with ``os.wait4``). The input is made by
``bench/generate.py`` (seeded) unless ``--csv`` names one. Goal: under 5 s and 1.5 GB.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from common import anonymize_command, run_child
from generate import generate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark `manage.py anonymize`.")
    parser.add_argument("--csv", type=Path, help="input (default: 1M generated rows)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        source = args.csv or generate(args.rows, Path(tmp) / "million.csv")
        out = Path(tmp) / "out.csv"
        command = anonymize_command(source, out, report=Path(tmp) / "report.json")
        size = source.stat().st_size
        print(f"manage.py anonymize on {source.name} ({size / 1e6:.0f} MB), k=5, 5 % suppression")
        for attempt in range(args.repeat):
            child = run_child(command)
            if child.status != 0:
                print(f"  failed (exit {child.status}): {child.stderr.strip()[-500:]}")
                sys.exit(1)
            print(
                f"  run {attempt + 1}: {child.wall:.2f} s, peak {child.peak_mb:.0f} MB "
                f"(goal < 5 s, < 1536 MB), extract {out.stat().st_size / 1e6:.0f} MB"
            )


if __name__ == "__main__":
    main()
