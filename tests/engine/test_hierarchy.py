"""Generalization hierarchies: ARX import, validation errors, builders and round trips."""

from __future__ import annotations

import pytest

from releases.engine import Hierarchy, HierarchyError
from releases.engine.types import EngineError

ARX_TEXT = "39;35-39;30-39;20-39;*\n40;40-44;40-49;40-59;*\n21;20-24;20-29;20-39;*\n"


# ---------------------------------------------------------------------------- import
def test_reads_an_arx_file_from_a_path(tmp_path):
    path = tmp_path / "age.csv"
    path.write_text(ARX_TEXT)
    for source in (path, str(path)):
        h = Hierarchy.from_arx_csv(source, attribute="age")
        assert h.height == 5
        assert h.values == ["39", "40", "21"]
        assert h.generalize("40", 2) == "40-49"
        assert h.attribute == "age"


def test_reads_bytes_with_bom_crlf_blank_lines_and_no_final_newline():
    raw = "\ufeffWhite;*\r\n\r\nBlack;*\r\n   \r\nOther;*".encode()
    h = Hierarchy.from_arx_csv(raw)
    assert h.values == ["White", "Black", "Other"]
    assert h.height == 2


def test_falls_back_to_latin1():
    raw = "Bogotá;Colombia;*\nCali;Colombia;*\n".encode("latin-1")
    h = Hierarchy.from_arx_csv(raw)
    assert h.values[0] == "Bogotá"


def test_detects_comma_and_accepts_an_explicit_delimiter():
    h = Hierarchy.from_arx_csv("a,x,*\nb,x,*\n")
    assert h.rows == (("a", "x", "*"), ("b", "x", "*"))
    h = Hierarchy.from_arx_csv("a|x|*\nb|y|*\n", delimiter="|")
    assert h.generalize("b", 1) == "y"


def test_reads_every_adult_hierarchy(adult, adult_hierarchies):
    for name, h in adult_hierarchies.items():
        h.validate_against(adult[name].unique())
        assert all(row[-1] == "*" for row in h.rows)
    assert adult_hierarchies["age"].height == 5
    assert len(adult_hierarchies["native-country"].rows) == 41


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_file_is_an_error(text):
    with pytest.raises(HierarchyError, match="empty"):
        Hierarchy.from_arx_csv(text, attribute="zip")


def test_rows_of_unequal_length_name_the_row_and_value():
    text = "a;x;*\nb;x;*\nc;*\nd;y;*\n"
    with pytest.raises(HierarchyError, match=r"row 3 \('c'\) has 2 levels, the others 3"):
        Hierarchy.from_arx_csv(text)


def test_a_value_with_two_different_rows_is_refused_naming_both_rows():
    with pytest.raises(HierarchyError, match=r"'b' appears twice with different .*rows 2 and 3"):
        Hierarchy.from_arx_csv("a;x;*\nb;x;*\nb;y;*\n")


# ARX's benchmark hierarchy of FARS ``iage`` lists the row of 99 twice, identically.
IAGE = "97;95-99;90-99;*\n98;95-99;90-99;*\n99;95-99;90-99;*\n99;95-99;90-99;*\n"


def test_an_identical_repeated_row_is_accepted_with_a_warning():
    h = Hierarchy.from_arx_csv(IAGE, attribute="iage")
    assert h.values == ["97", "98", "99"]
    assert h.generalize("99", 1) == "95-99"
    assert h.warnings == (
        "Hierarchy of 'iage': value '99' is listed twice with the same generalizations "
        "(rows 3 and 4); the repeated row is ignored.",
    )
    # Every row of the file is a leaf of the domain, as ARX counts it (DomainShareMaterialized):
    # 4 rows, "95-99" covers all of them.
    assert h.domain_size == 4
    assert h.domain_shares(0)["99"] == 2 / 4
    assert h.domain_shares(1) == {"95-99": 1.0}
    # The file round-trips as given, and a renamed copy keeps the warning.
    again = Hierarchy.from_arx_csv(h.to_arx_csv())
    assert again.domain_size == 4 and again == h
    assert h.with_attribute("age").warnings[0].startswith("Hierarchy of 'age': value '99'")


def test_a_hierarchy_without_repeats_has_no_warnings(adult_hierarchies):
    assert all(h.warnings == () for h in adult_hierarchies.values())


def test_non_functional_mapping_names_the_values_and_level():
    # 'a' and 'b' agree at level 1 ('x') but differ at level 2.
    with pytest.raises(HierarchyError, match=r"'a' and 'b' share 'x' at level 1 .* level 2"):
        Hierarchy.from_arx_csv("a;x;p;*\nb;x;q;*\n")


def test_hierarchy_errors_are_engine_errors():
    assert issubclass(HierarchyError, EngineError)


def test_validate_against_names_the_first_uncovered_value():
    h = Hierarchy.from_arx_csv("a;*\nb;*\n", attribute="grade")
    h.validate_against(["a", "b", "a"])
    with pytest.raises(HierarchyError, match=r"'grade'.*'c' is not covered"):
        h.validate_against(["a", "c", "d"])


# ---------------------------------------------------------------------------- builders
def _is_functional(h: Hierarchy) -> bool:
    for level in range(1, h.height - 1):
        parents = {}
        for row in h.rows:
            if parents.setdefault(row[level], row[level + 1]) != row[level + 1]:
                return False
    return True


