"""Reading tables: CSV/TSV (encoding, delimiter and quoting detected), Excel and Parquet.

Every cell is read as a string, and missing values stay as the empty string: they are a value
of their own for the engine, never silently dropped ("NA", "?" and the like stay text too).
Excel and Parquet cells are converted the same way: whole numbers without ``.0``, dates and
times in ISO format, empty cells as "".

Files are read as a stream of Arrow record batches (:func:`open_table`): a CSV through
pyarrow's streaming CSV reader (transcoding other encodings as it goes), an Excel sheet through
openpyxl's read-only rows, a Parquet file by row groups. Memory stays bounded by the batch size
whatever the file's size, and :class:`ReadLimits` refuses a file as soon as it passes a limit
(uncompressed bytes, rows, columns, bytes in one cell), naming the limit.

Every problem is raised as ``TableError`` with a message naming it and, where it applies, the
line (or row) and the column.
"""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import decimal
import io
import math
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeAlias

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from .errors import EngineError

if TYPE_CHECKING:
    from openpyxl.workbook.workbook import Workbook


class TableError(EngineError):
    """A file that cannot be read as a table; the message says what is wrong and where."""


DELIMITERS = [",", ";", "\t", "|"]
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
SNIFF_BYTES = 64 * 1024
# Bytes Windows-1252 leaves undefined: text containing them is neither UTF-8 nor Windows-1252.
CP1252_UNDEFINED = frozenset(b"\x81\x8d\x8f\x90\x9d")
#: Bytes read at a time when scanning a file (encoding check, line numbers).
SCAN_BYTES = 16 * 1024 * 1024
#: The CSV reader's block: a row must fit in one.
BLOCK_BYTES = 16 * 1024 * 1024
#: Rows per batch for Excel and Parquet.
BATCH_ROWS = 64 * 1024
#: Largest header row looked at before refusing the file.
MAX_HEADER_BYTES = 64 * 1024 * 1024
#: Records re-read with Python's csv module to turn a record number into a line number.
LINE_LOOKUP_RECORDS = 1_000_000
#: Zip members smaller than this are not checked for their compression ratio.
RATIO_GRACE_BYTES = 1024 * 1024

CSV, TSV, XLSX, PARQUET = "csv", "tsv", "xlsx", "parquet"

Source = str | os.PathLike[str] | bytes
#: A row the CSV reader refused: (its number if known, its fields, its first field).
_InvalidRow: TypeAlias = tuple[int | None, int, str]


@dataclass(frozen=True)
class TableFormat:
    encoding: str = ""
    delimiter: str = ","
    file_format: str = CSV
    sheet: str = ""

    @property
    def delimiter_name(self) -> str:
        return DELIMITER_NAMES.get(self.delimiter, repr(self.delimiter))


@dataclass(frozen=True)
class ReadLimits:
    """Bounds a file must stay within; ``None`` is no bound. Each refusal names the limit by
    its setting (``names``), so whoever reads it knows what to raise."""

    max_bytes: int | None = None
    max_rows: int | None = None
    max_columns: int | None = None
    max_cell_bytes: int | None = None
    #: Largest ratio of a zip member's expanded to compressed size (Excel files).
    max_compression_ratio: float | None = None
    names: tuple[tuple[str, str], ...] = (
        ("max_bytes", "MAX_UNCOMPRESSED_BYTES"),
        ("max_rows", "MAX_ROWS"),
        ("max_columns", "MAX_COLUMNS"),
        ("max_cell_bytes", "MAX_CELL_BYTES"),
        ("max_compression_ratio", "MAX_COMPRESSION_RATIO"),
    )

    def setting(self, field: str) -> str:
        return dict(self.names).get(field, field)


NO_LIMITS = ReadLimits()


def _size(n: float) -> str:
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if n >= scale:
            value = n / scale
            return (
                f"{value:.0f} {unit}"
                if value >= 10 or value.is_integer()
                else f"{value:.1f} {unit}"
            )
    return f"{int(n)} bytes"


def _limit(limits: ReadLimits, field: str, shown: str) -> str:
    return f"the limit is {shown} ({limits.setting(field)})"


# --- Format -------------------------------------------------------------------------------


