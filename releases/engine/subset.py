"""A research subset (ARX's ``DataSubset``): the released rows are a subset of a larger
population table.

:func:`.api.anonymize` then takes the population table as its input and
``AnonymizationConfig(research_subset=ResearchSubset(...))`` marks the rows to release. The
search counts every equivalence class twice: its rows in the subset (what is released,
suppressed and measured, as the suppression limit, the classes and the Loss refer to) and its
rows in the population (what k-map and δ-presence judge the class by). The extract holds the
subset's rows only.

:meth:`ResearchSubset.match` finds the released rows in the population by content, as ARX's
``DataSubset.create(data, subset)`` does: on every column, each released row taking the first
population row with the same values that no earlier released row took.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .arrays import BoolArray, IntArray
from .errors import EngineError

__all__ = ["ResearchSubset"]


@dataclass(frozen=True)
class ResearchSubset:
    """Which rows of the population table are released: ``rows[i]`` is True for the ``i``-th
    row of the population that belongs to the research subset."""

    rows: BoolArray

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", np.asarray(self.rows, dtype=bool).reshape(-1))

    @property
    def size(self) -> int:
        """Rows in the research subset."""
        return int(self.rows.sum())

    @property
    def population_rows(self) -> int:
        """Rows in the population table."""
        return len(self.rows)

    @classmethod
    def of_rows(cls, population_rows: int, positions: Sequence[int] | IntArray) -> ResearchSubset:
        """The subset made of the population's rows at ``positions`` (0-based)."""
        index = np.asarray(positions, dtype=np.int64)
        if len(index) and (index.min() < 0 or index.max() >= population_rows):
            raise EngineError("A row of the research subset is not a row of the population.")
        if len(np.unique(index)) != len(index):
            raise EngineError("A row of the population is named twice in the research subset.")
        rows = np.zeros(population_rows, dtype=bool)
        rows[index] = True
        return cls(rows)

    @classmethod
    def match(cls, population: pd.DataFrame, released: pd.DataFrame) -> ResearchSubset:
        """The population's rows that ``released`` holds, matched by content on every column
        (``released`` has the population's columns, in any order). A released row that the
        population lacks, or holds fewer times, is an error naming it."""
        columns = list(population.columns)
        missing = [c for c in columns if c not in released.columns]
        extra = [c for c in released.columns if c not in population.columns]
        if missing:
            raise EngineError(f"The research subset lacks the population's column {missing[0]!r}.")
        if extra:
            raise EngineError(
                f"The research subset has a column {extra[0]!r} that the population does not."
            )
        n = len(population)
        if not columns:
            raise EngineError("The population has no columns to match the research subset on.")
        ids = _row_ids([population[c] for c in columns], [released[c] for c in columns])
        pop_ids, sub_ids = ids[:n], ids[n:]
        groups = int(ids.max()) + 1 if len(ids) else 0
        # Population rows grouped by content, in row order within each group.
        order = np.lexsort((np.arange(n), pop_ids))
        available = np.bincount(pop_ids, minlength=groups)
        start = np.concatenate([[0], np.cumsum(available)[:-1]]) if groups else available
        # The k-th released copy of a row takes the k-th population row with its content.
        rank = pd.Series(sub_ids).groupby(sub_ids).cumcount().to_numpy(dtype=np.int64)
        short = np.flatnonzero(rank >= available[sub_ids])
        if len(short):
            i = int(short[0])
            values = ", ".join(f"{c}={released[c].iloc[i]!s}" for c in columns[:6])
            more = " ..." if len(columns) > 6 else ""
            if available[sub_ids[i]] == 0:
                raise EngineError(
                    f"Row {i + 1} of the research subset ({values}{more}) is not in the population."
                )
            raise EngineError(
                f"Row {i + 1} of the research subset ({values}{more}) appears more often in "
                f"the subset than in the population ({int(available[sub_ids[i]])} times)."
            )
        rows = np.zeros(n, dtype=bool)
        rows[order[start[sub_ids] + rank]] = True
        return cls(rows)


def _row_ids(first: list[pd.Series], second: list[pd.Series]) -> IntArray:
    """One id per row of the two tables stacked (``first``'s rows, then ``second``'s), equal
    for rows with the same text in every column: each column's codes, made comparable across
    the two tables through the text of their distinct values, are combined into one key,
    compacted whenever it would overflow."""
    key = np.zeros(len(first[0]) + len(second[0]) if first else 0, dtype=np.int64)
    space = 1
    for a, b in zip(first, second, strict=True):
        a_codes, a_texts = _text_codes(a)
        b_codes, b_texts = _text_codes(b)
        joint, distinct = pd.factorize(np.array(a_texts + b_texts, dtype=object))
        codes = np.concatenate([joint[: len(a_texts)][a_codes], joint[len(a_texts) :][b_codes]])
        card = max(len(distinct), 1)
        if space * card >= 1 << 62:
            key, kept = pd.factorize(key)
            space = len(kept)
        key = key * card + codes
        space *= card
    ids, _ = pd.factorize(key)
    return np.asarray(ids, dtype=np.int64)


def _text_codes(column: pd.Series) -> tuple[IntArray, list[str]]:
    """A code per cell and the text of each code ("" for a missing value), whatever the
    column's dtype, so that a Categorical column matches a plain one."""
    codes, uniques = pd.factorize(column, sort=False)
    texts = [str(u) for u in uniques] + [""]
    return np.where(codes < 0, len(uniques), codes).astype(np.int64), texts