def test_intervals_with_given_widths():
    h = Hierarchy.intervals(["20", "24", "25", "39", "41"], widths=[5, 10, 20])
    assert h.height == 5
    assert [h.generalize("24", lv) for lv in range(5)] == ["24", "20-24", "20-29", "20-39", "*"]
    assert h.generalize("41", 3) == "40-59"
    assert h.generalize("25", 1) == "25-29"


def test_intervals_default_widths_are_nested_and_end_in_star():
    values = [str(v) for v in range(17, 91)]
    h = Hierarchy.intervals(values)
    assert h.height >= 3
    assert all(row[-1] == "*" for row in h.rows)
    assert _is_functional(h)
    # Each level merges at least as much as the one below.
    counts = [len({row[lv] for row in h.rows}) for lv in range(h.height)]
    assert counts == sorted(counts, reverse=True)
    assert counts[-1] == 1 and counts[0] == len(values)


def test_intervals_keep_non_numeric_and_missing_values_apart():
    h = Hierarchy.intervals(["3", "7", "", "unknown"], widths=[5])
    assert h.rows[2] == ("", "", "*")
    assert h.rows[3] == ("unknown", "unknown", "*")
    assert h.generalize("7", 1) == "5-9"


def test_intervals_with_decimals_use_half_open_labels():
    h = Hierarchy.intervals(["0.5", "1.25", "2.75"], widths=[1, 2])
    assert h.generalize("1.25", 1) == "[1, 2["
    assert h.generalize("2.75", 2) == "[2, 4["


def test_intervals_reject_widths_that_do_not_nest():
    with pytest.raises(HierarchyError, match="multiple"):
        Hierarchy.intervals(["1", "2"], widths=[5, 7])


def test_dates_go_day_month_year_decade_star():
    h = Hierarchy.dates(["2021-03-04", "1999-12-31", "not a date", ""])
    assert h.rows[0] == ("2021-03-04", "2021-03", "2021", "2020-2029", "*")
    assert h.rows[1][1:4] == ("1999-12", "1999", "1990-1999")
    assert h.rows[2] == ("not a date",) * 4 + ("*",)
    assert h.rows[3] == ("",) * 4 + ("*",)


def test_dates_dayfirst():
    h = Hierarchy.dates(["04/03/2021"], dayfirst=True)
    assert h.generalize("04/03/2021", 1) == "2021-03"
    h = Hierarchy.dates(["04/03/2021"])
    assert h.generalize("04/03/2021", 1) == "2021-04"


def test_dates_in_iso_form_stay_year_month_day_when_the_day_comes_first():
    # A column mixing 31/12/2020 and ISO dates: dayfirst concerns the former only.
    h = Hierarchy.dates(["13/01/2020", "2020-01-05", "2020-02-03 10:00", "20200304"], dayfirst=True)
    assert [r[1] for r in h.rows] == ["2020-01", "2020-01", "2020-02", "2020-03"]


def test_dates_keep_their_own_utc_offset():
    h = Hierarchy.dates(["2020-01-31T23:00:00+02:00", "2021-12-31T23:30:00-05:00", "2022-05-06"])
    assert [r[1] for r in h.rows] == ["2020-01", "2021-12", "2022-05"]


def test_dates_outside_1677_to_2262_are_kept_as_values_of_their_own():
    # The range the hierarchies and profiles have always read as dates (datetime64[ns]).
    values = ["1500-06-01", "1677-09-22", "2262-04-11", "2262-04-12", "31/12/2999", "0001-01-01"]
    h = Hierarchy.dates(values, dayfirst=True)
    assert [r[1] for r in h.rows] == [
        "1500-06-01",
        "1677-09",
        "2262-04",
        "2262-04-12",
        "31/12/2999",
        "0001-01-01",
    ]


def test_masking_hides_one_more_character_per_level():
    h = Hierarchy.masking(["02139", "02141", "9"])
    assert list(h.rows[0]) == ["02139", "0213*", "021**", "02***", "0****", "*"]
    assert h.generalize("02141", 3) == "02***"
    assert h.generalize("02139", 3) == "02***"
    assert _is_functional(h)


def test_categorical_and_missing_value():
    h = Hierarchy.categorical(["M", "F", "", "M"])
    assert h.rows == (("M", "*"), ("F", "*"), ("", "*"))


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        (["1", "5", "", "12"], "intervals"),
        (["1", "x"], "categorical"),
        (["4", "4"], "categorical"),
        (["a", "b"], "categorical"),
    ],
)
def test_automatic_picks_intervals_only_for_numbers(values, kind):
    assert Hierarchy.automatic(values).kind == kind


def test_preview_lists_levels_of_some_values():
    h = Hierarchy.masking([f"{i:03d}" for i in range(50)])
    preview = h.preview(limit=3)
    assert len(preview) == 3
    assert preview[0] == ["000", "00*", "0**", "*"]


@pytest.mark.parametrize(
    "build",
    [
        lambda: Hierarchy.intervals(["20", "33", "", "n/a", "71"]),
        lambda: Hierarchy.dates(["2020-01-02", "2021-05-06", ""]),
        lambda: Hierarchy.masking(["12345", "12399", ""]),
        lambda: Hierarchy.categorical(["a;b", "c,d", 'say "hi"', ""]),
    ],
)
def test_to_arx_csv_round_trips(build):
    h = build()
    assert Hierarchy.from_arx_csv(h.to_arx_csv()) == h
    assert Hierarchy.from_arx_csv(h.to_arx_csv(delimiter=","), delimiter=",") == h


def test_adult_file_round_trips(adult_hierarchies):
    h = adult_hierarchies["education"]
    assert Hierarchy.from_arx_csv(h.to_arx_csv()).rows == h.rows
