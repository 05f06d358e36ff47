"""Datasets: robust upload, bad input, column profiles, suggested roles, risk and hierarchies.

Profiling is called directly (``make_dataset``); the Celery path is covered by the browser test.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from django.urls import reverse

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.datasets import profiling
from releases.datasets import risk as dataset_risk
from releases.datasets import services as datasets
from releases.engine import Hierarchy
from releases.models import AuditEvent, Dataset, DatasetColumn, ReleaseRequest, Role
from releases.templatetags.charts import column_chart
from tests.support.factories import make_dataset, upload

pytestmark = pytest.mark.django_db

DATA = Path(__file__).parent / "data"
BAD = DATA / "bad"
FORMATS = DATA / "formats"
A = AuditEvent.Action


def login(client, user):
    client.force_login(user)


def stored_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


# --- Bad input ------------------------------------------------------------------------------

# Refused in the web request, before anything is stored.
REFUSED_ON_UPLOAD = [
    ("empty.csv", "The file is empty."),
    ("binary.bin", "binary file of an unknown format"),
    ("archive.zip", "ZIP archive, not a table"),
]
# Refused by the profiling task: the dataset keeps only the reason.
REFUSED_BY_PROFILING = [
    ("header_only.csv", "only a header row and no data"),
    ("ragged.csv", "Line 3 has 2 fields but the header has 3"),
    ("undecodable.csv", "byte 0x81 on line 3, column 1 ('name')"),
    ("duplicate_columns.csv", "'name' appears twice in the header (columns 1 and 3)"),
    ("empty_column_name.csv", "Column 2 of the header has no name"),
    ("no_sheets.xlsx", "The Excel file has no sheets."),
    ("corrupt.parquet", "The Parquet file is damaged"),
]


@pytest.mark.parametrize(("filename", "message"), REFUSED_ON_UPLOAD)
def test_files_refused_on_upload_store_nothing_and_are_audited(
    steward, private_media_root, filename, message
):
    with pytest.raises(InvalidInput, match=message.replace(".", r"\.")):
        datasets.create_dataset(steward, upload((BAD / filename).read_bytes(), filename))
    assert Dataset.objects.count() == 0
    assert stored_files(private_media_root) == []
    event = AuditEvent.objects.get(action=A.UPLOAD_REJECTED)
    assert event.actor == steward and message in event.detail["reason"]
    assert event.detail["filename"] == filename


@pytest.mark.parametrize(("filename", "message"), REFUSED_BY_PROFILING)
def test_files_refused_by_profiling_keep_only_the_reason(
    steward, private_media_root, filename, message
):
    dataset = make_dataset(steward, (BAD / filename).read_bytes(), filename)
    assert dataset.status == Dataset.Status.FAILED
    assert message in dataset.error
    assert not dataset.columns.exists() and dataset.file_path == ""
    assert stored_files(private_media_root) == []
    event = AuditEvent.objects.get(action=A.UPLOAD_REJECTED)
    assert message in event.detail["reason"] and event.detail["dataset_name"] == filename
    with pytest.raises(InvalidInput):
        datasets.ensure_ready(dataset)


@pytest.mark.parametrize(("filename", "message"), REFUSED_ON_UPLOAD + REFUSED_BY_PROFILING)
def test_every_bad_file_shows_its_message_on_the_page(client, steward, filename, message):
    login(client, steward)
    response = client.post(
        reverse("releases:dataset_list"), {"file": upload((BAD / filename).read_bytes(), filename)}
    )
    if response.status_code == 400:
        page = response.content.decode()
    else:
        profiling.profile_dataset(Dataset.objects.get().pk)
        page = client.get(response["Location"]).content.decode()
        assert "The file was refused" in page
    from html import unescape

    assert message in unescape(page)


def test_a_file_over_the_size_limit_is_refused_with_the_limit(
    client, steward, settings, private_media_root
):
    settings.MAX_UPLOAD_BYTES = 100
    content = (FORMATS / "people.csv").read_bytes()
    with pytest.raises(InvalidInput, match="larger than the 100 bytes limit"):
        datasets.create_dataset(steward, upload(content, "people.csv"))
    # The page refuses it from the request's length, before reading the body.
    login(client, steward)
    response = client.post(
        reverse("releases:dataset_list"), {"file": upload(content * 400, "big.csv")}
    )
    assert response.status_code == 400
    assert "larger than the 100 bytes limit (MAX_UPLOAD_BYTES)" in response.content.decode()
    assert Dataset.objects.count() == 0 and stored_files(private_media_root) == []
    assert AuditEvent.objects.filter(action=A.UPLOAD_REJECTED).count() == 2


def test_a_column_of_one_value_is_accepted_with_a_warning(steward):
    dataset = make_dataset(steward, (BAD / "single_value.csv").read_bytes(), "single_value.csv")
    assert dataset.status == Dataset.Status.READY
    country = dataset.columns.get(name="country")
    assert country.profile["single_value"] is True
    assert any("same value" in w for w in country.profile["warnings"])
    assert not dataset.columns.get(name="age").profile["warnings"]


# --- Formats --------------------------------------------------------------------------------

THIRD_ROW = {
    "record_id": "1003",
    "full_name": "Anne O’Neill",
    "birth_date": "1975-07-30",
    "zip": "02139",
    "city": "Cork, IE",
    "visits": "7",
    "weight": "70.25",
    "diagnosis": "",
}


@pytest.mark.parametrize(
    ("filename", "file_format", "encoding"),
    [
        ("people.csv", "csv", "utf-8"),
        ("people_bom.csv", "csv", "utf-8-sig"),
        ("people_latin1.csv", "csv", "latin-1"),
        ("people_cp1252.csv", "csv", "cp1252"),
        ("people.tsv", "tsv", "utf-8"),
        ("people.xlsx", "xlsx", ""),
        ("people.parquet", "parquet", ""),
    ],
)
def test_each_format_round_trips_through_upload_and_profiling(
    steward, filename, file_format, encoding
):
    raw = (FORMATS / filename).read_bytes()
    dataset = make_dataset(steward, raw, filename)
    assert dataset.status == Dataset.Status.READY, dataset.error
    assert (dataset.file_format, dataset.encoding, dataset.row_count) == (file_format, encoding, 5)
    # The original file is kept untouched, with its SHA-256.
    assert storage.read_bytes(dataset.file_path) == raw
    assert dataset.sha256 == storage.sha256_hex(raw)
    frame = datasets.load_frame(dataset)
    expected = dict(THIRD_ROW)
    if filename == "people_latin1.csv":
        expected["full_name"] = "Anne O'Neill"
    assert {k: frame.iloc[2][k] for k in expected} == expected
    assert frame.iloc[0]["city"] == "Köln"
    assert [c.name for c in dataset.columns.all()][:3] == ["record_id", "full_name", "email"]
    assert dataset.columns.get(name="diagnosis").missing_count == 1
    assert dataset.preview[2][1] == expected["full_name"]
    if filename == "people_cp1252.csv":
        assert frame.iloc[0]["fee"] == "€ 12"
    assert AuditEvent.objects.filter(action=A.PROFILED, dataset=dataset).count() == 1


def test_excel_reads_a_chosen_sheet_with_dates_in_iso(steward):
    dataset = make_dataset(
        steward, (FORMATS / "people.xlsx").read_bytes(), "people.xlsx", sheet="Visits"
    )
    assert dataset.status == Dataset.Status.READY and dataset.sheet_name == "Visits"
    frame = datasets.load_frame(dataset)
    assert frame.to_dict("list") == {
        "record_id": ["1001", "1002"],
        "visit_date": ["2023-05-01", "2023-06-12 14:30:00"],
        "ward": ["A", "B"],
    }
    missing = make_dataset(
        steward, (FORMATS / "people.xlsx").read_bytes(), "people.xlsx", sheet="Nope"
    )
    assert "no sheet named 'Nope'" in missing.error and "'People', 'Visits'" in missing.error


def test_re_uploading_makes_a_new_dataset_and_leaves_the_first_as_it_was(steward):
    first = make_dataset(steward, (FORMATS / "people.csv").read_bytes(), "people.csv")
    columns = list(first.columns.values_list("pk", "name"))
    second = make_dataset(steward, (FORMATS / "people.tsv").read_bytes(), "people.csv")
    assert second.pk != first.pk
    first.refresh_from_db()
    assert list(first.columns.values_list("pk", "name")) == columns
    assert storage.read_bytes(first.file_path) == (FORMATS / "people.csv").read_bytes()
    # Profiling a profiled dataset again changes nothing.
    profiling.profile_dataset(first.pk)
    assert first.columns.count() == len(columns)


# --- Profiles -------------------------------------------------------------------------------


def test_column_types_missing_values_top_values_and_charts(steward):
    rows = ["id,weight,admitted,ward,remark"]
    for i in range(120):
        ward = ["A", "B", "C"][i % 3] if i % 10 else "?"
        rows.append(
            f"{i},{50 + i / 4},{(i % 28) + 1:02d}/0{(i % 9) + 1}/2020,{ward},note number {i} about things"
        )
    dataset = make_dataset(steward, "\n".join(rows) + "\n", "wards.csv")
    types = {c.name: c.inferred_type for c in dataset.columns.all()}
    assert types == {
        "id": "integer",
        "weight": "decimal",
        "admitted": "date",
        "ward": "categorical",
        "remark": "text",
    }
    admitted = dataset.columns.get(name="admitted")
    assert admitted.date_order == "dmy"  # days above 12 settle it
    assert (
        admitted.profile["min"] == "2020-01-01" and admitted.profile["chart"]["kind"] == "histogram"
    )
    ward = dataset.columns.get(name="ward")
    assert ward.missing_count == 12 and ward.profile["missing_markers"] == ["?"]
    assert ward.profile["top"][0]["count"] == 36 and ward.distinct_values == 4
    assert dataset.columns.get(name="id").profile["unique_share"] == 1.0
    # Leading zeros make a code (a ZIP code), not a number.
    zips = make_dataset(steward, "zip\n02139\n10115\n02139\n", "zips.csv").columns.get()
    assert zips.inferred_type == "categorical" and zips.profile["top"][0] == {
        "value": "02139",
        "count": 2,
    }
    svg = column_chart(dataset.columns.get(name="weight").profile)
    assert svg.startswith('<svg class="chart histogram"') and svg.count("<rect") == 12
    bars = column_chart(ward.profile)
    assert bars.count("<rect") == 4 and "<title>A: 36</title>" in bars


def test_ambiguous_dates_are_flagged_and_the_steward_chooses_the_order(steward):
    text = "visit\n01/02/2020\n03/04/2021\n05/06/2022\n"
    dataset = make_dataset(steward, text, "visits.csv")
    visit = dataset.columns.get()
    assert visit.inferred_type == "date" and visit.profile["date_ambiguous"] is True
    assert visit.profile["min"] == "2020-02-01"  # day first until told otherwise
    datasets.set_column_type(steward, dataset, visit.pk, "date", "mdy")
    visit.refresh_from_db()
    assert visit.date_order == "mdy" and visit.profile["min"] == "2020-01-02"
    us = make_dataset(steward, "visit\n12/31/2020\n01/15/2021\n", "us.csv").columns.get()
    assert (us.date_order, us.profile["date_ambiguous"]) == ("mdy", False)
    iso = make_dataset(steward, "d\n2020-12-31\n2021-01-15T10:00\n", "iso.csv").columns.get()
    assert (iso.inferred_type, iso.date_order) == ("date", "ymd")


def test_a_type_override_changes_the_chart_and_is_audited(client, steward):
    dataset = make_dataset(
        steward, "code\n" + "".join(f"{i % 7}\n" for i in range(50)), "codes.csv"
    )
    code = dataset.columns.get()
    assert code.inferred_type == "integer" and code.profile["chart"]["kind"] == "histogram"
    login(client, steward)
    response = client.post(
        reverse("releases:column_type", args=[dataset.pk, code.pk]),
        {f"type-{code.pk}": "categorical"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and "Categorical" in response.content.decode()
    code.refresh_from_db()
    assert code.column_type == "categorical" and code.profile["chart"]["kind"] == "bars"
    assert AuditEvent.objects.filter(action=A.TAGGING, detail__type="categorical").exists()


# --- Suggestions ----------------------------------------------------------------------------


def test_suggestions_on_the_adult_columns(adult_dataset):
    dataset = adult_dataset
    suggested = {c.name: c.suggested_role for c in dataset.columns.all()}
    assert suggested == {
        "sex": Role.QUASI_IDENTIFIER,
        "age": Role.QUASI_IDENTIFIER,
        "race": Role.QUASI_IDENTIFIER,
        "marital-status": Role.QUASI_IDENTIFIER,
        "education": Role.QUASI_IDENTIFIER,
        "native-country": Role.QUASI_IDENTIFIER,
        "workclass": Role.INSENSITIVE,
        "occupation": Role.QUASI_IDENTIFIER,
        "salary-class": Role.SENSITIVE,
    }
    assert "age" in dataset.columns.get(name="age").suggestion_reason
    # Suggestions are only suggestions: no column has a role (all are withheld) until the
    # steward accepts or chooses one.
    assert set(dataset.columns.values_list("role", flat=True)) == {""}


def test_suggestions_on_names_emails_and_ids(steward):
    dataset = make_dataset(steward, (FORMATS / "people.csv").read_bytes(), "people.csv")
    suggested = {c.name: c.suggested_role for c in dataset.columns.all()}
    assert suggested == {
        "record_id": Role.IDENTIFIER,
        "full_name": Role.IDENTIFIER,
        "email": Role.IDENTIFIER,
        "phone": Role.IDENTIFIER,
        "birth_date": Role.QUASI_IDENTIFIER,
        "zip": Role.QUASI_IDENTIFIER,
        "sex": Role.QUASI_IDENTIFIER,
        "city": Role.QUASI_IDENTIFIER,
        "visits": Role.INSENSITIVE,
        "weight": Role.INSENSITIVE,
        "diagnosis": Role.SENSITIVE,
    }


def test_suggestions_by_content_when_names_say_nothing(steward):
    lines = ["c1,c2,c3,c4,c5,c6"]
    for i in range(40):
        lines.append(
            f"{9000 + i},person{i}@mail.example,{['M', 'F'][i % 2]},{1950 + i}-0{i % 9 + 1}-1{i % 9},"
            f"Alice Person{chr(97 + i % 26)}{chr(97 + i // 26)} Smith,{['Married', 'Divorced', 'Never-married'][i % 3]}"
        )
    dataset = make_dataset(steward, "\n".join(lines) + "\n", "anon.csv")
    columns = {c.name: c for c in dataset.columns.all()}
    assert (
        columns["c1"].suggested_role == Role.IDENTIFIER
        and "record ID" in columns["c1"].suggestion_reason
    )
    assert (
        columns["c2"].suggested_role == Role.IDENTIFIER
        and "e-mail" in columns["c2"].suggestion_reason
    )
    assert (
        columns["c3"].suggested_role == Role.QUASI_IDENTIFIER
        and "sex" in columns["c3"].suggestion_reason
    )
    assert (
        columns["c4"].suggested_role == Role.QUASI_IDENTIFIER
        and "dates" in columns["c4"].suggestion_reason
    )
    assert (
        columns["c5"].suggested_role == Role.IDENTIFIER
        and "names" in columns["c5"].suggestion_reason
    )
    assert (
        columns["c6"].suggested_role == Role.QUASI_IDENTIFIER
        and "marital" in columns["c6"].suggestion_reason
    )


def test_accepting_suggestions_sets_and_audits_each_role(client, steward):
    dataset = make_dataset(steward, (FORMATS / "people.csv").read_bytes(), "people.csv")
    login(client, steward)
    page = client.get(reverse("releases:dataset_detail", args=[dataset.pk])).content.decode()
    assert "the values are e-mail addresses" in page or "e-mail addresses" in page
    response = client.post(reverse("releases:accept_suggestions", args=[dataset.pk]))
    assert response.status_code == 302
    roles = {c.name: c.role for c in dataset.columns.all()}
    assert roles["email"] == Role.IDENTIFIER and roles["zip"] == Role.QUASI_IDENTIFIER
    assert roles["visits"] == Role.INSENSITIVE
    # Every column had no role yet: each gets one, and each change is audited.
    assert "" not in roles.values()
    assert AuditEvent.objects.filter(action=A.TAGGING, dataset=dataset).count() == len(roles)


# --- Risk before release --------------------------------------------------------------------


def test_rows_unique_on_the_chosen_quasi_identifiers(client, steward):
    text = "age,sex,note\n30,F,a\n30,F,b\n30,M,c\n41,F,d\n41,F,e\n41,F,f\n52,M,g\n"
    dataset = make_dataset(steward, text, "small.csv")
    login(client, steward)
    url = reverse("releases:dataset_risk", args=[dataset.pk])
    assert "Tag quasi-identifiers" in client.get(url).content.decode()
    for name in ("age", "sex"):
        datasets.set_column_role(
            steward, dataset, dataset.columns.get(name=name).pk, Role.QUASI_IDENTIFIER
        )
    risk = dataset_risk.reidentification_risk(dataset)
    assert (risk["unique_rows"], risk["classes"], risk["smallest_class"]) == (2, 4, 1)
    assert risk["highest_percent"] == 100.0
    page = client.get(url).content.decode()
    assert '<span class="value" id="unique-rows">2</span>' in page and "28.6 % of 7" in page
    # The single columns that single people out: age leaves 52 alone, sex nobody.
    combos = {tuple(c["columns"]): c for c in risk["combinations"]}
    assert (combos[("age",)]["unique_rows"], combos[("sex",)]["unique_rows"]) == (1, 0)
    assert combos[("age",)]["distinction"] == pytest.approx(3 / 7)
    # Pairs of rows told apart by sex: 3 F-F, ... 21 pairs, 10 + 1 the same.
    assert combos[("sex",)]["separation"] == pytest.approx(1 - (10 + 1) / 21)
    assert 'id="qi-combinations-table"' in page and 'data-columns="age"' in page


# --- Hierarchies ----------------------------------------------------------------------------


@pytest.fixture
def adult(steward, adult_dataset):
    """The Adult data with its age a quasi-identifier."""
    age = adult_dataset.columns.get(name="age")
    datasets.set_column_role(steward, adult_dataset, age.pk, Role.QUASI_IDENTIFIER)
    return adult_dataset


def test_interval_hierarchy_preview_and_save(client, steward, adult):
    age = adult.columns.get(name="age")
    login(client, steward)
    preview = client.get(
        reverse("releases:hierarchy_preview", args=[adult.pk, age.pk]),
        {f"builder-{age.pk}": "intervals", f"widths-{age.pk}": "5, 10, 20"},
    ).content.decode()
    assert (
        "72 values, 5 levels" in preview
        and "<td>35-39</td><td>30-39</td><td>20-39</td><td>*</td>" in preview
    )
    bad = client.get(
        reverse("releases:hierarchy_preview", args=[adult.pk, age.pk]),
        {f"builder-{age.pk}": "intervals", f"widths-{age.pk}": "5, 7"},
    ).content.decode()
    assert "each a multiple of the one before" in bad
    response = client.post(
        reverse("releases:column_hierarchy", args=[adult.pk, age.pk]),
        {f"builder-{age.pk}": "intervals", f"widths-{age.pk}": "5, 10, 20"},
        HTTP_HX_REQUEST="true",
    )
    assert "numeric intervals (5 levels)" in response.content.decode()
    age.refresh_from_db()
    assert (age.hierarchy_source, age.hierarchy_height, age.hierarchy_params) == (
        "intervals",
        5,
        {"widths": [5.0, 10.0, 20.0]},
    )
    # Materialized on the column's values, in ARX format: the release reads this text.
    stored = Hierarchy.from_arx_csv(age.hierarchy_text, attribute="age")
    stored.validate_against(datasets.load_frame(adult)["age"].unique())
    assert stored.generalize("37", 2) == "30-39"
    download = client.get(reverse("releases:hierarchy_download", args=[adult.pk, age.pk]))
    assert download["Content-Type"].startswith("text/csv")
    assert b"".join(download.streaming_content).decode() == age.hierarchy_text
    assert AuditEvent.objects.filter(action=A.TAGGING, detail__hierarchy="intervals").exists()


def test_date_masking_and_categorical_builders(steward):
    dataset = make_dataset(steward, (FORMATS / "people.csv").read_bytes(), "people.csv")
    for name, builder, params, expected in [
        ("birth_date", "dates", {"dayfirst": False}, ("1984-03-14", 2, "1984")),
        ("zip", "masking", {}, ("02139", 2, "021**")),
        ("sex", "categorical", {}, ("F", 1, "*")),
    ]:
        column = dataset.columns.get(name=name)
        datasets.set_column_role(steward, dataset, column.pk, Role.QUASI_IDENTIFIER)
        datasets.set_hierarchy_builder(steward, dataset, column.pk, builder, params)
        column.refresh_from_db()
        value, level, label = expected
        assert column.hierarchy_source == builder
        assert Hierarchy.from_arx_csv(column.hierarchy_text).generalize(value, level) == label
    datasets.use_automatic_hierarchy(steward, dataset, dataset.columns.get(name="zip").pk)
    zip_column = dataset.columns.get(name="zip")
    assert (zip_column.hierarchy_source, zip_column.hierarchy_text) == ("auto", "")


def test_an_uploaded_hierarchy_names_the_first_offending_value_in_the_row(client, steward, adult):
    age = adult.columns.get(name="age")
    login(client, steward)
    url = reverse("releases:column_update", args=[adult.pk, age.pk])
    for content, message in [
        ("17;*\n18;*\n", "the data value &#x27;39&#x27; is not covered"),
        ("17;10-19;*\n18;10-19\n19;10-19;*\n", "row 2 (&#x27;18&#x27;) has 2 levels, the others 3"),
        ("17;10-19;*\n18;10-19;x\n", "a generalization must have a single parent"),
    ]:
        response = client.post(
            url, {f"hierarchy-{age.pk}": upload(content, "age.csv")}, HTTP_HX_REQUEST="true"
        )
        assert message in response.content.decode()
    age.refresh_from_db()
    assert age.hierarchy_source == "auto"


def test_hierarchy_download_is_for_the_owner_only(client, steward, other_steward, adult):
    age = adult.columns.get(name="age")
    url = reverse("releases:hierarchy_download", args=[adult.pk, age.pk])
    login(client, other_steward)
    assert client.get(url).status_code == 404
    login(client, steward)
    automatic = b"".join(client.get(url).streaming_content).decode()
    assert automatic.splitlines()[0].startswith("39;") and automatic.splitlines()[0].endswith(";*")


def test_a_hierarchy_download_cannot_run_as_a_spreadsheet_formula(client, steward):
    dataset = make_dataset(steward, "code,n\n=1+1,1\n@SUM(A1),2\n-5,3\nplain,4\n", "f.csv")
    column = dataset.columns.get(name="code")
    datasets.set_hierarchy_builder(steward, dataset, column.pk, "categorical", {})
    login(client, steward)
    response = client.get(reverse("releases:hierarchy_download", args=[dataset.pk, column.pk]))
    assert response["Content-Disposition"] == 'attachment; filename="hierarchy_code.csv"'
    rows = [line.split(";") for line in b"".join(response.streaming_content).decode().splitlines()]
    assert {row[0] for row in rows} == {"'=1+1", "'@SUM(A1)", "-5", "plain"}


# --- Lifecycle: pending, polling, deletion ------------------------------------------------------


def test_a_dataset_is_not_usable_until_profiled_and_the_page_polls(client, steward):
    dataset = datasets.create_dataset(
        steward, upload((FORMATS / "people.csv").read_bytes(), "people.csv")
    )
    assert dataset.status == Dataset.Status.PENDING
    with pytest.raises(InvalidInput, match="still being profiled"):
        datasets.ensure_ready(dataset)
    login(client, steward)
    status_url = reverse("releases:dataset_status", args=[dataset.pk])
    assert (
        'hx-trigger="every 1s"' in client.get(status_url, HTTP_HX_REQUEST="true").content.decode()
    )
    profiling.profile_dataset(dataset.pk)
    final = client.get(status_url, HTTP_HX_REQUEST="true")
    assert final["HX-Refresh"] == "true"
    datasets.ensure_ready(dataset)


def test_htmx_upload_redirects_and_an_htmx_error_replaces_the_card(client, steward):
    login(client, steward)
    response = client.post(
        reverse("releases:dataset_list"),
        {
            "file": upload((FORMATS / "people.parquet").read_bytes(), "people.parquet"),
            "name": "People",
        },
        HTTP_HX_REQUEST="true",
    )
    dataset = Dataset.objects.get()
    assert response["HX-Redirect"] == reverse("releases:dataset_detail", args=[dataset.pk])
    assert dataset.name == "People" and dataset.file_format == "parquet"
    response = client.post(
        reverse("releases:dataset_list"), {"file": upload(b"", "empty.csv")}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert response.status_code == 200 and body.strip().startswith(
        '<section class="card" id="upload-card">'
    )
    assert "The file is empty." in body


def test_deleting_a_dataset_keeps_its_audit_events(client, steward, private_media_root):
    dataset = make_dataset(steward, (FORMATS / "people.csv").read_bytes(), "people.csv")
    datasets.accept_suggestions(steward, dataset)
    events = AuditEvent.objects.filter(dataset=dataset).count()
    login(client, steward)
    response = client.post(reverse("releases:dataset_delete", args=[dataset.pk]))
    assert response.status_code == 302
    assert not Dataset.objects.exists() and not DatasetColumn.objects.exists()
    assert stored_files(private_media_root) == []
    assert AuditEvent.objects.filter(dataset__isnull=True).count() == events + 1
    deleted = AuditEvent.objects.get(action=A.DELETE)
    assert deleted.actor == steward and deleted.detail["dataset_name"] == "people.csv"
    assert AuditEvent.objects.get(action=A.UPLOAD).detail["dataset_name"] == "people.csv"


def test_a_dataset_with_an_approved_release_cannot_be_deleted(client, steward, other_steward):
    dataset = make_dataset(steward, (FORMATS / "people.csv").read_bytes(), "people.csv")
    ReleaseRequest.objects.create(
        dataset=dataset,
        requested_by=steward,
        parameters={"model": {"criteria": [{"model": "k-anonymity", "k": 2}]}},
        config={},
        state=ReleaseRequest.State.APPROVED,
    )
    with pytest.raises(InvalidInput, match="approved release"):
        datasets.delete_dataset(steward, dataset)
    login(client, other_steward)  # nobody else's to delete
    assert client.post(reverse("releases:dataset_delete", args=[dataset.pk])).status_code == 404
    login(client, steward)
    response = client.post(reverse("releases:dataset_delete", args=[dataset.pk]), follow=True)
    assert "approved release and cannot be deleted" in response.content.decode()
    assert Dataset.objects.filter(pk=dataset.pk).exists()


def test_non_stewards_cannot_reach_dataset_pages(client, steward, officer):
    dataset = make_dataset(steward, (FORMATS / "people.csv").read_bytes(), "people.csv")
    login(client, officer)
    column = dataset.columns.first()
    for url in [
        reverse("releases:dataset_status", args=[dataset.pk]),
        reverse("releases:hierarchy_download", args=[dataset.pk, column.pk]),
        reverse("releases:hierarchy_preview", args=[dataset.pk, column.pk]),
    ]:
        assert client.get(url).status_code == 403, url
    assert client.post(reverse("releases:dataset_delete", args=[dataset.pk])).status_code == 403
    assert pd.notna(Dataset.objects.get().pk)


def test_utf16_text_with_a_byte_order_mark_is_read(steward):
    raw = (FORMATS / "people.tsv").read_text(encoding="utf-8").encode("utf-16")
    dataset = make_dataset(steward, raw, "people.tsv")
    assert (dataset.status, dataset.encoding, dataset.delimiter) == ("ready", "utf-16", "\t")
    assert datasets.load_frame(dataset).iloc[0]["city"] == "Köln"


def test_without_javascript_save_tagging_applies_the_hierarchy_builder(client, steward, adult):
    age = adult.columns.get(name="age")
    login(client, steward)
    data = {f"role-{c.pk}": c.role for c in adult.columns.all()}
    data.update({f"builder-{age.pk}": "intervals", f"widths-{age.pk}": "10, 20"})
    response = client.post(reverse("releases:tagging", args=[adult.pk]), data)
    assert response.status_code == 302
    age.refresh_from_db()
    assert (age.hierarchy_source, age.hierarchy_params, age.hierarchy_height) == (
        "intervals",
        {"widths": [10.0, 20.0]},
        4,
    )
    # Posting the same form again changes nothing and records nothing new.
    events = AuditEvent.objects.count()
    client.post(reverse("releases:tagging", args=[adult.pk]), data)
    assert AuditEvent.objects.count() == events


def test_pages_read_columns_from_a_store_written_at_profiling(steward, private_media_root):
    from releases.datasets import column_store

    dataset = make_dataset(steward, "a,b,c\n1,,x\n2,y,\n=3,z,w\n")
    original = datasets.load_frame(dataset)
    stored = column_store.read(dataset, ["b", "a"])
    # The same cells as the original file, missing values included, in the order asked for.
    assert stored.values.tolist() == original[["b", "a"]].values.tolist()
    assert stored["b"].tolist() == ["", "y", "z"]
    files = {p.name for p in private_media_root.rglob("*") if p.is_file()}
    assert any(name.endswith(".columns.parquet") for name in files)
    datasets.delete_dataset(steward, dataset)
    assert [p for p in private_media_root.rglob("*") if p.is_file()] == []
