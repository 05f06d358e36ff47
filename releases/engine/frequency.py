"""The input's frequency table, built from Arrow record batches one at a time.

The optimal search needs only the level-0 frequency table of the quasi-identifiers (and the
sensitive values' counts within each class): the distinct combinations of the columns, each with
its number of rows. :func:`frequency_table` builds it batch by batch, so that memory grows with
the distinct combinations, not with the rows; each combination also keeps its first row (the
smallest 0-based input row index), which gives the order of first appearance the in-memory
encoding numbers values in (:meth:`.lattice.EncodedData.from_frequencies`).

Partial tables of consecutive parts of the input (e.g. Spark partitions, whose row indexes the
caller has offset) are merged with :func:`merge_frequency_tables`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .errors import EngineError

__all__ = ["FIRST", "ROWS", "FrequencyTable", "frequency_table", "merge_frequency_tables"]

#: The frame's column of rows per combination.
ROWS = "__rows"
#: The frame's column of each combination's first row (smallest 0-based input row index).
FIRST = "__first"
#: Partial tables are merged once they hold this many combinations together.
_MERGE_COMBINATIONS = 1 << 20


@dataclass
class FrequencyTable:
    """The input's distinct combinations of ``columns`` (the quasi-identifiers first, then the
    sensitive columns), each with its number of rows and its first row.

    ``frame`` holds one column per name in ``columns`` (the cells as strings, as read; a missing
    cell is ""), then :data:`ROWS` (int64) and :data:`FIRST` (int64: the smallest 0-based input
    row index holding the combination), one row per combination, ordered by first row.
    ``rows``: the input's rows."""

    frame: pd.DataFrame
    columns: list[str]
    rows: int

    def distinct(self, column: str) -> list[str]:
        """The distinct values of ``column`` in order of first appearance in the input."""
        firsts = self.frame.groupby(column, sort=False, observed=True)[FIRST].min()
        return [str(v) for v in firsts.sort_values(kind="stable").index]


