"""The release package: the extract's rows in a seeded random order, written as CSV, Excel
and Parquet, each with its SHA-256, and one digest over them all that reviewers approve.

The same functions serve the worker's run and an officer's reproduction: given the same input,
configuration and seed they write the same bytes (nothing in the files depends on the time or
the machine), which is what a reproduction checks.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xlsxwriter
from django.conf import settings

from releases import engine
from releases.engine.export import neutralise_formulas, write_csv
from releases.engine.shuffle import PERMUTATION, new_seed, order
from releases.models import ReleaseFile

Format = ReleaseFile.Format

#: Rows of a worksheet (1,048,576) less the header row.
XLSX_MAX_ROWS = 1_048_575
XLSX_SHEET = "release"
#: Fixed document dates: an Excel file otherwise records when it was written.
_XLSX_DATE = datetime.datetime(2000, 1, 1)
CHUNK_BYTES = 1024 * 1024
ENGINE_DIR = Path(__file__).resolve().parent.parent / "engine"


def shuffle(
    data: pd.DataFrame,
    seed: int | None,
    scheme: str = PERMUTATION,
    source_rows: np.ndarray | None = None,
) -> np.ndarray:
    """The order that puts the released rows ``data`` in random order, the same for the same
    seed and scheme: the engine's (``engine.shuffle.order``), which the command line uses too.
    ``source_rows``: each released row's input row (the keyed scheme orders by it; default:
    the rows in order).

    The input's order (by date, ID or place) must not survive into the extract. A round
    without a recorded seed (requests older than seeds) gets a fresh one, as it always did."""
    rows = np.arange(len(data), dtype=np.int64) if source_rows is None else source_rows
    return order(rows, new_seed() if seed is None else seed, scheme)


def xlsx_refusal(rows: int, columns: int = 1) -> str:
    """Why an extract of ``rows`` rows and ``columns`` columns has no Excel file (empty when it
    has one): a worksheet's row limit, and the site's ``XLSX_MAX_CELLS`` (an Excel file is
    written cell by cell, about 50,000 to 100,000 cells a second; a run writes no file for
    minutes that CSV and Parquet hold in seconds)."""
    if rows > XLSX_MAX_ROWS:
        return (
            f"Excel is not offered: the extract has {rows:,} rows and a worksheet holds at most "
            f"{XLSX_MAX_ROWS:,} below its header. Use CSV or Parquet."
        )
    cells = rows * max(columns, 1)
    if cells > settings.XLSX_MAX_CELLS:
        return (
            f"Excel is not offered: the extract has {cells:,} cells and this site writes Excel "
            f"files of at most {settings.XLSX_MAX_CELLS:,} (XLSX_MAX_CELLS), which take a "
            "minute to write already. Use CSV or Parquet: they hold the same cells."
        )
    return ""


#: Rows of the CSV assembled at a time (about 100 MB of text for Adult-like rows).
CSV_BATCH_ROWS = 512 * 1024


def _write_csv(data: pd.DataFrame, path: Path) -> str:
    # In batches through Arrow, formulas neutralised: never one string of the whole extract;
    # hashed as it is written.
    with open(path, "wb") as out:
        return write_csv(data, out, batch_rows=CSV_BATCH_ROWS).sha256


def _write_xlsx(data: pd.DataFrame, path: Path) -> None:
    safe = neutralise_formulas(data)
    # constant_memory streams rows to disk; every cell is written as text, exactly as in CSV.
    workbook = xlsxwriter.Workbook(
        str(path),
        {
            "constant_memory": True,
            "strings_to_numbers": False,
            "strings_to_formulas": False,
            "strings_to_urls": False,
        },
    )
    workbook.set_properties({"created": _XLSX_DATE})
    sheet = workbook.add_worksheet(XLSX_SHEET)
    for col, name in enumerate(safe.columns):
        sheet.write_string(0, col, str(name))
    for row, values in enumerate(safe.itertuples(index=False, name=None), start=1):
        for col, value in enumerate(values):
            sheet.write_string(row, col, "" if value is None else str(value))
    workbook.close()


#: Rows of a Parquet row group (and of a batch taken from the frame).
PARQUET_ROW_GROUP = 1024 * 1024


def _parquet_column(series: pd.Series) -> tuple[pa.Array | pa.ChunkedArray, np.ndarray | None]:
    """(values, codes) of a column: a Categorical's categories and codes, taken per batch by
    Arrow (never a Python string per cell); Arrow strings as they are; other columns as text."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        categories = pa.array(np.asarray(series.cat.categories.astype(str), dtype=object))
        return categories, series.cat.codes.to_numpy()
    dtype = series.dtype
    if isinstance(dtype, pd.ArrowDtype) or (
        isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow"
    ):
        # pandas 3's str dtype is Arrow strings too (large_string): taken as Arrow, not as a
        # Python string per cell.
        return pa.chunked_array(series.array.__arrow_array__()).cast(pa.string()), None
    return pa.chunked_array([pa.array(series.astype(str).to_numpy(dtype=object))]), None