def sniff_format(head: bytes, filename: str = "") -> str:
    """The file's format from its first bytes (and name); rejects empty, binary and unknown files.

    Cheap enough for the web request: it looks at the first few kilobytes only.
    """
    name = filename.lower()
    if not head.strip():
        raise TableError("The file is empty.")
    if head.startswith(b"PAR1"):
        return PARQUET
    if head.startswith(b"PK\x03\x04"):
        if name.endswith((".xlsx", ".xlsm")) or b"xl/" in head or b"[Content_Types].xml" in head:
            return XLSX
        raise TableError(
            "This is a ZIP archive, not a table. Upload a CSV, TSV, Excel (.xlsx) or Parquet file."
        )
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        raise TableError(
            "This is an old Excel (.xls) or other Office binary file. Save it as .xlsx or CSV."
        )
    if name.endswith(".parquet"):
        raise TableError("The file is named .parquet but is not a Parquet file (no PAR1 header).")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return TSV if name.endswith(".tsv") else CSV  # UTF-16 text with a byte-order mark
    if b"\x00" in head[:SNIFF_BYTES]:
        raise TableError(
            "This looks like a binary file of an unknown format, not a table. "
            "Upload a CSV, TSV, Excel (.xlsx) or Parquet file."
        )
    return TSV if name.endswith((".tsv", ".tab")) else CSV


# --- Sources ------------------------------------------------------------------------------


def _opener(source: Source) -> Callable[[], IO[bytes]]:
    """A function opening a fresh binary stream of ``source`` (a path or bytes)."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        return lambda: io.BytesIO(data)
    path = os.fspath(source)
    return lambda: open(path, "rb")  # noqa: SIM115 - the caller closes it


def _source_size(source: Source) -> int:
    if isinstance(source, bytes | bytearray | memoryview):
        return len(source)
    return os.path.getsize(source)


def _chunks(open_stream: Callable[[], IO[bytes]], size: int = SCAN_BYTES) -> Iterator[bytes]:
    with open_stream() as handle:
        while chunk := handle.read(size):
            yield chunk


# --- Text encoding ------------------------------------------------------------------------


def detect_encoding(raw: bytes) -> str:
    """UTF-8 (with or without BOM), UTF-16 with BOM, else Windows-1252 or Latin-1."""
    return _detect_encoding(_opener(raw), raw[: SNIFF_BYTES * 2])


def _utf8_error_offset(open_stream: Callable[[], IO[bytes]]) -> int | None:
    """The offset of the first byte that is not UTF-8, or None; reads the file in chunks."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    offset = 0
    for chunk in _chunks(open_stream):
        pending = len(decoder.getstate()[0])
        if not pending and chunk.isascii():
            offset += len(chunk)
            continue
        try:
            decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            return offset - pending + exc.start
        offset += len(chunk)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return offset - len(decoder.getstate()[0])
    return None


def _detect_encoding(open_stream: Callable[[], IO[bytes]], head: bytes) -> str:
    if not head.strip():
        raise TableError("The file is empty.")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if b"\x00" in head[:SNIFF_BYTES]:
        raise TableError("This looks like a binary file, not a CSV text file.")
    utf8_error = _utf8_error_offset(open_stream)
    if utf8_error is None:
        return "utf-8-sig" if head.startswith(b"\xef\xbb\xbf") else "utf-8"
    undefined = re.compile(b"[" + re.escape(bytes(sorted(CP1252_UNDEFINED))) + b"]")
    c1 = re.compile(rb"[\x80-\x9f]")
    has_c1 = False
    offset = 0
    for chunk in _chunks(open_stream):
        bad = undefined.search(chunk)
        if bad is not None:
            position = offset + bad.start()
            raise TableError(
                "The file's bytes could not be decoded as UTF-8, Windows-1252 or Latin-1 text: "
                f"byte 0x{chunk[bad.start()]:02x} on {_where(open_stream, head, position)} has "
                "no meaning in these encodings (the first byte that is not UTF-8 is on "
                f"{_line_of_offset(open_stream, utf8_error)}). "
                "Save the file as UTF-8 and upload it again."
            )
        has_c1 = has_c1 or c1.search(chunk) is not None
        offset += len(chunk)
    # Windows-1252 is Latin-1 plus printable characters in 0x80-0x9F: prefer it when those
    # bytes occur (curly quotes, euro sign), since Latin-1 would turn them into control codes.
    return "cp1252" if has_c1 else "latin-1"


