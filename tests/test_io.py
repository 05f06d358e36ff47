"""Reading within bounds, decimal commas, the batched extract writer, the command line's output
against a plain pandas reference, and the dataset page of a wide file."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from django.urls import reverse

from releases.datasets import services as datasets
from releases.engine import tabular
from releases.engine.export import neutralise_formulas, write_csv
from releases.engine.tabular import ReadLimits, TableError, read_table
from releases.models import Dataset, DatasetColumn
from tests.conftest import ADULT, ADULT_QUASI_IDENTIFIERS
from tests.support.factories import make_dataset

ROOT = Path(__file__).resolve().parents[1]


# --- Hostile files ------------------------------------------------------------------------


def _xlsx_bytes(rows: list[list[str]]) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    for row in rows:
        sheet.append(row)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _replace_member(xlsx: bytes, member: str, write) -> bytes:
    """The workbook with one member rewritten by ``write(zip_file, name)``."""
    source = zipfile.ZipFile(io.BytesIO(xlsx))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            if info.filename == member:
                write(target, member)
            else:
                target.writestr(info, source.read(info.filename))
    return out.getvalue()


def zip_bomb_xlsx(expanded_mb: int = 64) -> bytes:
    """A small .xlsx whose sheet expands to ``expanded_mb`` MB of repeated rows."""
    xlsx = _xlsx_bytes([["a", "b"], ["1", "2"]])

    def write(target, name):
        row = b'<row><c t="inlineStr"><is><t>x</t></is></c></row>'
        with target.open(name, "w", force_zip64=True) as out:
            out.write(
                b'<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/'
                b'spreadsheetml/2006/main"><sheetData>'
            )
            block = row * (1024 * 1024 // len(row))
            for _ in range(expanded_mb):
                out.write(block)
            out.write(b"</sheetData></worksheet>")

    return _replace_member(xlsx, "xl/worksheets/sheet1.xml", write)


def huge_dimension_xlsx() -> bytes:
    """A small .xlsx whose sheet declares the largest sheet Excel allows."""
    xlsx = _xlsx_bytes([["a", "b"], ["1", "2"]])
    sheet = zipfile.ZipFile(io.BytesIO(xlsx)).read("xl/worksheets/sheet1.xml")
    sheet = re.sub(rb'<dimension ref="[^"]*"', b'<dimension ref="A1:XFD1048576"', sheet)
    return _replace_member(xlsx, "xl/worksheets/sheet1.xml", lambda t, n: t.writestr(n, sheet))


def wide_csv(columns: int = 100_000) -> bytes:
    header = ",".join(f"c{i}" for i in range(columns))
    return (header + "\n" + ",".join("1" for _ in range(columns)) + "\n").encode()


def giant_field_csv(field_mb: int = 40) -> bytes:
    return b"a,b\n1," + b"x" * (field_mb * 1024 * 1024) + b"\n2,3\n"


HOSTILE = {
    "zip bomb": ("bomb.xlsx", zip_bomb_xlsx, "MAX_COMPRESSION_RATIO"),
    "declared sheet size": ("big.xlsx", huge_dimension_xlsx, "MAX_COLUMNS"),
    "100,000 columns": ("wide.csv", wide_csv, "MAX_COLUMNS"),
    "giant field": ("giant.csv", giant_field_csv, "MAX_CELL_BYTES"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_are_refused_naming_the_limit(case, steward):
    filename, make, setting = HOSTILE[case]
    started = time.perf_counter()
    dataset = make_dataset(steward, make(), filename)
    assert dataset.status == Dataset.Status.FAILED
    assert setting in dataset.error
    assert not dataset.file_path
    assert time.perf_counter() - started < 30  # generous: the point is "not minutes"


def test_too_many_rows_are_refused_by_the_row_limit(steward, settings):
    settings.MAX_ROWS = 1000
    dataset = make_dataset(steward, "a,b\n" + "1,2\n" * 1500)
    assert dataset.status == Dataset.Status.FAILED
    assert "more than 1,000 rows" in dataset.error and "MAX_ROWS" in dataset.error
    settings.MAX_ROWS = 1500
    assert make_dataset(steward, "a,b\n" + "1,2\n" * 1500).status == Dataset.Status.READY


def test_uncompressed_size_limit_applies_to_text_and_excel(steward, settings):
    settings.MAX_UNCOMPRESSED_BYTES = 1000
    refused = make_dataset(steward, "a,b\n" + "1,2\n" * 400)
    assert "MAX_UNCOMPRESSED_BYTES" in refused.error
    settings.MAX_UNCOMPRESSED_BYTES = 2 * 1024**2
    bomb = make_dataset(steward, zip_bomb_xlsx(expanded_mb=4), "bomb.xlsx")
    assert "MAX_UNCOMPRESSED_BYTES" in bomb.error


def test_a_giant_field_within_the_block_names_its_line_and_column():
    limits = ReadLimits(max_cell_bytes=100)
    raw = b"a,b\n1,2\n3," + b"y" * 500 + b"\n"
    with pytest.raises(TableError) as error:
        read_table(raw, limits=limits)
    message = str(error.value)
    assert "Line 3, column 2 ('b')" in message and "MAX_CELL_BYTES" in message


CHILD = textwrap.dedent(
    """
    import json, resource, sys
    sys.path.insert(0, {root!r})
    from releases.engine import tabular
    limits = tabular.ReadLimits(max_bytes=4 * 1024**3, max_rows=20_000_000, max_columns=5000,
                                max_cell_bytes=1024**2, max_compression_ratio=100)
    try:
        scan = tabular.open_table(sys.argv[1], filename=sys.argv[1], limits=limits)
        for _ in scan.batches():
            pass
        outcome = "read"
    except tabular.TableError as exc:
        outcome = str(exc)
    print(json.dumps({{"outcome": outcome,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
    """
)


@pytest.mark.process
@pytest.mark.parametrize("case", ["zip bomb", "100,000 columns", "giant field"])
def test_refusing_a_hostile_file_keeps_the_reader_small(case, tmp_path):
    """The reader, in a process of its own, refuses the file with a small peak memory."""
    filename, make, setting = HOSTILE[case]
    path = tmp_path / filename
    path.write_bytes(make())
    (tmp_path / "none.csv").write_text("a\n1\n")
    baseline = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(ROOT)), str(tmp_path / "none.csv")],
        capture_output=True,
        text=True,
        check=True,
    )
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(ROOT)), str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout)
    base = json.loads(baseline.stdout)["peak_mb"]
    assert setting in result["outcome"]
    # The giant field is read in blocks of the reader's size, never whole.
    assert result["peak_mb"] - base < 250, (result, base)


# --- Encodings, delimiters, line numbers ----------------------------------------------------


def test_utf16_and_cp1252_files_are_transcoded():
    text = "name;note\nZoë;“quoted” €\nJosé;ok\n"
    frame, fmt = read_table(text.encode("utf-16"))
    assert fmt.encoding == "utf-16" and fmt.delimiter == ";"
    assert frame["note"].tolist() == ["“quoted” €", "ok"]
    frame, fmt = read_table(text.encode("cp1252"))
    assert fmt.encoding == "cp1252"
    assert frame["name"].tolist() == ["Zoë", "José"]


def test_a_file_that_is_not_utf8_late_in_the_file_is_read_as_latin1():
    raw = b"a,b\n" + b"x,y\n" * 200_000 + "Köln,z\n".encode("latin-1")
    frame, fmt = read_table(raw)
    assert fmt.encoding == "latin-1"
    assert frame["a"].iloc[-1] == "Köln"


def test_markers_stay_text_and_blank_lines_are_skipped():
    frame, _ = read_table(b"a,b\nNA,\n\n,,\n?,null\n")
    assert frame.values.tolist() == [["NA", ""], ["?", "null"]]


def test_ragged_row_after_a_quoted_line_break_names_its_physical_line():
    raw = b'a,b\n1,"two\nlines"\n3,4\n5,6,7\n'
    with pytest.raises(TableError) as error:
        read_table(raw)
    assert "Line 5 has 3 fields but the header has 2" in str(error.value)


def test_undecodable_bytes_name_line_and_column():
    raw = b"a;b\n1;2\n3;x\x81y\n"
    with pytest.raises(TableError) as error:
        read_table(raw)
    assert "line 3, column 2 ('b')" in str(error.value)


def test_parquet_cells_become_text_like_a_csv_export(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "i": pa.array([1, None, 3], pa.int64()),
            "f": pa.array([1.0, 2.5, None]),
            "b": pa.array([True, False, None]),
            "s": pa.array(["x", None, "z"]).dictionary_encode(),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    frame, fmt = tabular.read_path(path)
    assert fmt.file_format == "parquet"
    assert frame.astype(str).values.tolist() == [
        ["1", "1", "true", "x"],
        ["", "2.5", "false", ""],
        ["3", "", "", "z"],
    ]


# --- Decimal commas -----------------------------------------------------------------------


def test_decimal_commas_make_a_decimal_column(steward):
    dataset = make_dataset(steward, "id;weight\n1;72,5\n2;80\n3;64,25\n4;-1,5\n")
    weight = dataset.columns.get(name="weight")
    assert weight.inferred_type == "decimal"
    assert (weight.profile["min"], weight.profile["max"]) == (-1.5, 80)
    assert weight.profile["warnings"] == []
    assert sum(b["count"] for b in weight.profile["chart"]["bins"]) == 4
    # The values themselves are never rewritten.
    assert datasets.load_frame(dataset)["weight"].tolist() == ["72,5", "80", "64,25", "-1,5"]


def test_comma_files_keep_comma_numbers_as_text_until_forced_decimal(steward):
    dataset = make_dataset(steward, 'id,weight\n1,"72,5"\n2,"80,1"\n3,"64,25"\n')
    weight = dataset.columns.get(name="weight")
    assert weight.inferred_type != "decimal"
    weight = datasets.set_column_type(steward, dataset, weight.pk, "decimal")
    assert weight.profile["warnings"] == []
    assert (weight.profile["min"], weight.profile["max"]) == (64.25, 80.1)


# --- Profiles on value counts ---------------------------------------------------------------


def test_profile_from_counts_matches_the_profile_of_the_rows():
    from releases.datasets import profiles as profiling

    rng = np.random.default_rng(3)
    rows = pd.Series(rng.choice(["1", "2", "10", " 7", "NA", "", "x"], 500), dtype=object)
    as_numbers = profiling.column_profile(rows, "integer")
    counts = rows.value_counts()
    assert as_numbers["rows"] == 500
    assert as_numbers["missing"] == int(counts.get("NA", 0) + counts.get("", 0))
    assert as_numbers["warnings"] == [f"{int(counts.get('x', 0))} values are not numbers."]
    assert (as_numbers["min"], as_numbers["max"]) == (1, 10)
    assert as_numbers["top"][0] == {"value": counts.index[0], "count": int(counts.iloc[0])}
    assert sum(b["count"] for b in as_numbers["chart"]["bins"]) == 500 - as_numbers[
        "missing"
    ] - int(counts.get("x", 0))


@pytest.mark.parametrize(
    ("values", "order"),
    [
        (["2020-01-01", "1500-01-01", "2300-05-05", "2021-06-01", ""], "ymd"),
        (["01/01/2020", "01/01/1500", "05/05/2300", "01/06/2021", ""], "dmy"),
    ],
)
def test_a_date_profile_reads_dates_from_1677_to_2262(values, order):
    # The range profiles have always read as dates (datetime64[ns]); others are counted apart.
    from releases.datasets import profiles as profiling

    profile = profiling.column_profile(pd.Series(values * 3, dtype=object), "date", order)
    assert profile["warnings"] == ["6 values are not dates in this format."]
    assert (profile["min"], profile["max"]) == ("2020-01-01", "2021-06-01")
    assert sum(b["count"] for b in profile["chart"]["bins"]) == 6


# 300 columns, each profiled with its suggestions: seconds of profiling.
@pytest.mark.slow
def test_profiling_reaches_100_percent_and_stores_every_column(steward):
    header = ",".join(f"c{i}" for i in range(300))
    body = "\n".join(",".join(str((r * i) % 7) for i in range(300)) for r in range(20))
    dataset = make_dataset(steward, header + "\n" + body + "\n")
    assert dataset.status == Dataset.Status.READY
    assert dataset.progress == 1.0
    assert dataset.columns.count() == 300
    assert datasets.load_frame(dataset, ["c299"])["c299"].tolist()[:3] == ["0", "5", "3"]


# --- Extract writing ------------------------------------------------------------------------


def _reference_neutralise(df: pd.DataFrame) -> pd.DataFrame:
    """Straightforward per-cell neutralisation, as the extract was written before."""

    def cell(value: str) -> str:
        if value[:1] in ("=", "+", "-", "@", "\t", "\r") and not re.fullmatch(
            r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", value
        ):
            return "'" + value
        return value

    out = df.astype(object).map(lambda v: cell(str(v)))
    out.columns = [cell(c) for c in df.columns]
    return out


def test_write_csv_on_categorical_data_matches_the_pandas_reference():
    values = ["a", "b,c", 'q"x', "l\nm", "=1+1", "-5", "+3.2", "@x", "\tt", "", " s", "é€", "-"]
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "plain": rng.choice(values, 2000),
            "=name": pd.Categorical(rng.choice(values, 2000)),
        }
    )
    for delimiter in [",", ";", "\t"]:
        out = io.BytesIO()
        written = write_csv(frame, out, delimiter, batch_rows=333)
        reference = _reference_neutralise(frame).to_csv(
            sep=delimiter, index=False, lineterminator="\n"
        )
        assert out.getvalue() == reference.encode("utf-8")
        assert written.size == len(out.getvalue()) and written.rows == 2000
        import hashlib

        assert written.sha256 == hashlib.sha256(out.getvalue()).hexdigest()


# Object strings (pandas 2's text), pandas 3's str dtype, and Arrow strings of both widths.
STRING_DTYPES = [object, "str", pd.ArrowDtype(pa.string()), pd.ArrowDtype(pa.large_string())]


@pytest.mark.parametrize("dtype", STRING_DTYPES, ids=["object", "str", "arrow", "arrow-large"])
def test_write_csv_writes_every_kind_of_string_column_as_the_pandas_reference(dtype):
    values = ["a", "b,c", 'q"x', "l\nm", "=1+1", "-5", "+3.2", "@x", "\tt", "", " s", "é€", "-"]
    rng = np.random.default_rng(2)
    cells = pd.Series(rng.choice(np.array(values, dtype=object), 3000), dtype=object)
    frame = pd.DataFrame({"id": cells.astype(dtype), "=name": cells.iloc[::-1].astype(dtype)})
    assert all(frame.dtypes == pd.Series(dtype=dtype).dtype)
    for delimiter in [",", ";"]:
        out = io.BytesIO()
        write_csv(frame, out, delimiter, batch_rows=777)
        reference = _reference_neutralise(frame.astype(object)).to_csv(
            sep=delimiter, index=False, lineterminator="\n"
        )
        assert out.getvalue() == reference.encode("utf-8")


@pytest.mark.parametrize("dtype", STRING_DTYPES, ids=["object", "str", "arrow", "arrow-large"])
def test_a_missing_cell_of_any_string_column_is_written_empty(dtype):
    frame = pd.DataFrame(
        {"a": pd.Series(["=x", None, "y"], dtype=object).astype(dtype), "b": ["1", "2", "3"]}
    )
    out = io.BytesIO()
    write_csv(frame, out)
    assert out.getvalue() == b"a,b\n'=x,1\n,2\ny,3\n"


@pytest.mark.parametrize("dtype", STRING_DTYPES, ids=["object", "str", "arrow", "arrow-large"])
def test_neutralising_keeps_a_column_s_dtype_and_its_missing_cells(dtype):
    frame = pd.DataFrame({"a": pd.Series(["=x", None, "y"], dtype=object).astype(dtype)})
    out = neutralise_formulas(frame)["a"]
    assert out.dtype == frame["a"].dtype
    assert out.iloc[0] == "'=x" and pd.isna(out.iloc[1]) and out.iloc[2] == "y"


def test_carriage_returns_are_always_quoted():
    out = io.BytesIO()
    write_csv(pd.DataFrame({"a": ["x\ry", "z"]}), out)
    assert out.getvalue() == b'a\n"x\ry"\nz\n'


@pytest.mark.process
def test_the_command_line_output_equals_a_pandas_reference_on_adult(tmp_path):
    from releases.engine.api import anonymize
    from releases.engine.hierarchy import Hierarchy
    from releases.engine.shuffle import order_keys
    from releases.engine.types import AnonymizationConfig, PrivacyModel

    out = tmp_path / "out.csv"
    qis = [f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}" for q in ADULT_QUASI_IDENTIFIERS]
    proc = subprocess.run(
        [sys.executable, "manage.py", "anonymize", str(ADULT / "adult.csv"), "--out", str(out)]
        + ["--qi", *qis, "--k", "5", "--suppression-limit", "0.05", "--seed", "5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    data = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    config = AnonymizationConfig(
        quasi_identifiers={
            q: Hierarchy.from_arx_csv(ADULT / f"adult_hierarchy_{q}.csv", attribute=q)
            for q in ADULT_QUASI_IDENTIFIERS
        },
        model=PrivacyModel(k=5, suppression_limit=0.05),
    )
    result = anonymize(data, config)
    released = result.data
    assert result.source_rows is not None
    # The command line writes the rows in the seed's keyed order: sorted by each row's key, a
    # hash of the seed and the row's input index (tests/engine/test_streaming.py checks the hash
    # itself against SplitMix64 in Python integers).
    drawn = np.argsort(order_keys(5, result.source_rows), kind="stable")
    reference = _reference_neutralise(released.iloc[drawn]).to_csv(
        sep=";", index=False, lineterminator="\n"
    )
    assert out.read_bytes() == reference.encode("utf-8")


# --- The dataset page of a wide file -------------------------------------------------------


def test_a_wide_dataset_page_shows_one_page_of_columns(client, steward):
    # Profiled as a narrow file, then given 3,000 columns like it: the page is what is tested.
    dataset = make_dataset(steward, "col0,col1\n1,2\n3,4\n")
    template = dataset.columns.get(name="col1")
    width = 3000
    DatasetColumn.objects.bulk_create(
        [
            DatasetColumn(
                dataset=dataset,
                position=i,
                name=f"col{i}",
                distinct_values=template.distinct_values,
                inferred_type=template.inferred_type,
                profile=template.profile,
                suggested_role=template.suggested_role,
                suggestion_reason=template.suggestion_reason,
            )
            for i in range(2, width)
        ]
    )
    dataset.preview = [[str((r + i) % 5) for i in range(width)] for r in range(10)]
    dataset.save(update_fields=["preview"])
    client.force_login(steward)
    url = reverse("releases:dataset_detail", args=[dataset.pk])
    page = client.get(url)
    html = page.content.decode()
    assert page.status_code == 200
    assert len(page.content) < 1_000_000
    assert "3000 columns" in html and "Page 1 of 60" in html
    # The request form below names the first columns still without a role, whatever the page.
    shown = html.split('<section class="card" id="request">')[0]
    assert 'id="column-' in shown and "col49" in shown and "col50<" not in shown
    later = client.get(url + "?page=60").content.decode()
    later = later.split('<section class="card" id="request">')[0]
    assert "col2999" in later and "col0<" not in later
    # A role set on a later page is kept.
    column = DatasetColumn.objects.get(dataset=dataset, name="col2999")
    datasets.set_column_role(steward, dataset, column.pk, "quasi")
    assert DatasetColumn.objects.get(pk=column.pk).role == "quasi"
