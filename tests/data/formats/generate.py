"""Regenerate the upload fixtures in tests/data/formats/ and tests/data/bad/.

Run from the repository root: .venv/bin/python tests/data/formats/generate.py
The same small table of people in every format, and one file per kind of bad input.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import zipfile
from pathlib import Path

HERE = Path(__file__).parent
BAD = HERE.parent / "bad"

HEADER = [
    "record_id",
    "full_name",
    "email",
    "phone",
    "birth_date",
    "zip",
    "sex",
    "city",
    "visits",
    "weight",
    "diagnosis",
]
ROWS = [
    [
        1001,
        "Zoë Müller",
        "zoe.mueller@example.org",
        "+49 30 1234567",
        dt.date(1984, 3, 14),
        "10115",
        "F",
        "Köln",
        3,
        61.5,
        "asthma",
    ],
    [
        1002,
        "José Álvarez",
        "jose.alvarez@example.org",
        "+34 91 7654321",
        dt.date(1990, 11, 2),
        "28001",
        "M",
        "Málaga",
        1,
        80.0,
        "flu",
    ],
    [
        1003,
        "Anne O’Neill",
        "anne.oneill@example.org",
        "+353 1 2345678",
        dt.date(1975, 7, 30),
        "02139",
        "F",
        "Cork, IE",
        7,
        70.25,
        "",
    ],
    [
        1004,
        "Lars Østergård",
        "lars.ostergard@example.org",
        "+45 33 123456",
        dt.date(2001, 1, 9),
        "02141",
        "M",
        "Århus",
        2,
        90.0,
        "diabetes",
    ],
    [
        1005,
        "Chloé Dubois",
        "chloe.dubois@example.org",
        "+33 1 23456789",
        dt.date(1968, 12, 25),
        "75001",
        "F",
        "Besançon",
        5,
        55.75,
        "flu",
    ],
]


def text_cells(row) -> list[str]:
    out = []
    for value in row:
        if isinstance(value, dt.date):
            out.append(value.isoformat())
        elif isinstance(value, float):
            out.append(str(int(value)) if value.is_integer() else repr(value))
        else:
            out.append(str(value))
    return out


def csv_text(delimiter: str, rows=ROWS, header=HEADER) -> str:
    import csv

    buffer = io.StringIO()
    writer = csv.writer(
        buffer, delimiter=delimiter, lineterminator="\r\n" if delimiter == ";" else "\n"
    )
    writer.writerow(header)
    for row in rows:
        writer.writerow(text_cells(row))
    return buffer.getvalue()


def write_formats() -> None:
    (HERE / "people.csv").write_text(csv_text(","), encoding="utf-8")
    (HERE / "people_bom.csv").write_bytes(csv_text(";").encode("utf-8-sig"))
    latin = csv_text(";").replace("’", "'")  # Latin-1 has no curly apostrophe
    (HERE / "people_latin1.csv").write_bytes(latin.encode("latin-1"))
    # Windows-1252: the curly apostrophe is byte 0x92; a euro sign in an extra column.
    cp = csv_text(",", [r + ["€ 12"] for r in ROWS], HEADER + ["fee"])
    (HERE / "people_cp1252.csv").write_bytes(cp.encode("cp1252"))
    (HERE / "people.tsv").write_text(csv_text("\t"), encoding="utf-8")

    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "People"
    sheet.append(HEADER)
    for row in ROWS:
        sheet.append([None if v == "" else v for v in row])
    visits = workbook.create_sheet("Visits")
    visits.append(["record_id", "visit_date", "ward"])
    visits.append([1001, dt.datetime(2023, 5, 1, 0, 0), "A"])
    visits.append([1002, dt.datetime(2023, 6, 12, 14, 30), "B"])
    workbook.save(HERE / "people.xlsx")

    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(zip(*ROWS, strict=True))
    table = pa.table(
        {
            "record_id": pa.array(columns[0], pa.int64()),
            "full_name": pa.array(columns[1]),
            "email": pa.array(columns[2]),
            "phone": pa.array(columns[3]),
            "birth_date": pa.array(columns[4], pa.date32()),
            "zip": pa.array(columns[5]),
            "sex": pa.array(columns[6]),
            "city": pa.array(columns[7]),
            "visits": pa.array(columns[8], pa.int32()),
            "weight": pa.array(columns[9], pa.float64()),
            "diagnosis": pa.array([v or None for v in columns[10]]),
        }
    )
    pq.write_table(table, HERE / "people.parquet")


def write_bad() -> None:
    BAD.mkdir(exist_ok=True)
    (BAD / "empty.csv").write_bytes(b"")
    (BAD / "header_only.csv").write_bytes(b"name,age,zip\n")
    (BAD / "binary.bin").write_bytes(bytes(range(256)) * 4)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "not a table")
    (BAD / "archive.zip").write_bytes(buffer.getvalue())
    (BAD / "ragged.csv").write_bytes(b"name,age,zip\nAda,36,02139\nBob,41\nCy,29,02141\n")
    (BAD / "undecodable.csv").write_bytes(b"name,age\nAda,36\nB\x81b,41\n")
    (BAD / "duplicate_columns.csv").write_bytes(b"name,age,name\nAda,36,A\nBob,41,B\n")
    (BAD / "empty_column_name.csv").write_bytes(b"name,,zip\nAda,36,02139\nBob,41,02141\n")
    (BAD / "single_value.csv").write_bytes(
        b"age,country\n" + b"".join(f"{20 + i},Norway\n".encode() for i in range(10))
    )
    (BAD / "corrupt.parquet").write_bytes(b"PAR1" + b"\x15\x04garbage-not-thrift" * 8 + b"PAR1")

    # An .xlsx whose workbook lists no sheet at all.
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.active.append(["a", "b"])
    source = io.BytesIO()
    workbook.save(source)
    out = io.BytesIO()
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename.startswith("xl/worksheets/"):
                continue
            data = src.read(item.filename)
            if item.filename == "xl/workbook.xml":
                data = re.sub(rb"<sheets>.*</sheets>", b"<sheets/>", data, flags=re.S)
            if item.filename == "xl/_rels/workbook.xml.rels":
                data = re.sub(rb"<Relationship[^>]*worksheet[^>]*/>", b"", data)
            if item.filename == "[Content_Types].xml":
                data = re.sub(rb"<Override[^>]*worksheets[^>]*/>", b"", data)
            dst.writestr(item, data)
    (BAD / "no_sheets.xlsx").write_bytes(out.getvalue())


if __name__ == "__main__":
    write_formats()
    write_bad()