def _line_of_offset(open_stream: Callable[[], IO[bytes]], offset: int) -> str:
    lines = 0
    seen = 0
    for chunk in _chunks(open_stream):
        part = chunk[: max(0, offset - seen)]
        lines += part.count(b"\n")
        seen += len(chunk)
        if seen >= offset:
            break
    return f"line {lines + 1}"


def _where(open_stream: Callable[[], IO[bytes]], head: bytes, offset: int) -> str:
    """'line 3, column 1 ("name")' for a byte offset in a delimited text file."""
    line_start = 0
    seen = 0
    tail = b""
    for chunk in _chunks(open_stream):
        part = chunk[: max(0, offset - seen)]
        newline = part.rfind(b"\n")
        if newline >= 0:
            line_start = seen + newline + 1
            tail = part[newline + 1 :]
        else:
            tail += part
        seen += len(chunk)
        if seen >= offset:
            break
    header = head.split(b"\n", 1)[0].decode("latin-1")
    delimiter = max(DELIMITERS, key=header.count)
    before = tail[: offset - line_start].decode("latin-1")
    index = before.count(delimiter) if delimiter in header else 0
    names = [n.strip().strip('"') for n in header.split(delimiter)]
    name = f" ({names[index]!r})" if index < len(names) else ""
    return f"{_line_of_offset(open_stream, offset)}, column {index + 1}{name}"


# --- Text: delimiter and header -----------------------------------------------------------


def detect_delimiter(text_sample: str) -> str:
    lines = [line for line in text_sample.splitlines() if line.strip()][:50]
    if not lines:
        raise TableError("The file is empty.")
    try:
        return csv.Sniffer().sniff("\n".join(lines), delimiters="".join(DELIMITERS)).delimiter
    except csv.Error:
        # One column, or a sample the sniffer cannot settle: take the delimiter that splits the
        # header into the most fields, or none (a single-column file).
        counts = {d: lines[0].count(d) for d in DELIMITERS}
        best = max(counts, key=counts.__getitem__)
        return best if counts[best] > 0 else ","


def check_header(header: list[str]) -> list[str]:
    header = [str(name).strip() for name in header]
    for position, name in enumerate(header, start=1):
        if not name:
            raise TableError(f"Column {position} of the header has no name.")
    seen: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        if name in seen:
            raise TableError(
                f"The column name {name!r} appears twice in the header "
                f"(columns {seen[name]} and {position})."
            )
        seen[name] = position
    return header


def _check_columns(count: int, limits: ReadLimits, more: bool = False) -> None:
    if limits.max_columns is not None and count > limits.max_columns:
        what = f"more than {count - 1:,}" if more else f"{count:,}"
        raise TableError(
            f"The table has {what} columns; "
            + _limit(limits, "max_columns", f"{limits.max_columns:,} columns")
            + "."
        )


def _blank(row: list[str]) -> bool:
    return not any(cell.strip() for cell in row)


def _read_text_head(
    open_stream: Callable[[], IO[bytes]], encoding: str, size: int
) -> tuple[str, bool]:
    """The first ``size`` bytes decoded (an incomplete character dropped), and whether that is
    the whole file."""
    with open_stream() as handle:
        raw = handle.read(size + 1)
    whole = len(raw) <= size
    text = codecs.getincrementaldecoder(encoding)("replace").decode(raw[:size], final=whole)
    return text.removeprefix("\ufeff"), whole


def _first_record(
    open_stream: Callable[[], IO[bytes]], encoding: str, delimiter: str, limits: ReadLimits
) -> list[str] | None:
    """The header record (the first non-blank one), read from as much of the file as it needs;
    None for a file with no record at all."""
    size = SNIFF_BYTES * 2
    while True:
        text, whole = _read_text_head(open_stream, encoding, size)
        if not whole:
            text = text[: text.rfind("\n") + 1] if "\n" in text else text
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False)
        rows: list[list[str]] = []
        try:
            for row in reader:
                if row and not _blank(row):
                    rows.append(row)
                    _check_columns(len(row), limits, more=not whole and len(rows) == 1)
                    if len(rows) == 2:
                        break
        except csv.Error:
            pass
        if rows and (len(rows) == 2 or whole):
            return rows[0]
        if whole:
            return None
        if size >= MAX_HEADER_BYTES:
            raise TableError(
                f"The header row is longer than {_size(MAX_HEADER_BYTES)}: this is not a table."
            )
        size *= 4


