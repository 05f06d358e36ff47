"""Adult-like test files of any size: ``python bench/generate.py ROWS OUT.csv``.

Each row is a random Adult row (tests/data/adult/adult.csv) whose age and native-country come
from two other random rows (seeded), so every value is covered by the Adult hierarchies and the
combinations are more varied than Adult's own. 1,000,000 rows make about 82 MB of
semicolon-separated text, 12,000,000 rows about 1 GB. Written in chunks: memory stays small
whatever the size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from common import ADULT

SEED = 2024
CHUNK_ROWS = 1_000_000


def adult() -> pd.DataFrame:
    return pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)


def generate(rows: int, path: Path, seed: int = SEED, delimiter: str = ";") -> Path:
    """Write ``rows`` adult-like rows to ``path`` (header included)."""
    source = adult()
    values = {c: source[c].to_numpy() for c in source.columns}
    n = len(source)
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8", newline="") as out:
        written = 0
        while written < rows:
            size = min(CHUNK_ROWS, rows - written)
            picked = rng.integers(0, n, size)
            chunk = pd.DataFrame({c: v[picked] for c, v in values.items()})
            chunk["age"] = values["age"][rng.integers(0, n, size)]
            chunk["native-country"] = values["native-country"][rng.integers(0, n, size)]
            chunk.to_csv(out, sep=delimiter, index=False, header=written == 0, lineterminator="\n")
            written += size
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    generate(args.rows, args.out, args.seed)
    size = args.out.stat().st_size
    print(
        f"{args.rows:,} rows, {size / 1e6:.0f} MB -> {args.out} ({time.perf_counter() - t0:.1f} s)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
