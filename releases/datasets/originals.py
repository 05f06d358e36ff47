"""The original of a dataset: the bounds every upload is read within, and the original opened
for reading in batches (the profiling job reads it into the column store; the column store
rebuilds itself from it for datasets profiled before stores existed): an upload from private
storage once its SHA-256 is checked, a registered source where it stays (``sources``)."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from django.conf import settings

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.datasets import sources
from releases.engine import tabular
from releases.engine.tabular import ReadLimits, TableError, TableFormat, TableScan
from releases.models import Dataset

#: The text reader's block: the reader reads many blocks ahead (at 16 MB, 700 MB for a 1 GB
#: file), so a small block keeps memory down and parses as fast (a row must fit in one).
READ_BLOCK_BYTES = 4 * 1024 * 1024


def read_limits() -> ReadLimits:
    """The bounds every uploaded file is read within (settings MAX_*)."""
    return ReadLimits(
        max_bytes=settings.MAX_UNCOMPRESSED_BYTES,
        max_rows=settings.MAX_ROWS,
        max_columns=settings.MAX_COLUMNS,
        max_cell_bytes=settings.MAX_CELL_BYTES,
        max_compression_ratio=settings.MAX_COMPRESSION_RATIO,
    )


def _stored_format(dataset: Dataset) -> TableFormat | None:
    if dataset.file_format in ("xlsx", "parquet") or dataset.encoding:
        return TableFormat(
            encoding=dataset.encoding,
            delimiter=dataset.delimiter or ",",
            file_format=dataset.file_format,
            sheet=dataset.sheet_name,
        )
    if dataset.file_format == "tsv":
        return TableFormat(file_format="tsv")
    return None


def _check_sha256(path: Path, expected: str) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(storage.CHUNK_BYTES * 8):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise InvalidInput("The stored dataset file does not match its recorded SHA-256.")


@contextlib.contextmanager
def scan_original(dataset: Dataset, limits: ReadLimits | None = None) -> Iterator[TableScan]:
    """The stored original, checked against its SHA-256 and opened for reading in batches.

    ``TableError`` (raised while opening or while iterating) says what is wrong with the file.
    """
    if not dataset.file_path:
        raise InvalidInput("This dataset's file was refused and is not stored.")
    limits = limits or read_limits()
    kind = dataset.source_kind
    if kind == Dataset.SourceKind.FOLDER:
        path = sources.recheck_folder_file(dataset.source_locator)
        _check_sha256(path, dataset.sha256)
        yield tabular.open_table(
            path,
            _stored_format(dataset),
            dataset.original_filename,
            limits,
            block_bytes=READ_BLOCK_BYTES,
        )
        return
    if kind == Dataset.SourceKind.S3:
        yield _scan_s3(dataset, limits)
        return
    if kind == Dataset.SourceKind.POSTGRES:
        yield sources.scan_database(dataset, limits)
        return
    with storage.local_path(dataset.file_path) as path:
        _check_sha256(path, dataset.sha256)
        scan = tabular.open_table(
            path,
            _stored_format(dataset),
            dataset.original_filename,
            limits,
            block_bytes=READ_BLOCK_BYTES,
        )
        yield scan


def _scan_s3(dataset: Dataset, limits: ReadLimits) -> TableScan:
    """The registered object read in place; its ETag is asked for by every GET, and an error
    of a GET is reported in its own words, whatever the reader made of it."""
    found = sources.s3_object(dataset)
    try:
        scan = tabular.open_table(
            found,
            _stored_format(dataset),
            dataset.original_filename,
            limits,
            block_bytes=READ_BLOCK_BYTES,
        )
    except TableError:
        if found.failure:
            raise found.failure from None
        raise

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from scan.batches()
        except TableError:
            if found.failure:
                raise found.failure from None
            raise

    return TableScan(scan.format, scan.columns, batches(), scan.fraction)


def recorded_version(dataset: Dataset, scan: TableScan) -> dict[str, str]:
    """What the first read of a database source records: the digest of its rows, which every
    later read must find again."""
    if isinstance(scan, sources.DatabaseScan) and not dataset.source_version:
        return {"source_version": scan.digest}
    return {}