def _line_of_record(
    open_stream: Callable[[], IO[bytes]], fmt: TableFormat, record: int
) -> int | None:
    """The physical line on which record ``record`` (1 = the header; empty lines not counted,
    as pyarrow counts) ends, or None when it lies beyond what is worth re-reading."""
    if record > LINE_LOOKUP_RECORDS:
        return None
    with open_stream() as handle:
        text = io.TextIOWrapper(handle, encoding=fmt.encoding, errors="replace", newline="")
        reader = csv.reader(text, delimiter=fmt.delimiter, strict=False)
        count = 0
        try:
            for row in reader:
                if row:
                    count += 1
                    if count == record:
                        return reader.line_num
        except csv.Error:
            return None
    return None


# --- Cells of typed formats ---------------------------------------------------------------


def cell_text(value: object) -> str:
    """A cell of an Excel or Parquet file as the string a CSV export would hold."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return format(value.normalize(), "f") if value == value.to_integral() else str(value)
    if isinstance(value, pd.Timestamp):  # never NaT: NaT is not a Timestamp
        value = value.to_pydatetime()
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0, 0) and value.tzinfo is None:
            return value.date().isoformat()
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    try:
        # numpy's NaN and NaT scalars, pandas' NA. pandas takes any object here; its stubs
        # accept only the scalar types they list.
        if pd.isna(value):  # type: ignore[call-overload]
            return ""
    except (TypeError, ValueError):
        pass
    return str(value)


def _arrow_text(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column of a typed file as strings ("" for null), the way :func:`cell_text` writes them."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        array = (
            array.dictionary_decode()
            if isinstance(array, pa.Array)
            else pc.cast(array, kind.value_type)
        )
        kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.fill_null(array.cast(pa.string()), "")
    if pa.types.is_integer(kind):
        return pc.fill_null(array.cast(pa.string()), "")
    if pa.types.is_boolean(kind):
        return pc.fill_null(pc.if_else(array, "true", "false"), "")
    return pa.array([cell_text(v) for v in array.to_pylist()], type=pa.string())


# --- Batches ------------------------------------------------------------------------------


class _Checker:
    """Row and cell limits over a stream of batches of string columns."""

    def __init__(self, limits: ReadLimits, columns: list[str], where: Callable[[int], str]):
        self.limits = limits
        self.columns = columns
        self.where = where  # data row index (0-based) -> "Line 12" / "Row 12"
        self.rows = 0

    def check(self, batch: pa.RecordBatch) -> None:
        limits = self.limits
        if limits.max_rows is not None and self.rows + batch.num_rows > limits.max_rows:
            raise TableError(
                f"The table has more than {limits.max_rows:,} rows; "
                + _limit(limits, "max_rows", f"{limits.max_rows:,} rows")
                + "."
            )
        if limits.max_cell_bytes is not None:
            for position, column in enumerate(batch.columns):
                lengths = pc.binary_length(column)
                longest = pc.max(lengths).as_py()
                if longest is not None and longest > limits.max_cell_bytes:
                    index = pc.index(pc.greater(lengths, limits.max_cell_bytes), True).as_py()
                    raise TableError(
                        f"{self.where(self.rows + index)}, column {position + 1} "
                        f"({self.columns[position]!r}) holds a cell of {_size(longest)}; "
                        + _limit(limits, "max_cell_bytes", f"{_size(limits.max_cell_bytes)} a cell")
                        + "."
                    )
        self.rows += batch.num_rows


def _non_blank(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch without rows whose cells are all empty or whitespace."""
    if batch.num_rows == 0:
        return batch
    blank = pc.equal(pc.utf8_trim_whitespace(batch.column(0)), "")
    if not pc.any(blank).as_py():
        return batch
    for column in batch.columns[1:]:
        blank = pc.and_(blank, pc.equal(pc.utf8_trim_whitespace(column), ""))
    if not pc.any(blank).as_py():
        return batch
    return batch.filter(pc.invert(blank))