def _text(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A column as Arrow strings, a missing cell as "" (the in-memory engine's reading)."""
    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, column.type.value_type)
    if not pa.types.is_string(column.type):
        column = pc.cast(column, pa.string())
    return pc.fill_null(column, "")


def _aggregate(table: pa.Table, columns: Sequence[str], weighted: bool) -> pa.Table:
    """One row per distinct combination of ``columns``: the rows summed (``weighted``: the
    table's :data:`ROWS`; else one per row) and the smallest :data:`FIRST`."""
    rows = (ROWS, "sum") if weighted else (FIRST, "count")
    grouped = table.group_by(list(columns), use_threads=False).aggregate([(FIRST, "min"), rows])
    names = {f"{FIRST}_min": FIRST, f"{ROWS}_sum": ROWS, f"{FIRST}_count": ROWS}
    grouped = grouped.rename_columns([names.get(n, n) for n in grouped.column_names])
    return grouped.select([*columns, ROWS, FIRST])


def _check_columns(names: Sequence[str], columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in names]
    if missing:
        raise EngineError(f"Column {missing[0]!r} is not in the data.")
    if len(set(columns)) != len(columns):
        raise EngineError("A column is named twice for the frequency table.")


class _Dictionary:
    """One column's distinct values, numbered in order of first appearance as batches come."""

    def __init__(self) -> None:
        self.chunks: list[pa.Array] = []
        self.values = pa.array([], type=pa.string())
        self.size = 0

    def codes(self, column: pa.Array) -> pa.Array:
        """The codes of a batch's cells (int32), new values numbered after the known ones.

        A dictionary-encoded column (the column store's) is coded through its dictionary: its
        few distinct strings are looked up, then taken per row by index."""
        if pa.types.is_dictionary(column.type) and not column.indices.null_count:
            dictionary = _text(column.dictionary)
            # Only the values the batch uses, in order of first appearance (new values are
            # numbered in that order).
            used, first = np.unique(
                column.indices.to_numpy(zero_copy_only=False), return_index=True
            )
            appearing = used[np.argsort(first, kind="stable")]
            at = np.full(len(dictionary), -1, dtype=np.int64)
            codes = self.codes(dictionary.take(pa.array(appearing))).to_numpy(zero_copy_only=False)
            at[appearing] = codes
            return pa.array(at.astype(np.int32)[column.indices.to_numpy(zero_copy_only=False)])
        column = _text(column)
        found = pc.index_in(column, value_set=self.values)
        if found.null_count:
            unseen = pc.unique(column.filter(pc.is_null(found)))  # in order of appearance
            self.chunks.append(unseen)
            self.values = pa.concat_arrays([self.values, unseen])
            later = pc.add(pc.index_in(column, value_set=unseen), self.size)
            found = pc.coalesce(found, later)
            self.size += len(unseen)
        return found.cast(pa.int32())


def _frame(
    table: pa.Table, columns: Sequence[str], dictionaries: Sequence[_Dictionary], rows: int
) -> FrequencyTable:
    """The frame of an aggregated table of codes: its columns as Categoricals of the values
    (a combination's cells cost a small code each; the values are held once)."""
    table = table.sort_by([(FIRST, "ascending")])
    frame = pd.DataFrame(
        {
            **{
                c: pd.Categorical.from_codes(
                    table.column(c).to_numpy(),
                    categories=pd.Index(d.values.to_pylist(), dtype=object),
                    validate=False,
                )
                for c, d in zip(columns, dictionaries, strict=True)
            },
            ROWS: table.column(ROWS).to_numpy().astype("int64"),
            FIRST: table.column(FIRST).to_numpy().astype("int64"),
        },
        columns=[*columns, ROWS, FIRST],
    )
    return FrequencyTable(frame, list(columns), rows)


def _empty(columns: Sequence[str]) -> pa.Table:
    return pa.table(
        {
            **{c: pa.array([], type=pa.int32()) for c in columns},
            ROWS: pa.array([], type=pa.int64()),
            FIRST: pa.array([], type=pa.int64()),
        }
    )


def frequency_table(batches: Iterable[pa.RecordBatch], columns: Sequence[str]) -> FrequencyTable:
    """The frequency table of ``columns`` over the rows of ``batches`` (in input order; row
    indexes count from 0 at the first batch's first row). Reads one batch at a time: memory
    holds the distinct values, the distinct combinations (as integer codes) and one batch,
    not the rows."""
    columns = list(columns)
    dictionaries = [_Dictionary() for _ in columns]
    parts: list[pa.Table] = []
    held = 0
    rows = 0
    for batch in batches:
        _check_columns(batch.schema.names, columns)
        count = batch.num_rows
        if not count:
            continue
        index = pa.array(np.arange(rows, rows + count, dtype=np.int64))
        codes = [
            d.codes(batch.column(batch.schema.get_field_index(c)))
            for c, d in zip(columns, dictionaries, strict=True)
        ]
        part = _aggregate(
            pa.Table.from_arrays([*codes, index], names=[*columns, FIRST]), columns, False
        )
        parts.append(part)
        held += part.num_rows
        rows += count
        if held > _MERGE_COMBINATIONS and len(parts) > 1:
            parts = [_aggregate(pa.concat_tables(parts), columns, weighted=True)]
            held = parts[0].num_rows
        del codes, index
        pa.default_memory_pool().release_unused()  # the batch's buffers back, not pooled
    merged = _empty(columns) if not parts else pa.concat_tables(parts)
    return _frame(_aggregate(merged, columns, weighted=True), columns, dictionaries, rows)


def merge_frequency_tables(parts: Sequence[FrequencyTable]) -> FrequencyTable:
    """One table of consecutive parts of the input, given in row order, whose :data:`FIRST`
    row indexes the caller has already offset to the whole input's."""
    if not parts:
        raise EngineError("No frequency tables to merge.")
    columns = list(parts[0].columns)
    for part in parts[1:]:
        if list(part.columns) != columns:
            raise EngineError("The frequency tables to merge have different columns.")
    dictionaries = [_Dictionary() for _ in columns]
    tables = []
    for part in sorted(parts, key=lambda p: int(p.frame[FIRST].min()) if len(p.frame) else 0):
        frame = part.frame
        tables.append(
            pa.table(
                {
                    **{
                        c: d.codes(_text(pa.array(frame[c])))
                        for c, d in zip(columns, dictionaries, strict=True)
                    },
                    ROWS: pa.array(frame[ROWS].to_numpy(dtype="int64")),
                    FIRST: pa.array(frame[FIRST].to_numpy(dtype="int64")),
                }
            )
        )
    merged = _aggregate(pa.concat_tables(tables), columns, weighted=True)
    return _frame(merged, columns, dictionaries, sum(p.rows for p in parts))
