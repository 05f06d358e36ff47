"""The months of the worked pipeline's test: Adult with a ``pid`` key column, a different,
overlapping set of people each month, each file in its own order."""

from __future__ import annotations

import pandas as pd

from tests.conftest import ADULT

QUASI = ["age", "sex", "race"]
ROWS_PER_MONTH = 6000


def month(number: int) -> bytes:
    """Month ``number`` (0 for the first) as semicolon-separated bytes."""
    frame = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    frame.insert(0, "pid", [f"P{i:05d}" for i in range(len(frame))])
    start = number * ROWS_PER_MONTH // 2
    rows = frame.iloc[start : start + ROWS_PER_MONTH].sample(frac=1.0, random_state=number)
    return rows.to_csv(sep=";", index=False).encode()
