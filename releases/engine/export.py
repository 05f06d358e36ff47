"""Safe export of a released table.

Spreadsheet programs run a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula
(CSV / formula injection, OWASP). :func:`neutralise_formulas` prefixes such cells with a single
quote so they are shown as text. Tab and carriage return are treated the same way (OWASP lists
them too). Plain numbers such as ``-5`` or ``+3.2`` are left alone: they cannot run anything and
must stay numbers for whoever analyses the extract.

Both the neutralisation and the CSV quoting work on a column's distinct values (its categories,
or the values :func:`pandas.factorize` finds), never cell by cell: a released column has few.
:func:`write_csv` writes the table in batches through Arrow and hashes the bytes as they are
written, so an extract of millions of rows never exists as one string.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import IO, TypeAlias, overload

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from .arrays import BoolArray, IntArray, ObjectArray, SmallIntArray

#: First characters that make a spreadsheet evaluate a cell.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_DANGEROUS = r"^[=+\-@\t\r]"
_PLAIN_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
#: Rows written per batch.
BATCH_ROWS = 128 * 1024


def neutralise_cell(value: str) -> str:
    """One cell: ``'=1+1`` for ``=1+1``; numbers and harmless text unchanged."""
    s = str(value)
    if s.startswith(FORMULA_PREFIXES) and not re.fullmatch(_PLAIN_NUMBER, s):
        return "'" + s
    return s


#: Distinct values neutralised, and which of them changed.
_Neutralised: TypeAlias = tuple[ObjectArray, BoolArray]


def _neutralised(values: pd.Index | NDArray[np.generic]) -> _Neutralised:
    """(distinct values neutralised, which of them changed), as object strings and booleans."""
    text = pd.Series(np.asarray(values, dtype=object)).astype(str)
    risky = text.str.contains(_DANGEROUS, regex=True) & ~text.str.fullmatch(_PLAIN_NUMBER)
    return np.where(risky, "'" + text, text).astype(object), risky.to_numpy(dtype=bool)


def _neutralise_values(values: pd.Index | NDArray[np.generic]) -> ObjectArray:
    """The distinct values of a column, neutralised (an object array of strings)."""
    return _neutralised(values)[0]


@overload
def _per_column(
    function: Callable[[ObjectArray], _Neutralised], arrays: Sequence[ObjectArray]
) -> list[_Neutralised]: ...
@overload
def _per_column(
    function: Callable[[ObjectArray], ObjectArray], arrays: Sequence[ObjectArray]
) -> list[ObjectArray]: ...
def _per_column(
    function: Callable[[ObjectArray], _Neutralised | ObjectArray], arrays: Sequence[ObjectArray]
) -> list[_Neutralised] | list[ObjectArray]:
    """``function`` (values -> arrays as long, element-wise) on many columns' distinct values in
    one vectorised pass, split back per column: a wide file has thousands of columns of a few
    values each, and a pass per column would cost a millisecond each."""
    if not arrays:
        return []
    bounds = np.cumsum([len(a) for a in arrays])[:-1]
    joined = np.concatenate([np.asarray(a, dtype=object) for a in arrays])
    results = function(joined)
    if isinstance(results, tuple):
        safe, changed = results
        return list(zip(np.split(safe, bounds), np.split(changed, bounds), strict=True))
    return np.split(results, bounds)


def _is_arrow_text(series: pd.Series) -> bool:
    """Whether a column's strings are Arrow's: ``string[pyarrow]``, or pandas 3's ``str``
    dtype (Arrow-backed), which CSV and Parquet readers give a column of unrepeated values."""
    dtype = series.dtype
    return isinstance(dtype, pd.ArrowDtype) or (
        isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow"
    )


def _arrow_of(series: pd.Series) -> pa.ChunkedArray:
    """The Arrow strings behind such a column, as ``string`` (the writer reads 32-bit offsets;
    pandas' ``str`` dtype keeps ``large_string``, cast here chunk by chunk)."""
    return pa.chunked_array(series.array.__arrow_array__()).cast(pa.string())


def _neutralise_arrow(array: pa.ChunkedArray) -> pa.ChunkedArray:
    """:func:`neutralise_cell` on every value of an Arrow string array, computed by Arrow."""
    risky = pc.and_kleene(
        pc.match_substring_regex(array, _DANGEROUS),
        pc.invert(pc.match_substring_regex(array, f"^(?:{_PLAIN_NUMBER})$")),
    )
    return pc.if_else(risky, pc.binary_join_element_wise("'", array, ""), array)


def _is_text(series: pd.Series) -> bool:
    return (
        isinstance(series.dtype, pd.CategoricalDtype)
        or pd.api.types.is_object_dtype(series)
        or pd.api.types.is_string_dtype(series)
    )


