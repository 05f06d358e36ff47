"""Small pandas helpers for the tests' independent checks."""

from __future__ import annotations

import pandas as pd


def join_rows(frame: pd.DataFrame, sep: str) -> pd.Series:
    """Each row's values joined by ``sep``, as ``frame.agg(sep.join, axis=1)`` gives them but
    without building a Series per row (which takes seconds on Adult's 30,162 rows)."""
    columns = [frame[name].tolist() for name in frame.columns]
    return pd.Series(
        [sep.join(row) for row in zip(*columns, strict=True)], index=frame.index, dtype="str"
    )