class TableScan:
    """An open table file: its format, its header, and its rows as batches of string columns.

    Iterate :meth:`batches` once; ``rows`` counts the rows delivered so far. Raises
    ``TableError`` (while opening or while iterating) for anything wrong with the file.
    """

    def __init__(
        self,
        fmt: TableFormat,
        columns: list[str],
        batches: Iterator[pa.RecordBatch],
        position: Callable[[], float] | None = None,
    ):
        self.format = fmt
        self.columns = columns
        self._batches = batches
        self._position = position
        self.rows = 0
        self.schema = pa.schema([(name, pa.string()) for name in columns])

    def fraction(self) -> float:
        """How much of the file has been read, between 0 and 1 (an estimate)."""
        if self._position is None:
            return 0.0
        try:
            return max(0.0, min(1.0, self._position()))
        except (OSError, ValueError, ZeroDivisionError):
            return 0.0

    def batches(self) -> Iterator[pa.RecordBatch]:
        for batch in self._batches:
            if batch.num_rows:
                self.rows += batch.num_rows
                yield batch
        if self.rows == 0:
            raise TableError(_header_only(self.format))


def _header_only(fmt: TableFormat) -> str:
    if fmt.file_format == XLSX:
        return f"The sheet {fmt.sheet!r} has only a header row and no data."
    if fmt.file_format == PARQUET:
        return "The Parquet file has columns but no rows."
    return "The file has only a header row and no data."


def open_table(
    source: Source,
    fmt: TableFormat | None = None,
    filename: str = "",
    limits: ReadLimits = NO_LIMITS,
    delimiter: str | None = None,
    block_bytes: int = BLOCK_BYTES,
) -> TableScan:
    """Open a table file (a path, or the bytes of a small file) for reading in batches.

    ``fmt`` None: format, encoding and delimiter are detected; a ``fmt`` with an encoding is
    used as it is (a file read before). ``delimiter`` forces the delimiter of a text file.
    ``block_bytes``: the text reader's block (a row must fit in one; the reader holds several
    blocks read ahead, so memory grows with it).
    """
    open_stream = _opener(source)
    with open_stream() as handle:
        head = handle.read(SNIFF_BYTES * 2)
    file_format = fmt.file_format if fmt else sniff_format(head[:SNIFF_BYTES], filename)
    if limits.max_bytes is not None and file_format in (CSV, TSV):
        size = _source_size(source)
        if size > limits.max_bytes:
            raise TableError(
                f"The file holds {_size(size)} of text; "
                + _limit(limits, "max_bytes", _size(limits.max_bytes))
                + "."
            )
    if file_format == XLSX:
        return _open_excel(open_stream, fmt.sheet if fmt else "", limits)
    if file_format == PARQUET:
        return _open_parquet(open_stream, limits)
    if fmt is None or not fmt.encoding:
        encoding = _detect_encoding(open_stream, head)
        if delimiter is None:
            sample = head.decode(encoding, errors="replace")[:SNIFF_BYTES]
            delimiter = "\t" if file_format == TSV else detect_delimiter(sample)
        fmt = TableFormat(encoding=encoding, delimiter=delimiter, file_format=file_format)
    elif delimiter is not None:
        fmt = TableFormat(encoding=fmt.encoding, delimiter=delimiter, file_format=file_format)
    return _open_text(open_stream, fmt, limits, block_bytes)


