"""Reading tables: CSV/TSV (encoding, delimiter and quoting detected), Excel and Parquet.

Every cell is read as a string, and missing values stay as the empty string: they are a value
of their own for the engine, never silently dropped. Excel and Parquet cells are converted the
same way: whole numbers without ``.0``, dates and times in ISO format, empty cells as "".

Every problem is raised as ``TableError`` with a message naming it and, where it applies, the
line (or row) and the column.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import math
import zipfile
from dataclasses import dataclass

import pandas as pd

from .types import EngineError


class TableError(EngineError):
    """A file that cannot be read as a table; the message says what is wrong and where."""


DELIMITERS = [",", ";", "\t", "|"]
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
SNIFF_BYTES = 64 * 1024
# Bytes Windows-1252 leaves undefined: text containing them is neither UTF-8 nor Windows-1252.
CP1252_UNDEFINED = frozenset(b"\x81\x8d\x8f\x90\x9d")

CSV, TSV, XLSX, PARQUET = "csv", "tsv", "xlsx", "parquet"


@dataclass(frozen=True)
class TableFormat:
    encoding: str = ""
    delimiter: str = ","
    file_format: str = CSV
    sheet: str = ""

    @property
    def delimiter_name(self) -> str:
        return DELIMITER_NAMES.get(self.delimiter, repr(self.delimiter))


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


# --- Text ---------------------------------------------------------------------------------


def _position(raw: bytes, offset: int) -> str:
    line = raw.count(b"\n", 0, offset) + 1
    return f"line {line}"


def detect_encoding(raw: bytes) -> str:
    """UTF-8 (with or without BOM), UTF-16 with BOM, else Windows-1252 or Latin-1."""
    if not raw.strip():
        raise TableError("The file is empty.")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if b"\x00" in raw[:SNIFF_BYTES]:
        raise TableError("This looks like a binary file, not a CSV text file.")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        utf8_error = exc
    else:
        return "utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8"
    bad = next((i for i, b in enumerate(raw) if b in CP1252_UNDEFINED), None)
    if bad is not None:
        raise TableError(
            "The file's bytes could not be decoded as UTF-8, Windows-1252 or Latin-1 text: "
            f"byte 0x{raw[bad]:02x} on {_where(raw, bad)} has no meaning in these encodings "
            f"(the first byte that is not UTF-8 is on {_position(raw, utf8_error.start)}). "
            "Save the file as UTF-8 and upload it again."
        )
    # Windows-1252 is Latin-1 plus printable characters in 0x80-0x9F: prefer it when those
    # bytes occur (curly quotes, euro sign), since Latin-1 would turn them into control codes.
    if any(0x80 <= b <= 0x9F for b in raw):
        return "cp1252"
    return "latin-1"


def _where(raw: bytes, offset: int) -> str:
    """'line 3, column 1 ("name")' for a byte offset in a delimited text file."""
    start = raw.rfind(b"\n", 0, offset) + 1
    header = raw.split(b"\n", 1)[0].decode("latin-1")
    delimiter = max(DELIMITERS, key=header.count)
    before = raw[start:offset].decode("latin-1")
    index = before.count(delimiter) if delimiter in header else 0
    names = [n.strip().strip('"') for n in header.split(delimiter)]
    name = f" ({names[index]!r})" if index < len(names) else ""
    return f"{_position(raw, offset)}, column {index + 1}{name}"


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
        best = max(counts, key=counts.get)
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


def _read_text(raw: bytes, fmt: TableFormat | None) -> tuple[pd.DataFrame, TableFormat]:
    if fmt is None or not fmt.encoding:
        file_format = fmt.file_format if fmt else CSV
        encoding = detect_encoding(raw)
        sample = raw[: SNIFF_BYTES * 2].decode(encoding, errors="replace")[:SNIFF_BYTES]
        delimiter = "\t" if file_format == TSV else detect_delimiter(sample)
        fmt = TableFormat(encoding=encoding, delimiter=delimiter, file_format=file_format)
    text = raw.decode(fmt.encoding)
    if text.startswith("\ufeff"):
        text = text[1:]
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=fmt.delimiter, strict=False)
    # Keep each row's line number in the file for error messages; skip blank lines.
    try:
        numbered = [(reader.line_num, row) for row in reader if row and any(c.strip() for c in row)]
    except csv.Error as exc:
        raise TableError(f"Line {reader.line_num}: {exc}.") from None
    rows = [row for _, row in numbered]
    if not rows:
        raise TableError("The file is empty.")
    header = check_header(rows[0])
    if len(rows) == 1:
        raise TableError("The file has only a header row and no data.")
    width = len(header)
    for line_number, row in numbered[1:]:
        if len(row) != width:
            raise TableError(
                f"Line {line_number} has {len(row)} fields but the header has {width} "
                f"(delimiter: {DELIMITER_NAMES.get(fmt.delimiter, fmt.delimiter)}); "
                f"the row starts with {row[0][:40]!r}."
            )
    frame = pd.DataFrame(rows[1:], columns=header, dtype=str)
    return frame, fmt


# --- Cells of typed formats ---------------------------------------------------------------


def cell_text(value) -> str:
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
    if isinstance(value, pd.Timestamp):
        if pd.isna(value):
            return ""
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
        if pd.isna(value):
            return ""
    except (TypeError, ValueError):
        pass
    return str(value)


def _frame_from_rows(rows: list[list[str]], where: str) -> pd.DataFrame:
    while rows and not any(c.strip() for c in rows[-1]):
        rows.pop()
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise TableError(f"{where} is empty.")
    header = check_header(rows[0])
    if len(rows) == 1:
        raise TableError(f"{where} has only a header row and no data.")
    return pd.DataFrame(rows[1:], columns=header, dtype=str)


def excel_sheets(raw: bytes) -> list[str]:
    return _open_workbook(raw).sheetnames


def _open_workbook(raw: bytes):
    import openpyxl

    try:
        return openpyxl.load_workbook(io.BytesIO(raw), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise TableError(
            f"The Excel file could not be opened: it is damaged or not .xlsx ({exc})."
        ) from None
    except Exception as exc:  # openpyxl raises many types on broken workbooks
        raise TableError(
            f"The Excel file could not be opened ({type(exc).__name__}: {exc})."
        ) from None


def _read_excel(raw: bytes, sheet: str) -> tuple[pd.DataFrame, TableFormat]:
    workbook = _open_workbook(raw)
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
        rows = [[cell_text(v) for v in row] for row in workbook[chosen].iter_rows(values_only=True)]
    finally:
        workbook.close()
    width = max((len(r) for r in rows), default=0)
    # Trailing empty header cells (formatting beyond the table) are not columns.
    if rows:
        header = rows[0]
        while (
            header
            and not header[-1].strip()
            and all(len(r) < len(header) or not r[len(header) - 1].strip() for r in rows[1:])
        ):
            header = header[:-1]
        width = len(header)
        rows = [(r + [""] * width)[:width] for r in rows]
    frame = _frame_from_rows(rows, f"The sheet {chosen!r}")
    return frame, TableFormat(file_format=XLSX, sheet=chosen)


def _read_parquet(raw: bytes) -> tuple[pd.DataFrame, TableFormat]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(raw))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise TableError(f"The Parquet file is damaged and could not be read ({exc}).") from None
    header = check_header([str(n) for n in table.column_names])
    if table.num_rows == 0:
        raise TableError("The Parquet file has columns but no rows.")
    data = {}
    for name, column in zip(header, table.columns, strict=True):
        data[name] = [cell_text(v) for v in column.to_pylist()]
    return pd.DataFrame(data, columns=header, dtype=str), TableFormat(file_format=PARQUET)


# --- Entry point --------------------------------------------------------------------------


def read_table(
    raw: bytes, fmt: TableFormat | None = None, filename: str = ""
) -> tuple[pd.DataFrame, TableFormat]:
    """Parse a file's bytes into a DataFrame of strings, checking shape; raise ``TableError``."""
    file_format = fmt.file_format if fmt else sniff_format(raw[:SNIFF_BYTES], filename)
    if file_format == XLSX:
        return _read_excel(raw, fmt.sheet if fmt else "")
    if file_format == PARQUET:
        return _read_parquet(raw)
    if fmt is None:
        fmt = TableFormat(file_format=file_format)
    return _read_text(raw, fmt)