def _codes_and_values(series: pd.Series) -> tuple[SmallIntArray, ObjectArray]:
    """(codes, distinct values as strings) of a text column; a missing cell becomes ""."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        codes = series.cat.codes.to_numpy()
        values = np.asarray(series.cat.categories, dtype=object)
    else:
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        values = np.asarray(uniques, dtype=object)
    if (codes < 0).any():
        values = np.append(values, "")
        codes = np.where(codes < 0, len(values) - 1, codes)
    return codes, np.array([str(v) for v in values], dtype=object)


def neutralise_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells (and column names) cannot run as spreadsheet formulas.

    A cell is prefixed with ``'`` when it starts with one of ``= + - @ TAB CR`` and is not a plain
    number. Non-text columns (numbers) are returned unchanged; categorical columns stay
    categorical.
    """
    out = df.copy()
    # (column, codes or None for a Categorical, distinct values)
    coded: list[tuple[Hashable, IntArray | None, pd.Index]] = []
    for col in out.columns:
        series = out[col]
        if not _is_text(series):
            continue
        if _is_arrow_text(series):
            safe = _neutralise_arrow(_arrow_of(series))
            # Arrow throughout; the column keeps its dtype (pandas 3's str stays str).
            arrow = pd.Series(pd.arrays.ArrowExtensionArray(safe), index=series.index)
            out[col] = arrow.astype(series.dtype)
        elif isinstance(series.dtype, pd.CategoricalDtype):
            coded.append((col, None, series.cat.categories))
        else:
            codes, uniques = pd.factorize(series, use_na_sentinel=True)
            coded.append((col, codes, uniques))
    checked = _per_column(_neutralised, [np.asarray(u, dtype=object) for _, _, u in coded])
    for (name, factorized, _), (safe, risky) in zip(coded, checked, strict=True):
        if not risky.any():
            continue
        series = out[name]
        if factorized is None:
            if len(set(safe)) == len(safe):
                out[name] = series.cat.rename_categories(list(safe))
            else:  # "=x" and "'=x" both present: they become one value
                category_codes = series.cat.codes.to_numpy()
                merged = safe[np.maximum(category_codes, 0)]
                merged[category_codes < 0] = None  # a missing cell stays missing
                out[name] = pd.Categorical(merged)
        else:
            values = safe[np.maximum(factorized, 0)]
            # The column's own dtype: pandas 3 would make object strings its str dtype.
            neutralised = pd.Series(values, index=series.index, dtype=object)
            out[name] = neutralised.where(factorized >= 0, series).astype(series.dtype)
    out.columns = [neutralise_cell(c) if isinstance(c, str) else c for c in out.columns]
    return out


# --- Writing ------------------------------------------------------------------------------


def _quote(values: ObjectArray, delimiter: str, single_column: bool) -> ObjectArray:
    """CSV quoting of distinct values as Python's csv module writes them (QUOTE_MINIMAL, quote
    doubled), with one difference: a carriage return always leads to quotes (Python 3.11 leaves
    it bare when the line terminator is "\\n", which splits the row in many readers)."""
    text = pd.Series(values, dtype=object)
    special = "[" + re.escape(delimiter + '"\n\r') + "]"
    needs = text.str.contains(special, regex=True).to_numpy(dtype=bool)
    out = np.where(needs, '"' + text.str.replace('"', '""', regex=False) + '"', text)
    if single_column:
        out = np.where(text == "", '""', out)  # a row of one empty field is not a blank line
    return out.astype(object)


def _quote_arrow(array: pa.Array, delimiter: str, single_column: bool) -> pa.Array:
    """:func:`_quote` computed by Arrow on every cell of a batch (a missing cell is "")."""
    text = pc.fill_null(array, "")
    special = "[" + re.escape(delimiter + '"\n\r') + "]"
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(text, '"', '""'), '"', "")
    out = pc.if_else(pc.match_substring_regex(text, special), quoted, text)
    if single_column:
        out = pc.if_else(pc.equal(text, ""), pa.scalar('""'), out)
    return out


def _column_codes(
    series: pd.Series,
) -> tuple[SmallIntArray, ObjectArray] | tuple[None, pa.ChunkedArray]:
    """(codes, distinct values as strings) of one column; for Arrow strings (a value per row:
    IDs, free text), (None, the cells), quoted batch by batch."""
    if _is_arrow_text(series):
        return None, _arrow_of(series)
    if _is_text(series):
        return _codes_and_values(series)
    shown = series.astype(object).where(series.notna(), "").astype(str)
    codes, uniques = pd.factorize(shown)
    return codes, np.array([str(v) for v in uniques], dtype=object)


def _column_parts(
    frame: pd.DataFrame, delimiter: str, single: bool
) -> list[tuple[pa.Array | pa.ChunkedArray, NDArray[np.int32] | None]]:
    """Per column, (quoted distinct values, codes) ready to be taken batch by batch, or (the
    cells, None) for Arrow strings; every column's distinct values quoted in one pass."""
    coded = [_column_codes(frame[c]) for c in frame.columns]
    distinct = [values for codes, values in coded if codes is not None]
    quoted = iter(_per_column(lambda v: _quote(v, delimiter, single), distinct))
    return [
        (pa.array(list(next(quoted)), type=pa.string()), codes.astype(np.int32, copy=False))
        if codes is not None
        else (values, None)
        for codes, values in coded
    ]


