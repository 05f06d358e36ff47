"""Reading uploaded CSV files: encoding and delimiter detection, and clear errors.

Every cell is read as a string, and missing values stay as the empty string: they are a value
of their own for the engine, never silently dropped.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import charset_normalizer
import pandas as pd

from . import InvalidInput

DELIMITERS = [",", ";", "\t", "|"]
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
SNIFF_BYTES = 64 * 1024


@dataclass(frozen=True)
class TableFormat:
    encoding: str
    delimiter: str

    @property
    def delimiter_name(self) -> str:
        return DELIMITER_NAMES.get(self.delimiter, repr(self.delimiter))


def detect_encoding(raw: bytes) -> str:
    """UTF-8 (with or without BOM) when the bytes are valid UTF-8, otherwise Latin-1/Windows-1252."""
    if not raw.strip():
        raise InvalidInput("The file is empty.")
    if b"\x00" in raw[:SNIFF_BYTES]:
        raise InvalidInput("This looks like a binary file, not a CSV text file.")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        utf8_error = exc
    else:
        return "utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8"
    guess = charset_normalizer.from_bytes(raw, cp_isolation=["cp1252", "latin_1"]).best()
    if guess is None:
        raise InvalidInput(
            "The file's bytes could not be decoded as UTF-8 or Latin-1 text "
            f"(first undecodable byte at offset {utf8_error.start})."
        )
    return "cp1252" if guess.encoding == "cp1252" else "latin-1"


def detect_delimiter(text_sample: str) -> str:
    lines = [line for line in text_sample.splitlines() if line.strip()][:50]
    if not lines:
        raise InvalidInput("The file is empty.")
    try:
        return csv.Sniffer().sniff("\n".join(lines), delimiters="".join(DELIMITERS)).delimiter
    except csv.Error:
        # One column, or a sample the sniffer cannot settle: take the delimiter that splits the
        # header into the most fields, or none (a single-column file).
        counts = {d: lines[0].count(d) for d in DELIMITERS}
        best = max(counts, key=counts.get)
        return best if counts[best] > 0 else ","


def read_table(raw: bytes, fmt: TableFormat | None = None) -> tuple[pd.DataFrame, TableFormat]:
    """Parse CSV bytes into a DataFrame of strings, checking shape; raise ``InvalidInput``."""
    if fmt is None:
        encoding = detect_encoding(raw)
        sample = raw[:SNIFF_BYTES].decode(encoding, errors="replace")
        fmt = TableFormat(encoding=encoding, delimiter=detect_delimiter(sample))
    text = raw.decode(fmt.encoding)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=fmt.delimiter)
    # Keep each row's line number in the file for error messages; skip blank lines.
    numbered = [(reader.line_num, row) for row in reader if row and any(c.strip() for c in row)]
    rows = [row for _, row in numbered]
    if not rows:
        raise InvalidInput("The file is empty.")
    header = [name.strip() for name in rows[0]]
    if len(rows) == 1:
        raise InvalidInput("The file has only a header row and no data.")
    for position, name in enumerate(header, start=1):
        if not name:
            raise InvalidInput(f"Column {position} of the header has no name.")
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InvalidInput(f"The column name {name!r} appears twice in the header.")
        seen.add(name)
    width = len(header)
    for line_number, row in numbered[1:]:
        if len(row) != width:
            raise InvalidInput(
                f"Line {line_number} has {len(row)} fields but the header has {width} "
                f"(delimiter: {DELIMITER_NAMES.get(fmt.delimiter, fmt.delimiter)})."
            )
    frame = pd.DataFrame(rows[1:], columns=header, dtype=str)
    return frame, fmt
