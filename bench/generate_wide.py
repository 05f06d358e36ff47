"""A wide table for the heuristic search: ``python bench/generate_wide.py OUT_DIR [--rows N]``.

Writes ``OUT_DIR/wide.csv`` (semicolon-separated, a header, ``--rows`` rows, 20 000 by default)
with 20 quasi-identifiers and one insensitive column, and for each quasi-identifier an ARX
hierarchy ``OUT_DIR/wide_hierarchy_<column>.csv`` (one line per value: the value, then its
generalization at each level, the last one ``*``). Everything is drawn from ``--seed``
(default 2025), so the same seed gives the same files byte for byte.

* ``n01`` ... ``n10``: whole numbers 0-99, each drawn around a row's latent "profile" so that
  the columns are correlated (as age, income and hours are); hierarchy: the value, intervals
  of 10, of 50, ``*`` (height 4).
* ``c01`` ... ``c10``: categories ``a`` ... with a skewed (Zipf-like) distribution of 8 to 16
  values; hierarchy: the value, groups of 4, groups of 8, ``*`` (height 4).

The lattice has 4^20 (about 1.1e12) transformations: far too many for the optimal search.
"""

from __future__ import annotations

import argparse
import string
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 2025
ROWS = 20_000
NUMERIC = [f"n{i:02d}" for i in range(1, 11)]
CATEGORICAL = [f"c{i:02d}" for i in range(1, 11)]
QUASI_IDENTIFIERS = NUMERIC + CATEGORICAL


def _interval(value: int, width: int) -> str:
    low = value // width * width
    return f"[{low}-{low + width})"


def generate(out_dir: Path, rows: int = ROWS, seed: int = SEED) -> Path:
    """Write the table and its hierarchies to ``out_dir``; returns the table's path."""
    rng = np.random.default_rng(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    profile = rng.normal(0.0, 1.0, rows)
    columns: dict[str, np.ndarray] = {}
    for name in NUMERIC:
        centre = rng.uniform(25, 75)
        spread = rng.uniform(8, 20)
        weight = rng.uniform(0.3, 0.9)
        noise = rng.normal(0.0, 1.0, rows)
        values = centre + spread * (weight * profile + (1 - weight**2) ** 0.5 * noise)
        columns[name] = np.clip(np.rint(values), 0, 99).astype(int).astype(str)
        levels = [(str(v), _interval(v, 10), _interval(v, 50), "*") for v in range(100)]
        _write_hierarchy(out_dir / f"wide_hierarchy_{name}.csv", levels)
    for name in CATEGORICAL:
        size = int(rng.choice([8, 12, 16]))
        labels = list(string.ascii_lowercase[:size])
        weights = 1.0 / np.arange(1, size + 1) ** rng.uniform(0.5, 1.2)
        # Loosely tied to the profile: a row's rank shifts with it.
        shift = np.clip(np.rint(profile * rng.uniform(0, 1.5)), -(size - 1), size - 1)
        picked = rng.choice(size, rows, p=weights / weights.sum())
        codes = np.abs(picked + shift.astype(int)) % size
        columns[name] = np.array(labels)[codes]
        levels = [
            (
                lab,
                "".join(labels[i // 4 * 4 : i // 4 * 4 + 4]),
                "".join(labels[i // 8 * 8 : i // 8 * 8 + 8]),
                "*",
            )
            for i, lab in enumerate(labels)
        ]
        _write_hierarchy(out_dir / f"wide_hierarchy_{name}.csv", levels)
    columns["id"] = np.array([f"r{i}" for i in range(rows)])
    table = pd.DataFrame({name: columns[name] for name in [*QUASI_IDENTIFIERS, "id"]})
    path = out_dir / "wide.csv"
    table.to_csv(path, sep=";", index=False, lineterminator="\n")
    return path


def _write_hierarchy(path: Path, levels: list[tuple[str, ...]]) -> None:
    path.write_text("".join(";".join(row) + "\n" for row in levels), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    path = generate(args.out_dir, args.rows, args.seed)
    print(f"{args.rows:,} rows, 20 quasi-identifiers -> {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
