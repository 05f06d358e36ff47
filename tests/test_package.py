"""The release package: each format read back and checked against its approved SHA-256, the
privacy model checked on the written file, the seeded shuffle, Excel's row limit, reproduction,
and missing or changed files refused. The visits' release is made once for the module
(tests/support/world.py): each test changes it inside its own transaction, rolled back, and
works on its own copy of the files."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import openpyxl
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.datasets import services as datasets
from releases.engine.export import neutralise_formulas
from releases.models import AuditEvent, ReleaseFile, ReleaseRequest, Reproduction, Review, Role
from releases.requests import package, reproduction
from releases.requests import run as release_run
from releases.requests.parameters import ReleaseParameters
from releases.review import services as review
from tests.support import factories, pycanon
from tests.support import world as world_support
from tests.support.workflow import approve, request_release, run, tag

pytestmark = pytest.mark.django_db
QIS = ["age", "zip", "sex"]


def visits_csv(rows: int = 400) -> str:
    """Sorted by batch, as exports often are: the order must not survive."""
    rng = random.Random(21)
    lines = ["batch,name,age,zip,sex,diagnosis,note"]
    for i in range(rows):
        lines.append(
            f"{i // 10 + 1},Person {i},{rng.randint(18, 90)},{rng.choice(['02139', '02141', '02142'])},"
            f"{rng.choice('FM')},{rng.choice(['flu', 'asthma', '=HYPERLINK(1)', '-gout'])},"
            f"{rng.choice(['a', 'b'])}"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def shared_ready(django_db_setup, django_db_blocker):
    """``steward`` and their visits' release, ready for review, made once for the module."""
    tagging = {
        "batch": Role.INSENSITIVE,
        "name": Role.IDENTIFIER,
        "age": Role.QUASI_IDENTIFIER,
        "zip": Role.QUASI_IDENTIFIER,
        "sex": Role.QUASI_IDENTIFIER,
        "diagnosis": Role.SENSITIVE,
        "note": Role.WITHHELD,
    }
    with world_support.ready_request_once(
        django_db_blocker, visits_csv(), tagging, "visits.csv"
    ) as made:
        yield made


@pytest.fixture
def steward(shared_ready, db) -> User:
    """The module's steward, read afresh."""
    return User.objects.get(pk=shared_ready["steward"].pk)


@pytest.fixture
def ready(shared_ready, steward, private_media_root) -> ReleaseRequest:
    """The module's release, read afresh, its files copied to the test's media folder."""
    world_support.media_copy(shared_ready, private_media_root)
    return ReleaseRequest.objects.get(pk=shared_ready["request"].pk)


def _read(fmt: str, raw: bytes) -> pd.DataFrame:
    if fmt == "csv":
        return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)
    if fmt == "xlsx":
        sheet = openpyxl.load_workbook(io.BytesIO(raw), read_only=True).active
        rows = [["" if v is None else str(v) for v in row] for row in sheet.values]
        return pd.DataFrame(rows[1:], columns=rows[0])
    return pq.read_table(io.BytesIO(raw)).to_pandas()


@pytest.mark.pycanon
def test_each_format_reads_back_as_the_approved_bytes_and_the_same_rows(
    ready, officer, recipient, client
):
    approve(officer, ready, recipient)
    vote = Review.objects.get()
    files = {f.format: f for f in ready.files.all()}
    assert set(files) == {"csv", "xlsx", "parquet"}
    hashes = {fmt: f.sha256 for fmt, f in files.items()}
    assert vote.package_sha256 == ready.package_sha256 == package.package_digest(hashes)

    client.force_login(recipient)
    client.post(reverse("releases:accept_terms", args=[ready.pk]))
    frames, downloaded = {}, {}
    for fmt in files:
        response = client.get(reverse("releases:download_file", args=[ready.pk, fmt]))
        assert response.status_code == 200 and response.streaming
        assert response["Content-Disposition"].startswith("attachment; filename=")
        raw = b"".join(response.streaming_content)
        assert storage.sha256_hex(raw) == files[fmt].sha256 == hashes[fmt]
        assert len(raw) == files[fmt].size_bytes
        frames[fmt] = _read(fmt, raw)
        downloaded[fmt] = raw
    csv = frames["csv"]
    # The extract: released columns only, in the dataset's order; nothing withheld or dropped.
    assert list(csv.columns) == ["batch", "age", "zip", "sex", "diagnosis"]
    assert len(csv) == ready.summary["rows_out"]
    # Excel holds exactly the CSV's cells; Parquet the raw values (formulas not neutralised).
    pd.testing.assert_frame_equal(frames["xlsx"], csv)
    pd.testing.assert_frame_equal(neutralise_formulas(frames["parquet"]), csv)
    assert (frames["parquet"]["diagnosis"] == "=HYPERLINK(1)").any()
    assert not csv["diagnosis"].str.startswith("=").any()
    assert (csv["diagnosis"] == "'-gout").any()
    # Independently: the written file is 5-anonymous on its quasi-identifiers.
    assert pycanon.measure(downloaded["csv"], QIS)["k"] >= 5
    assert csv.groupby(QIS).size().min() >= 5
    logged = AuditEvent.objects.filter(action=AuditEvent.Action.DOWNLOAD, actor=recipient)
    assert sorted(e.detail["file"] for e in logged) == ["csv", "parquet", "xlsx"]
    assert {e.detail["sha256"] for e in logged} == set(hashes.values())


