"""Reading uploaded CSV files: detection of encoding and delimiter, and clear errors."""

import pytest

from releases.engine.tabular import TableError, read_table


@pytest.mark.parametrize(
    ("raw", "delimiter"),
    [
        (b"a,b\n1,2\n3,4\n", ","),
        (b"a;b\n1;2\n3;4\n", ";"),
        (b"a\tb\n1\t2\n3\t4\n", "\t"),
        (b"a;b\r\n1;2\r\n3;4\r\n", ";"),
    ],
)
def test_delimiters_are_detected(raw, delimiter):
    frame, fmt = read_table(raw)
    assert fmt.delimiter == delimiter
    assert list(frame.columns) == ["a", "b"]
    assert frame.values.tolist() == [["1", "2"], ["3", "4"]]


def test_utf8_with_bom_and_latin1_are_decoded():
    frame, fmt = read_table("name;city\nZoë;Köln\n".encode("utf-8-sig"))
    assert fmt.encoding == "utf-8-sig"
    assert list(frame.columns) == ["name", "city"]
    assert frame.iloc[0].tolist() == ["Zoë", "Köln"]

    frame, fmt = read_table("name;city\nZoë;Köln\nJosé;Málaga\n".encode("latin-1"))
    assert fmt.encoding in {"latin-1", "cp1252"}
    assert frame["city"].tolist() == ["Köln", "Málaga"]


def test_missing_values_stay_as_empty_strings():
    frame, _ = read_table(b"a,b,c\n1,,3\n,,\n4,5,6\n")
    # A row of only empty fields is a blank line and skipped; empty cells are kept.
    assert frame.values.tolist() == [["1", "", "3"], ["4", "5", "6"]]


def test_quoted_fields_keep_their_delimiters():
    frame, _ = read_table(b'name,comment\nA,"x, y"\nB,z\n')
    assert frame["comment"].tolist() == ["x, y", "z"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "The file is empty."),
        (b"   \n\n", "The file is empty."),
        (b"a,b,c\n", "only a header"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        (b"a,b\n1,2\n3,4,5\n", "Line 3 has 3 fields but the header has 2"),
        (b"a,b\n1,2\n3\n", "Line 3 has 1 fields but the header has 2"),
        (b"a,,c\n1,2,3\n", "Column 2 of the header has no name"),
        (b"a,b,a\n1,2,3\n", "appears twice"),
    ],
)
def test_bad_files_are_rejected_with_a_clear_message(raw, message):
    with pytest.raises(TableError) as error:
        read_table(raw)
    assert message in str(error.value)
