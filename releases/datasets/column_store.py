"""A profiled dataset's cells as strings in a Parquet file beside its original (the column store).

The profiling task writes it in the same pass as it reads the uploaded file (row groups of
dictionary-encoded strings), and keeps the original's SHA-256 in the file's metadata. Whoever
needs a few columns (profiles, a type override, hierarchy values, the risk of the chosen
quasi-identifiers, a release run) reads just those from here, as Categoricals where values
repeat, instead of parsing the original again.

It lives in private storage under ``<original>.columns.parquet``; on object storage a reader
gets a temporary local copy (``storage.local_path``).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.conf import settings

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.datasets.originals import read_limits, scan_original
from releases.models import Dataset

SUFFIX = ".columns.parquet"
#: Metadata key holding the SHA-256 of the original file the store was read from.
SOURCE_SHA256 = b"anonymizer.source_sha256"


def name_of(dataset: Dataset) -> str:
    """The store's name in private storage."""
    return f"{dataset.file_path}{SUFFIX}"


#: Rows of a row group at least (batches are gathered up to this many before one is written).
GROUP_ROWS = 200_000


class Writer:
    """Writes batches of string columns to a local Parquet file, gathered into row groups of
    about :data:`GROUP_ROWS` rows (a reader's small batches would give many small groups)."""

    def __init__(self, path: Path, schema: pa.Schema, source_sha256: str) -> None:
        self.path = path
        metadata = {SOURCE_SHA256: source_sha256.encode()}
        self.schema = schema.with_metadata(metadata)
        self._writer = pq.ParquetWriter(
            path, self.schema, compression="zstd", use_dictionary=True, write_statistics=False
        )
        self._held: list[pa.RecordBatch] = []
        self._rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        self._held.append(batch.replace_schema_metadata(self.schema.metadata))
        self._rows += batch.num_rows
        if self._rows >= GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._held:
            table = pa.Table.from_batches(self._held, schema=self.schema)
            self._writer.write_table(table, row_group_size=max(self._rows, 1))
        self._held, self._rows = [], 0

    def close(self) -> None:
        try:
            self._flush()
        finally:
            self._writer.close()


def save(dataset: Dataset, local: Path) -> str:
    """Store a written column store for ``dataset`` (replacing any earlier one)."""
    name = name_of(dataset)
    storage.delete_quietly(name)
    return storage.save_file("datasets", SUFFIX, local, name=name)


@contextlib.contextmanager
def opened(dataset: Dataset) -> Iterator[Path]:
    """A local path of the dataset's column store; written first for datasets profiled before
    stores existed. Refuses a store that was not read from the dataset's recorded original."""
    if not dataset.file_path:
        raise InvalidInput("This dataset's file was refused and is not stored.")
    if not storage.exists(name_of(dataset)):
        rebuild(dataset)
    with storage.local_path(name_of(dataset)) as path:
        recorded = (pq.read_schema(path).metadata or {}).get(SOURCE_SHA256, b"").decode()
        if recorded != dataset.sha256:
            raise InvalidInput(
                "The dataset's column store was not read from its recorded file "
                "(its SHA-256 differs)."
            )
        yield path


def _names(path: Path, columns: list[str] | None) -> list[str]:
    available = pq.read_schema(path).names
    names = list(available) if columns is None else list(columns)
    missing = [c for c in names if c not in available]
    if missing:
        raise InvalidInput(f"The dataset has no column {missing[0]!r}.")
    return names


#: Above this many distinct values a column read ``categorical`` comes as Arrow strings instead
#: (IDs, free text): a Categorical's categories would be one Python string per distinct value.
CATEGORICAL_MAX_VALUES = 200_000
#: Cells read from the store at a time into Categoricals (their int32 codes: 32 MB).
READ_CELLS = 8 * 1024 * 1024


def read(
    dataset: Dataset,
    columns: list[str] | None = None,
    categorical: bool = False,
    categorical_max: int | None = None,
) -> pd.DataFrame:
    """The named columns (all when None) as strings ("" for missing values), in the order asked.

    ``categorical``: pandas Categoricals (a small integer per row, so millions of rows fit),
    except columns with more than ``categorical_max`` distinct values (default
    :data:`CATEGORICAL_MAX_VALUES`), which come as pandas
    Arrow strings (``string[pyarrow]``: Arrow buffers, no Python object per cell); else pandas'
    str dtype (Arrow strings too), which callers group on without ``observed=True``.
    """
    with opened(dataset) as path:
        names = _names(path, columns)
        parquet = pq.ParquetFile(path, read_dictionary=names if categorical else None)
        if not categorical:
            frame = parquet.read(columns=names, use_threads=True).to_pandas()
            frame.columns = names
            return frame
        # A few columns at a time: Arrow's int32 indices of those, not of all, exist at once
        # (one column of a tall file; many of a wide one, where a read per column would parse
        # the file's metadata thousands of times).
        if categorical_max is None:
            categorical_max = CATEGORICAL_MAX_VALUES
        distinct = list(dict.fromkeys(names))
        per_read = max(1, READ_CELLS // max(parquet.metadata.num_rows, 1))
        by_name = {}
        for start in range(0, len(distinct), per_read):
            group = distinct[start : start + per_read]
            table = parquet.read(columns=group, use_threads=True)
            for name, column in zip(group, table.columns, strict=True):
                by_name[name] = _as_pandas(column, categorical_max)
            del table
            pa.default_memory_pool().release_unused()
    return pd.DataFrame({f"c{i}": by_name[name] for i, name in enumerate(names)}).set_axis(
        names, axis=1
    )


def _as_pandas(column: pa.ChunkedArray, categorical_max: int) -> pd.Series:
    """A dictionary-encoded column as a Categorical, or as Arrow strings past the bound."""
    if column.num_chunks:
        column = column.unify_dictionaries()
        if len(column.chunk(0).dictionary) > categorical_max:
            return pd.Series(pd.arrays.ArrowExtensionArray(pc.cast(column, pa.string())))
    return column.to_pandas()


def open_local(path: Path) -> pq.ParquetFile:
    """A local store opened once for reading many columns (opening parses the metadata of
    every column: per column, that would cost as much as the reading on wide files)."""
    return pq.ParquetFile(path, read_dictionary=pq.read_schema(path).names)


def value_counts_of(
    parquet: pq.ParquetFile, names: list[str], batch_rows: int = 1_000_000
) -> list[tuple[pa.Array, pa.Array]]:
    """Per named column, its distinct values (strings, in order of first appearance) and how
    many rows hold each: read ``batch_rows`` rows at a time and merged, so memory is a batch's
    codes and the distinct values, whatever the rows."""
    counters = [_RunningCounts() for _ in names]
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=names, use_threads=True):
        for counter, column in zip(counters, batch.columns, strict=True):
            counter.add(column)
        del batch
    pa.default_memory_pool().release_unused()
    return [counter.result() for counter in counters]