@pytest.mark.parametrize(
    "dtype",
    [object, "str", pd.ArrowDtype(pa.string()), pd.ArrowDtype(pa.large_string())],
    ids=["object", "str", "arrow", "arrow-large"],
)
def test_parquet_holds_every_kind_of_string_column_as_strings(tmp_path, dtype):
    cells = ["=x", "a,b", "", "é€", 'q"x'] * 40
    frame = pd.DataFrame(
        {"id": pd.Series(cells, dtype=object).astype(dtype), "sex": pd.Categorical(cells)}
    )
    path = tmp_path / "extract.parquet"
    package.WRITERS[ReleaseFile.Format.PARQUET](frame, path)
    table = pq.read_table(path)
    assert table.schema.types == [pa.string(), pa.string()]
    assert table.column("id").to_pylist() == cells
    assert table.column("sex").to_pylist() == cells


def test_released_rows_leave_in_a_seeded_random_order_that_a_rerun_repeats(ready):
    extract = pd.read_csv(io.BytesIO(storage.read_bytes(ready.extract_path)), dtype=str)
    batches = extract["batch"].astype(int).tolist()
    # The input was sorted by batch; the extract is not, and not reversed either.
    assert batches != sorted(batches) and batches != sorted(batches, reverse=True)
    assert ready.summary["shuffle_seed"] == ready.shuffle_seed is not None
    frame = datasets.load_frame(ready.dataset)
    params = ReleaseParameters.of(ready)
    again = release_run.build_release(frame, ready.config, params, ready.shuffle_seed)
    assert again.data["batch"].tolist() == extract["batch"].tolist()
    other = release_run.build_release(frame, ready.config, params, ready.shuffle_seed + 1)
    assert other.data["batch"].tolist() != extract["batch"].tolist()
    assert sorted(other.data["batch"].tolist()) == sorted(extract["batch"].tolist())
    # The sample on the page pairs each released row with its own original.
    sample = ready.summary["sample"]
    batch = sample["columns"].index("batch")
    assert [r[batch] for r in sample["original"]] == [r[batch] for r in sample["released"]]


def test_a_reproduction_writes_the_same_bytes_and_says_so(ready, officer):
    approve(officer, ready)
    queued = reproduction.request_reproduction(officer, ready.pk)
    done = reproduction.reproduce(queued.pk)
    assert done.state == Reproduction.State.IDENTICAL
    assert {fmt: o["got"] for fmt, o in done.outcome.items()} == {
        f.format: f.sha256 for f in ready.files.all()
    }
    # A changed seed makes other bytes: the comparison is real.
    ReleaseRequest.objects.filter(pk=ready.pk).update(shuffle_seed=ready.shuffle_seed + 1)
    other = reproduction.reproduce(reproduction.request_reproduction(officer, ready.pk).pk)
    assert other.state == Reproduction.State.DIFFERENT
    assert other.outcome["csv"]["expected"] != other.outcome["csv"]["got"]
    outcomes = AuditEvent.objects.filter(action=AuditEvent.Action.REPRODUCED)
    assert [e.detail["outcome"] for e in outcomes] == ["identical", "different"]