@dataclass(frozen=True)
class Written:
    """What :func:`write_csv` wrote: its SHA-256 and size in bytes, and its rows."""

    sha256: str
    size: int
    rows: int


def write_csv(
    frame: pd.DataFrame,
    out: IO[bytes],
    delimiter: str = ",",
    neutralise: bool = True,
    batch_rows: int = BATCH_ROWS,
) -> Written:
    """Write ``frame`` as UTF-8 CSV (header, ``delimiter``, "\\n" after each row) to the binary
    stream ``out``, in batches, hashing as it writes.

    With ``neutralise`` (the default) cells and column names that a spreadsheet would run as
    formulas are neutralised first (:func:`neutralise_formulas`). The bytes are those of
    ``frame.to_csv(sep=delimiter, index=False, lineterminator="\\n")`` on the neutralised frame.
    """
    if neutralise:
        frame = neutralise_formulas(frame)
    digest = hashlib.sha256()
    size = 0

    def emit(data: bytes | memoryview) -> None:
        nonlocal size
        digest.update(data)
        out.write(data)
        size += len(data)

    names = [str(c) for c in frame.columns]
    single = len(names) == 1
    header = _quote(np.array(names, dtype=object), delimiter, single)
    emit((delimiter.join(header) + "\n").encode("utf-8"))
    parts = _column_parts(frame, delimiter, single)
    rows = len(frame)

    def assemble(start: int) -> pa.Array | bytes:
        stop = min(rows, start + batch_rows)
        cells = [
            pc.take(values, pa.array(codes[start:stop]))
            if codes is not None
            else _quote_arrow(values.slice(start, stop - start).combine_chunks(), delimiter, single)
            for values, codes in parts
        ]
        if not cells:
            return b"\n" * (stop - start)
        lines = pc.binary_join_element_wise(*cells, delimiter)
        # Each line ends in "\n": join with an empty last element.
        return pc.binary_join_element_wise(lines, pa.scalar(""), "\n")

    pool = pa.default_memory_pool()
    for start in range(0, rows, batch_rows):
        emit(_batch_bytes(assemble(start)))
        pool.release_unused()  # give each batch's buffers back, not keep them in the pool
    return Written(sha256=digest.hexdigest(), size=size, rows=rows)


def _batch_bytes(batch: pa.Array | bytes) -> bytes | memoryview:
    return batch if isinstance(batch, bytes) else _string_bytes(batch)


def _string_bytes(array: pa.Array) -> memoryview:
    """The concatenated bytes of a string array's values (no copy)."""
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[
        array.offset : array.offset + len(array) + 1
    ]
    data = array.buffers()[2]
    if data is None:
        return memoryview(b"")
    return memoryview(data)[offsets[0] : offsets[-1]]


# --- Writing Arrow batches (the streamed release) -----------------------------------------


def csv_header(names: Sequence[str], delimiter: str = ",", neutralise: bool = True) -> bytes:
    """The header line :func:`write_csv` writes for a frame with columns ``names``."""
    shown = [neutralise_cell(n) if neutralise else n for n in names]
    return (
        delimiter.join(_quote(np.array(shown, dtype=object), delimiter, len(names) == 1)) + "\n"
    ).encode("utf-8")


def csv_cells(
    column: pa.Array, delimiter: str = ",", single: bool = False, neutralise: bool = True
) -> tuple[pa.Array, NDArray[np.int32] | None]:
    """One column of string cells (a missing cell is ""), neutralised and quoted as
    :func:`write_csv` writes it: a repeating column as (its distinct values quoted, each cell's
    code), the way a Categorical is written; others as (the cells quoted, None), the way Arrow
    strings are. ``single``: the frame has this column alone."""
    column = pc.fill_null(column.cast(pa.string()), "")
    encoded = column.dictionary_encode()
    if len(encoded.dictionary) <= max(len(column) // 2, 1):
        values = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
        if neutralise:
            values = _neutralise_values(values)
        quoted = pa.array(list(_quote(values, delimiter, single)), type=pa.string())
        return quoted, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    if neutralise:
        column = _neutralise_arrow(pa.chunked_array([column])).combine_chunks()
    return _quote_arrow(column, delimiter, single), None


def csv_lines(cells: Sequence[pa.Array], rows: int, delimiter: str = ",") -> bytes | memoryview:
    """The lines of ``rows`` rows whose columns hold these quoted cells."""
    if not cells:
        return b"\n" * rows
    lines = pc.binary_join_element_wise(*cells, delimiter)
    return _string_bytes(pc.binary_join_element_wise(lines, pa.scalar(""), "\n"))


__all__ = [
    "FORMULA_PREFIXES",
    "Written",
    "csv_cells",
    "csv_header",
    "csv_lines",
    "neutralise_cell",
    "neutralise_formulas",
    "write_csv",
]