class _RunningCounts:
    """A column's value counts merged over batches, values kept in order of first appearance."""

    def __init__(self) -> None:
        self.seen: pa.Array = pa.array([], pa.string())
        self.counts = np.zeros(0, dtype=np.int64)

    def add(self, column: pa.Array) -> None:
        values, counts = _batch_counts(column)
        if not len(values):
            return
        if not len(self.seen):
            at = np.full(len(values), -1, dtype=np.int64)
        else:
            found = pc.index_in(values, value_set=self.seen)
            at = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        known = at >= 0
        self.counts[at[known]] += counts[known]  # each value once in a batch
        if not known.all():
            new = np.flatnonzero(~known)
            self.seen = pa.concat_arrays([self.seen, values.take(pa.array(new))])
            self.counts = np.concatenate([self.counts, counts[new]])

    def result(self) -> tuple[pa.Array, pa.Array]:
        return self.seen, pa.array(self.counts, pa.int64())


def _batch_counts(column: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """A batch's distinct values (strings, in order of first appearance) and their counts."""
    if pa.types.is_dictionary(column.type):
        dictionary = column.dictionary
        if not pa.types.is_string(dictionary.type):
            dictionary = dictionary.cast(pa.string())
        indices = column.indices
        if indices.null_count:  # a missing cell, as the store's reader sees it: ""
            dictionary = pa.concat_arrays([dictionary, pa.array([""], pa.string())])
            indices = indices.fill_null(len(dictionary) - 1)
        codes = indices.to_numpy(zero_copy_only=False)
    else:
        if not pa.types.is_string(column.type):
            column = column.cast(pa.string())
        codes, uniques = pd.factorize(
            pd.Series(column.fill_null("").to_numpy(zero_copy_only=False)), sort=False
        )
        dictionary = pa.array(uniques, pa.string())
    if not len(codes):
        return pa.array([], pa.string()), np.zeros(0, dtype=np.int64)
    counts = np.bincount(codes, minlength=len(dictionary))
    present, first = np.unique(codes, return_index=True)
    order = present[np.argsort(first, kind="stable")]
    return dictionary.take(pa.array(order)), counts[order].astype(np.int64)


#: Rows read at a time by :func:`batches` (a batch's codes: 4 MB a column).
BATCH_ROWS = 1_000_000


def batches(
    dataset: Dataset, columns: list[str], batch_rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """The named columns, ``batch_rows`` rows at a time, as dictionary-encoded strings ("" for a
    missing value): memory is a batch, whatever the rows."""
    names = list(dict.fromkeys(columns))
    with opened(dataset) as path:
        _names(path, names)
        parquet = pq.ParquetFile(path, read_dictionary=names)
        yield from parquet.iter_batches(batch_size=batch_rows, columns=names, use_threads=True)
    pa.default_memory_pool().release_unused()


#: Rows read at a time where only a column's distinct values are wanted.
DISTINCT_BATCH_ROWS = 1024 * 1024


def distinct_values(dataset: Dataset, name: str) -> list[str]:
    """A column's distinct values, in order of first appearance.

    Read a batch at a time (a web request validating a hierarchy needs them): memory is a
    batch's codes and the distinct values, not the column."""
    seen: dict[str, None] = {}
    with opened(dataset) as path:
        _names(path, [name])
        parquet = pq.ParquetFile(path, read_dictionary=[name])
        for batch in parquet.iter_batches(batch_size=DISTINCT_BATCH_ROWS, columns=[name]):
            column = batch.column(0)
            used = pc.unique(column.indices).drop_null()
            seen.update(dict.fromkeys(column.dictionary.take(used).to_pylist()))
    pa.default_memory_pool().release_unused()
    return list(seen)


def rebuild(dataset: Dataset) -> None:
    """Write the store of a dataset profiled before stores existed, from its original."""
    with (
        tempfile.TemporaryDirectory(dir=settings.FILE_UPLOAD_TEMP_DIR) as folder,
        scan_original(dataset, read_limits()) as scan,
    ):
        local = Path(folder) / "columns.parquet"
        writer = Writer(local, scan.schema, dataset.sha256)
        try:
            for batch in scan.batches():
                writer.write(batch)
        finally:
            writer.close()
        save(dataset, local)