def test_excel_is_not_offered_above_its_row_limit_and_the_page_says_why(
    steward, officer, recipient, monkeypatch, client
):
    monkeypatch.setattr(package, "XLSX_MAX_ROWS", 10)
    dataset = factories.make_dataset(steward, visits_csv(60), "visits.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    ready = run(request_release(steward, dataset, k=5, suppression_limit=0.05))
    assert sorted(ready.files.values_list("format", flat=True)) == ["csv", "parquet"]
    assert "Excel is not offered" in ready.summary["xlsx_refusal"]
    approve(officer, ready, recipient)
    client.force_login(recipient)
    client.post(reverse("releases:accept_terms", args=[ready.pk]))
    page = client.get(reverse("releases:request_detail", args=[ready.pk])).content.decode()
    assert "Excel is not offered" in page and 'data-format="xlsx"' not in page
    response = client.get(reverse("releases:download_file", args=[ready.pk, "xlsx"]))
    assert response.status_code == 404


@pytest.mark.parametrize(("damage", "status"), [("change", 409), ("delete", 410)])
def test_a_changed_or_missing_file_is_refused_clearly_and_blocks_the_report(
    ready, officer, recipient, client, settings, damage, status
):
    approve(officer, ready, recipient)
    path = settings.MEDIA_ROOT / ready.files.get(format="parquet").path
    if damage == "change":
        path.write_bytes(path.read_bytes() + b"\0")
    else:
        path.unlink()
    client.force_login(recipient)
    client.post(reverse("releases:accept_terms", args=[ready.pk]))
    response = client.get(reverse("releases:download_file", args=[ready.pk, "parquet"]))
    assert response.status_code == status
    assert "Parquet" in response.content.decode() and "Traceback" not in response.content.decode()
    for name in ("report", "download_report"):
        assert client.get(reverse(f"releases:{name}", args=[ready.pk])).status_code == status
    # The intact CSV is still served.
    assert client.get(reverse("releases:download_file", args=[ready.pk, "csv"])).status_code == 200
    refused = AuditEvent.objects.filter(action=AuditEvent.Action.DOWNLOAD_REFUSED)
    assert [e.detail["file"] for e in refused] == ["parquet", "report", "report"]
    assert all(e.actor == recipient for e in refused)


def test_the_report_ticks_its_checklist_from_facts(ready, officer, recipient, client):
    approve(officer, ready, recipient)
    client.force_login(officer)
    report = json.loads(
        b"".join(client.get(reverse("releases:download_report", args=[ready.pk])).streaming_content)
    )
    checklist = {item["key"]: item for item in report["compliance"]}
    assert [item["status"] for item in report["compliance"]] == [
        "done",  # name dropped
        "done",  # age, zip, sex generalized
        "done",  # k=5
        "open",  # diagnosis is sensitive, but neither l nor t was asked for
        "done",  # risk on the extract, with what it covers
        "done",  # terms and a named recipient
        "open",  # nobody re-ran it yet
    ]
    assert "diagnosis" in checklist["sensitive"]["reason"]
    assert "batch" in checklist["risk"]["reason"]  # the risk does not cover it, and says so
    assert "no officer has re-run it" in checklist["reproducible"]["reason"]
    reproduction.reproduce(reproduction.request_reproduction(officer, ready.pk).pk)
    report = json.loads(
        b"".join(client.get(reverse("releases:download_report", args=[ready.pk])).streaming_content)
    )
    assert report["compliance"][-1]["status"] == "done"
    assert report["extract"]["sha256"] == ready.extract_sha256
    assert report["dataset"]["sha256"] == ready.dataset.sha256
    assert report["reproduction"]["engine"]["engine_source_sha256"]
    assert [c["treatment"] for c in report["columns"]][:2] == ["released unchanged", "dropped"]
    assert report["risk"]["covers"] == {
        "quasi_identifiers": QIS,
        "not_covered": ["batch", "diagnosis"],
    }


def test_approval_refuses_a_package_whose_digest_does_not_match(ready, officer):
    ReleaseFile.objects.filter(request=ready, format="xlsx").delete()
    # The review checks show it, and approving is refused.
    files = next(c for c in review.checks(ready) if c.name == "package files")
    assert not files.passed and "do not match the package digest" in files.detail
    with pytest.raises(InvalidInput, match="do not match the package digest"):
        review.review(officer, ready.pk, "approve")


def test_the_package_order_is_the_one_earlier_rounds_were_written_in():
    """The shuffle is the engine's now; rounds written before drew the order with NumPy's
    default generator from the same seed, so their reproductions still write the same bytes."""
    frame = pd.DataFrame({"a": range(2000)})
    for seed in (0, 1, 12345, 2**62 - 1):
        earlier = np.random.default_rng(seed).permutation(len(frame))
        assert (package.shuffle(frame, seed) == earlier).all()
    # A round without a recorded seed still gets a random order, not the input's.
    assert not (package.shuffle(frame, None) == np.arange(len(frame))).all()
