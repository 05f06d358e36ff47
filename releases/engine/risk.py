"""Re-identification risk under the prosecutor model.

The attacker knows the target is in the released table and knows the target's
quasi-identifiers, so a record in an equivalence class of size ``f`` is re-identified with
probability ``1 / f``.

For class sizes ``f_1 .. f_m`` over ``n = sum(f_j)`` records:

* highest risk        = 1 / min_j f_j
* average risk        = (1/n) * sum over records of 1/f(record) = m / n
* records at risk     = (1/n) * sum_j f_j * [1/f_j > threshold]
  (strictly greater, as ARX's ``RiskModelSampleSummary`` counts records whose risk
  exceeds the threshold: with the default 0.2 a class of 5 is *not* at risk, one of 4 is)
* sample uniques      = (1/n) * sum_j f_j * [f_j == 1]   (share of records alone in a class)

An empty input (no records) gives all zeros.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .types import RiskSummary


def risk_summary(class_sizes: Sequence[int] | np.ndarray, threshold: float = 0.2) -> RiskSummary:
    """Prosecutor risk of a table given the sizes of its equivalence classes (see module doc)."""
    sizes = np.asarray(class_sizes, dtype=np.int64).ravel()
    sizes = sizes[sizes > 0]  # an empty class holds no record and carries no risk
    n = int(sizes.sum()) if sizes.size else 0
    if n == 0:
        return RiskSummary(0.0, 0.0, 0.0, 0.0, float(threshold))
    highest = 1.0 / float(sizes.min())
    average = float(sizes.size) / n
    at_risk = float(sizes[1.0 / sizes > threshold].sum()) / n
    uniques = float(sizes[sizes == 1].sum()) / n
    return RiskSummary(highest, average, at_risk, uniques, float(threshold))


def class_sizes_of(df: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Sizes of the equivalence classes of ``df`` on ``columns`` (a missing "" is a value).

    With no columns the whole table is one class.
    """
    cols = list(columns)
    if len(df) == 0:
        return np.zeros(0, dtype=np.int64)
    if not cols:
        return np.array([len(df)], dtype=np.int64)
    # dropna=False: NaN (if any slipped in) forms its own class instead of vanishing.
    return df.groupby(cols, sort=False, dropna=False).size().to_numpy(dtype=np.int64)