def _open_text(
    open_stream: Callable[[], IO[bytes]],
    fmt: TableFormat,
    limits: ReadLimits,
    block_bytes: int = BLOCK_BYTES,
) -> TableScan:
    first = _first_record(open_stream, fmt.encoding, fmt.delimiter, limits)
    if first is None:
        raise TableError("The file is empty.")
    header = check_header(first)
    width = len(header)
    invalid: list[_InvalidRow] = []

    def on_invalid(row: pa_csv.InvalidRow) -> str:
        fields = next(csv.reader([row.text], delimiter=fmt.delimiter, strict=False), [])
        if _blank(fields):
            return "skip"  # a line of only delimiters: a blank line
        invalid.append((row.number, row.actual_columns, fields[0] if fields else ""))
        return "error"

    def line_of(record: int | None) -> str:
        line = _line_of_record(open_stream, fmt, record) if record else None
        if line is not None:
            return f"Line {line}"
        return f"Row {record:,} (the header is row 1)" if record else "A row"

    block = block_bytes
    if limits.max_cell_bytes is not None:
        block = max(block, 2 * limits.max_cell_bytes)
    encoding = "utf8" if fmt.encoding in ("utf-8", "utf-8-sig") else fmt.encoding
    stream = open_stream()
    try:
        reader = pa_csv.open_csv(
            stream,
            read_options=pa_csv.ReadOptions(
                autogenerate_column_names=True,
                block_size=block,
                encoding=encoding,
                # Serial parsing numbers the rows, for the messages about ragged rows.
                use_threads=False,
            ),
            parse_options=pa_csv.ParseOptions(
                delimiter=fmt.delimiter,
                quote_char='"',
                double_quote=True,
                escape_char=False,
                newlines_in_values=True,
                ignore_empty_lines=True,
                invalid_row_handler=on_invalid,
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types={f"f{i}": pa.string() for i in range(width)},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowException, OSError, ValueError, UnicodeError) as exc:
        stream.close()
        raise _text_error(exc, invalid, fmt, width, line_of, 0, block, limits) from None
    if reader.schema.names != [f"f{i}" for i in range(width)] or any(
        t != pa.string() for t in reader.schema.types
    ):
        stream.close()
        raise TableError(
            f"The header row could not be read as {fmt.delimiter_name}-separated text."
        )
    checker = _Checker(limits, header, lambda i: line_of(i + 2))

    def batches() -> Iterator[pa.RecordBatch]:
        first_batch = True
        try:
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except (pa.ArrowException, OSError, ValueError, UnicodeError) as exc:
                    raise _text_error(
                        exc, invalid, fmt, width, line_of, checker.rows, block, limits
                    ) from None
                if first_batch:
                    first_batch = False
                    read_header = [
                        str(v).strip() for v in batch.slice(0, 1).to_pylist()[0].values()
                    ]
                    if read_header != header:
                        raise TableError(
                            "The header row could not be read as "
                            f"{fmt.delimiter_name}-separated text."
                        )
                    batch = batch.slice(1)
                batch = pa.RecordBatch.from_arrays(_non_blank(batch).columns, names=header)
                checker.check(batch)
                yield batch
        finally:
            stream.close()

    total = max(1, _source_size_of(open_stream))
    return TableScan(fmt, header, batches(), lambda: stream.tell() / total)


def _source_size_of(open_stream: Callable[[], IO[bytes]]) -> int:
    with open_stream() as handle:
        return handle.seek(0, io.SEEK_END)


def _text_error(
    exc: Exception,
    invalid: list[_InvalidRow],
    fmt: TableFormat,
    width: int,
    line_of: Callable[[int | None], str],
    rows_read: int,
    block: int,
    limits: ReadLimits,
) -> TableError:
    if invalid:
        number, actual, first = invalid[0]
        return TableError(
            f"{line_of(number)} has {actual} fields but the header has {width} "
            f"(delimiter: {fmt.delimiter_name}); the row starts with {first[:40]!r}."
        )
    message = str(exc)
    if "straddl" in message or "block" in message:
        cell = ""
        if limits.max_cell_bytes is not None:
            cell = (
                "; a cell may hold at most "
                + _size(limits.max_cell_bytes)
                + f" ({limits.setting('max_cell_bytes')})"
            )
        return TableError(
            f"The file has a row longer than {_size(block)} after data row {rows_read:,}"
            f"{cell}. A quotation mark that is never closed makes such a row."
        )
    if "UTF8" in message or isinstance(exc, UnicodeError):
        return TableError(
            f"The file's text is not valid {fmt.encoding} after data row {rows_read:,}. "
            "Save the file as UTF-8 and upload it again."
        )
    return TableError(
        f"The file could not be read as {fmt.delimiter_name}-separated text after data row "
        f"{rows_read:,} ({message})."
    )


# --- Excel --------------------------------------------------------------------------------


def excel_sheets(raw: bytes) -> list[str]:
    workbook = _open_workbook(_opener(raw), NO_LIMITS)
    try:
        return workbook.sheetnames
    finally:
        workbook.close()


def _check_zip(open_stream: Callable[[], IO[bytes]], limits: ReadLimits) -> None:
    """Refuse an archive whose members would expand beyond the limits, before expanding any."""
    with open_stream() as handle:
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise TableError(
                f"The Excel file could not be opened: it is damaged or not .xlsx ({exc})."
            ) from None
        with archive:
            members = archive.infolist()
    total = sum(m.file_size for m in members)
    if limits.max_bytes is not None and total > limits.max_bytes:
        raise TableError(
            f"The Excel file expands to {_size(total)}; "
            + _limit(limits, "max_bytes", _size(limits.max_bytes))
            + "."
        )
    ratio_limit = limits.max_compression_ratio
    if ratio_limit is None:
        return
    for member in members:
        if member.file_size < RATIO_GRACE_BYTES:
            continue
        ratio = member.file_size / max(member.compress_size, 1)
        if ratio > ratio_limit:
            raise TableError(
                f"The Excel file's part {member.filename!r} expands {ratio:,.0f} times "
                f"({_size(member.compress_size)} to {_size(member.file_size)}), as a zip bomb "
                "does; " + _limit(limits, "max_compression_ratio", f"{ratio_limit:g} times") + "."
            )


def _open_workbook(open_stream: Callable[[], IO[bytes]], limits: ReadLimits) -> Workbook:
    import openpyxl  # on first use: a third of a second to import, for Excel files only

    _check_zip(open_stream, limits)
    try:
        return openpyxl.load_workbook(open_stream(), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise TableError(
            f"The Excel file could not be opened: it is damaged or not .xlsx ({exc})."
        ) from None
    except Exception as exc:  # openpyxl raises many types on broken workbooks
        raise TableError(
            f"The Excel file could not be opened ({type(exc).__name__}: {exc})."
        ) from None


def _open_excel(open_stream: Callable[[], IO[bytes]], sheet: str, limits: ReadLimits) -> TableScan:
    workbook = _open_workbook(open_stream, limits)
    try:
        names = workbook.sheetnames
        if not names:
            raise TableError("The Excel file has no sheets.")
        if sheet and sheet not in names:
            raise TableError(
                f"The Excel file has no sheet named {sheet!r}; its sheets are "
                + ", ".join(repr(n) for n in names)
                + "."
            )
        chosen = sheet or names[0]
        worksheet = workbook[chosen]
        # The sheet's declared size (its <dimension>), checked before a row is expanded.
        declared_rows, declared_columns = worksheet.max_row, worksheet.max_column
        if declared_columns:
            _check_columns(declared_columns, limits)
        if declared_rows and limits.max_rows is not None and declared_rows - 1 > limits.max_rows:
            raise TableError(
                f"The sheet {chosen!r} declares {declared_rows - 1:,} rows of data; "
                + _limit(limits, "max_rows", f"{limits.max_rows:,} rows")
                + "."
            )
        rows = worksheet.iter_rows(values_only=True)
        header_row = None
        for row in rows:
            texts = [cell_text(v) for v in row]
            _check_columns(len(texts), limits)
            if not _blank(texts):
                header_row = texts
                break
        if header_row is None:
            raise TableError(f"The sheet {chosen!r} is empty.")
        # Trailing empty header cells (formatting beyond the table) are not columns, unless a
        # row has a value under them (then the header lacks a name, refused below).
        while header_row and not header_row[-1].strip():
            header_row = header_row[:-1]
        header = check_header(header_row)
    except BaseException:
        workbook.close()
        raise
    width = len(header)
    fmt = TableFormat(file_format=XLSX, sheet=chosen)
    checker = _Checker(limits, header, lambda i: f"Row {i + 2:,} of the sheet {chosen!r}")

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            buffer: list[list[str]] = []
            for row in rows:
                texts = [cell_text(v) for v in row]
                if len(texts) > width:
                    _check_columns(len(texts), limits)
                    for position in range(width, len(texts)):
                        if texts[position].strip():
                            raise TableError(f"Column {position + 1} of the header has no name.")
                    texts = texts[:width]
                if _blank(texts):
                    continue
                texts += [""] * (width - len(texts))
                buffer.append(texts)
                if len(buffer) >= BATCH_ROWS:
                    yield _batch_of_rows(buffer, header, checker)
                    buffer = []
            if buffer:
                yield _batch_of_rows(buffer, header, checker)
        finally:
            workbook.close()

    declared = max(1, (declared_rows or 0) - 1)
    return TableScan(fmt, header, batches(), lambda: checker.rows / declared)


def _batch_of_rows(rows: list[list[str]], header: list[str], checker: _Checker) -> pa.RecordBatch:
    columns = [pa.array([r[i] for r in rows], type=pa.string()) for i in range(len(header))]
    batch = pa.RecordBatch.from_arrays(columns, names=header)
    checker.check(batch)
    return batch


# --- Parquet ------------------------------------------------------------------------------


def _open_parquet(open_stream: Callable[[], IO[bytes]], limits: ReadLimits) -> TableScan:
    handle = open_stream()
    try:
        parquet = pq.ParquetFile(handle)
        meta = parquet.metadata
        names = [str(n) for n in parquet.schema_arrow.names]
    except (pa.ArrowException, OSError, ValueError) as exc:
        handle.close()
        raise TableError(f"The Parquet file is damaged and could not be read ({exc}).") from None
    try:
        _check_columns(len(names), limits)
        if limits.max_rows is not None and meta.num_rows > limits.max_rows:
            raise TableError(
                f"The Parquet file has {meta.num_rows:,} rows; "
                + _limit(limits, "max_rows", f"{limits.max_rows:,} rows")
                + "."
            )
        expanded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if limits.max_bytes is not None and expanded > limits.max_bytes:
            raise TableError(
                f"The Parquet file expands to {_size(expanded)}; "
                + _limit(limits, "max_bytes", _size(limits.max_bytes))
                + "."
            )
        header = check_header(names)
        if meta.num_rows == 0:
            raise TableError("The Parquet file has columns but no rows.")
    except BaseException:
        handle.close()
        raise
    checker = _Checker(limits, header, lambda i: f"Row {i + 1:,}")

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
                columns = [_arrow_text(column) for column in batch.columns]
                out = pa.RecordBatch.from_arrays(columns, names=header)
                checker.check(out)
                yield out
        except (pa.ArrowException, OSError) as exc:
            raise TableError(
                f"The Parquet file is damaged and could not be read ({exc})."
            ) from None
        finally:
            handle.close()

    total = max(1, meta.num_rows)
    return TableScan(
        TableFormat(file_format=PARQUET), header, batches(), lambda: checker.rows / total
    )


# --- Whole tables -------------------------------------------------------------------------


def dictionary_encode(table: pa.Table, max_share: float = 0.5) -> pa.Table:
    """String columns dictionary-encoded where they repeat (distinct values at most
    ``max_share`` of the rows): few distinct values then cost a small integer per row."""
    columns = []
    for column in table.columns:
        if pa.types.is_dictionary(column.type) or table.num_rows == 0:
            columns.append(column)
            continue
        encoded = column.dictionary_encode().unify_dictionaries()
        distinct = len(encoded.chunk(0).dictionary) if encoded.num_chunks else 0
        columns.append(encoded if distinct <= max_share * table.num_rows else column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def read_table_file(
    source: Source,
    fmt: TableFormat | None = None,
    filename: str = "",
    limits: ReadLimits = NO_LIMITS,
    delimiter: str | None = None,
) -> tuple[pa.Table, TableFormat]:
    """The whole table as Arrow string columns (dictionary-encoded where they repeat)."""
    scan = open_table(source, fmt, filename, limits, delimiter)
    table = pa.Table.from_batches(list(scan.batches()), schema=scan.schema)
    return dictionary_encode(table), scan.format


def to_frame(table: pa.Table) -> pd.DataFrame:
    """A DataFrame of the table: dictionary columns become Categoricals, others pandas' str
    dtype (Arrow strings)."""
    frame: pd.DataFrame = table.to_pandas()
    frame.columns = list(table.column_names)
    return frame


def read_table(
    raw: bytes,
    fmt: TableFormat | None = None,
    filename: str = "",
    limits: ReadLimits = NO_LIMITS,
) -> tuple[pd.DataFrame, TableFormat]:
    """Parse a (small) file's bytes into a DataFrame of strings, checking shape; raise
    ``TableError``. Large files are read from a path with :func:`open_table`."""
    scan = open_table(raw, fmt, filename, limits)
    table = pa.Table.from_batches(list(scan.batches()), schema=scan.schema)
    return table.to_pandas(), scan.format


def read_path(
    path: str | Path,
    fmt: TableFormat | None = None,
    filename: str = "",
    limits: ReadLimits = NO_LIMITS,
    delimiter: str | None = None,
) -> tuple[pd.DataFrame, TableFormat]:
    """:func:`read_table_file` as a DataFrame with Categorical columns where values repeat."""
    table, fmt = read_table_file(path, fmt, filename, limits, delimiter)
    return to_frame(table), fmt