def _write_parquet(data: pd.DataFrame, path: Path) -> None:
    # Parquet is no spreadsheet: values are written as they are, as strings, a row group at a
    # time from the columns' codes.
    names = [str(c) for c in data.columns]
    schema = pa.schema([(name, pa.string()) for name in names])
    parts = [_parquet_column(data[c]) for c in data.columns]
    rows = len(data)
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for start in range(0, max(rows, 1), PARQUET_ROW_GROUP):
            stop = min(rows, start + PARQUET_ROW_GROUP)
            columns = [
                pc.take(values, pa.array(codes[start:stop], type=pa.int32()))
                if codes is not None
                else values.slice(start, stop - start).combine_chunks()
                for values, codes in parts
            ]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))
            pa.default_memory_pool().release_unused()


WRITERS = {Format.CSV: _write_csv, Format.XLSX: _write_xlsx, Format.PARQUET: _write_parquet}
SUFFIXES: dict[str, str] = {
    Format.CSV: ".csv",
    Format.XLSX: ".xlsx",
    Format.PARQUET: ".parquet",
    Format.JSON: ".json",  # a statistics release's (statistics.run)
}


@dataclass(frozen=True)
class WrittenFile:
    """One file of the package, written locally: its path, SHA-256 and size in bytes."""

    path: Path
    sha256: str
    size: int


def write_package(data: pd.DataFrame, directory: Path) -> dict[str, WrittenFile]:
    """Write every format the extract can have into ``directory``, each with its SHA-256
    (computed while writing where the writer can, else read back)."""
    out: dict[str, WrittenFile] = {}
    for fmt in ReleaseFile.ORDER:
        if fmt == Format.XLSX and xlsx_refusal(len(data), len(data.columns)):
            continue
        path = directory / f"extract{SUFFIXES[fmt]}"
        digest = WRITERS[fmt](data, path)
        out[fmt] = WrittenFile(path, digest or sha256_file(path), path.stat().st_size)
    return out


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def package_digest(hashes: dict[str, str]) -> str:
    """SHA-256 over the sorted "format:sha256" lines of a round's files."""
    lines = "".join(f"{fmt}:{hashes[fmt]}\n" for fmt in sorted(hashes))
    return hashlib.sha256(lines.encode("ascii")).hexdigest()


def engine_version() -> dict:
    """The app's version and a fingerprint of the engine's source, to tell engines apart."""
    digest = hashlib.sha256()
    for source in sorted(ENGINE_DIR.rglob("*.py")):
        digest.update(source.relative_to(ENGINE_DIR).as_posix().encode())
        digest.update(source.read_bytes())
    try:
        version = importlib.metadata.version("anonymizer")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "app": version,
        "engine": getattr(engine, "__version__", version),
        "engine_source_sha256": digest.hexdigest(),
        "pandas": pd.__version__,
        "numpy": np.__version__,
        "pyarrow": pa.__version__,
        "xlsxwriter": xlsxwriter.__version__,
    }
