"""Adult recoded to integers, a second benchmark table for ``bench/arx_compare.py``:
``python bench/integer_table.py [--out tests/data/integer-adult]``.

Every column's values are replaced by their rank (from 0) among the leaves of the column's
ARX hierarchy (``tests/data/adult/adult_hierarchy_<column>.csv``): ages in numeric order, the
other columns in the order of their text. The hierarchies are recoded the same way: the
generalized levels of age become integer intervals of ranks (``lo-hi``, both included), those
of the other columns the rank of the group's label among that level's labels (``*`` stays).
The rows are then shuffled with a seeded generator (``--seed``, 25 by default), so that ARX and
the engine meet the values in another order than Adult's. The same input always gives the same
bytes; the files are ``integer-adult.csv`` (';'-separated, a header row) and
``integer-adult_hierarchy_<column>.csv``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "tests" / "data" / "adult"
NAME = "integer-adult"
NUMERIC = {"age"}
SEED = 25


def read_hierarchy(column: str) -> pd.DataFrame:
    return pd.read_csv(
        ADULT / f"adult_hierarchy_{column}.csv", sep=";", header=None, dtype=str,
        keep_default_na=False,
    )  # fmt: skip


def recode_hierarchy(column: str, table: pd.DataFrame) -> tuple[dict[str, str], pd.DataFrame]:
    """The leaf -> rank mapping of a column and its hierarchy recoded to integers."""
    leaves = table[0].tolist()
    ordered = sorted(leaves, key=int) if column in NUMERIC else sorted(leaves)
    rank = {value: str(i) for i, value in enumerate(ordered)}
    out = pd.DataFrame({0: table[0].map(rank)})
    for level in table.columns[1:]:
        labels = table[level]
        if column in NUMERIC:
            ranks = out[0].astype(int).groupby(labels).agg(["min", "max"])
            spans = {g: f"{lo}-{hi}" for g, (lo, hi) in ranks.iterrows()}
            recoded = labels.map(lambda g, spans=spans: "*" if g == "*" else spans[g])
        else:
            codes = {g: str(i) for i, g in enumerate(sorted(set(labels) - {"*"}))}
            recoded = labels.map(lambda g, codes=codes: "*" if g == "*" else codes[g])
        out[level] = recoded
    return rank, out


def build(seed: int = SEED) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    adult = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    data = pd.DataFrame(index=adult.index)
    hierarchies = {}
    for column in adult.columns:
        rank, hierarchies[column] = recode_hierarchy(column, read_hierarchy(column))
        data[column] = adult[column].map(rank)
        if data[column].isna().any():
            raise ValueError(f"{column}: a value of Adult is not a leaf of its hierarchy")
    order = np.random.default_rng(seed).permutation(len(data))
    return data.iloc[order].reset_index(drop=True), hierarchies


def write(out: Path, seed: int = SEED) -> None:
    data, hierarchies = build(seed)
    out.mkdir(parents=True, exist_ok=True)
    data.to_csv(out / f"{NAME}.csv", sep=";", index=False, lineterminator="\n")
    for column, table in hierarchies.items():
        table.to_csv(
            out / f"{NAME}_hierarchy_{column}.csv", sep=";", header=False, index=False,
            lineterminator="\n",
        )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / NAME)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    write(args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
