"""The release workflow's services, end to end in one process (the run called directly)."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.datasets import services as datasets
from releases.models import AuditEvent, Dataset, ReleaseRequest, Role
from releases.requests import downloads
from releases.requests import run as release_run
from releases.review import services as review
from tests.conftest import ADULT_QUASI_IDENTIFIERS, csv_upload, hierarchy_upload
from tests.support import pycanon
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import approve, download, request_release, tag

pytestmark = pytest.mark.django_db


def extract_frame(release_request: ReleaseRequest) -> pd.DataFrame:
    raw = storage.read_bytes(release_request.extract_path)
    return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)


def test_upload_stores_the_file_with_its_hash_and_a_preview(steward):
    text = synthetic_csv()
    dataset = make_dataset(steward, text, "people.csv")
    assert dataset.row_count == 300
    assert dataset.sha256 == storage.sha256_hex(text.encode())
    assert [c.name for c in dataset.columns.all()] == ["name", "age", "zip", "sex", "diagnosis"]
    assert dataset.preview[0][0] == "Person 0"
    assert storage.read_bytes(dataset.file_path) == text.encode()
    assert AuditEvent.objects.filter(action=AuditEvent.Action.UPLOAD, dataset=dataset).count() == 1


def test_a_rejected_upload_leaves_no_dataset_and_no_file(steward, private_media_root):
    # Refused by profiling: the dataset keeps only the reason; no column, no file, no release.
    dataset = make_dataset(steward, "a,b\n")
    assert dataset.status == Dataset.Status.FAILED and "only a header" in dataset.error
    assert not dataset.columns.exists() and dataset.file_path == ""
    assert Dataset.objects.filter(status=Dataset.Status.READY).count() == 0
    stored = list(private_media_root.rglob("*")) if private_media_root.exists() else []
    assert [p for p in stored if p.is_file()] == []
    event = AuditEvent.objects.get(action=AuditEvent.Action.UPLOAD_REJECTED)
    assert event.actor == steward and "only a header" in event.detail["reason"]
    with pytest.raises(InvalidInput, match="refused"):
        datasets.ensure_ready(dataset)
    # Refused in the web request (empty file): nothing is stored at all.
    with pytest.raises(InvalidInput, match="empty"):
        datasets.create_dataset(steward, csv_upload(""))
    assert Dataset.objects.count() == 1
    assert AuditEvent.objects.filter(action=AuditEvent.Action.UPLOAD_REJECTED).count() == 2


def test_only_stewards_upload_and_only_owners_see_datasets(steward, other_steward, officer):
    with pytest.raises(PermissionDenied):
        make_dataset(officer, synthetic_csv())
    dataset = make_dataset(steward, synthetic_csv())
    with pytest.raises(Http404):
        datasets.get_dataset_for(other_steward, dataset.pk)
    with pytest.raises(Http404):
        datasets.set_column_role(
            other_steward, dataset, dataset.columns.first().pk, Role.IDENTIFIER
        )


def test_hierarchy_upload_is_validated_against_the_column(steward):
    dataset = make_dataset(steward, synthetic_csv())
    zip_column = dataset.columns.get(name="zip")
    incomplete = csv_upload("02139;0213*;*\n02141;0214*;*\n", "zip.csv")
    with pytest.raises(InvalidInput, match="0214[28]|0213[8]"):
        datasets.set_hierarchy_file(steward, dataset, zip_column.pk, incomplete)
    zip_column.refresh_from_db()
    assert zip_column.hierarchy_source == "auto"

    complete = csv_upload("02138;0213*;*\n02139;0213*;*\n02141;0214*;*\n02142;0214*;*\n", "zip.csv")
    datasets.set_hierarchy_file(steward, dataset, zip_column.pk, complete)
    zip_column.refresh_from_db()
    assert (zip_column.hierarchy_source, zip_column.hierarchy_height) == ("uploaded", 3)


def test_request_needs_a_quasi_identifier_and_a_sensible_k(steward):
    dataset = make_dataset(steward, synthetic_csv())
    tag(steward, dataset, {})
    with pytest.raises(InvalidInput, match="quasi-identifier"):
        request_release(steward, dataset, k=5, suppression_limit=0.05)
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER})
    with pytest.raises(InvalidInput, match="larger than"):
        request_release(steward, dataset, k=301, suppression_limit=0.05)
    assert ReleaseRequest.objects.count() == 0


def test_request_enqueues_its_run_only_after_commit(steward, django_capture_on_commit_callbacks):
    dataset = make_dataset(steward, synthetic_csv())
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER})
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        release_request = request_release(steward, dataset, k=5, suppression_limit=0.05)
    assert release_request.state == ReleaseRequest.State.QUEUED
    assert len(callbacks) == 1


@pytest.mark.parametrize(("k", "limit"), [(5, 0.0), (10, 0.05), (25, 0.1)])
def test_run_writes_a_k_anonymous_extract_within_the_suppression_limit(steward, k, limit):
    dataset = make_dataset(steward, synthetic_csv())
    tag(
        steward,
        dataset,
        {
            "name": Role.IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "zip": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "diagnosis": Role.SENSITIVE,
        },
    )
    release_request = request_release(steward, dataset, k=k, suppression_limit=limit)
    release_run.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == ReleaseRequest.State.READY, release_request.error

    extract = extract_frame(release_request)
    summary = release_request.summary
    assert "name" not in extract.columns
    # Independent count: every combination of quasi-identifiers occurs at least k times.
    sizes = extract.groupby(["age", "zip", "sex"]).size()
    assert sizes.min() >= k
    assert summary["achieved"]["k"] == sizes.min()
    suppressed = 300 - len(extract)
    assert summary["suppressed"] == suppressed <= limit * 300
    assert summary["rows_out"] == len(extract)
    # The extract's bytes are those whose hash was recorded.
    assert storage.sha256_hex(storage.read_bytes(release_request.extract_path)) == (
        release_request.extract_sha256
    )
    stored = sorted(release_request.classes.values_list("size", flat=True))
    assert stored == sorted(sizes.tolist())
    # Spreadsheet formulas in released cells are neutralised.
    assert not extract["diagnosis"].str.startswith("=").any()


def test_run_reports_an_impossible_model_as_a_readable_failure(steward):
    dataset = make_dataset(steward, "a,b\n1,x\n2,y\n3,z\n")
    tag(steward, dataset, {"a": Role.QUASI_IDENTIFIER})
    release_request = request_release(steward, dataset, k=3, suppression_limit=0.0)
    # The dataset file vanishing under a queued request is an internal error, reported as such.
    storage.delete_quietly(dataset.file_path)
    release_run.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == ReleaseRequest.State.FAILED
    assert "internal error" in release_request.error
    assert "Traceback" not in release_request.error
    assert not release_request.extract_path


# A release of Adult's 30,162 rows, with ARX's hierarchies: seconds of search.
@pytest.mark.slow
@pytest.mark.pycanon
def test_adult_release_is_5_anonymous_by_pycanon(steward, adult_dataset):
    dataset = adult_dataset
    tag(steward, dataset, {name: Role.QUASI_IDENTIFIER for name in ADULT_QUASI_IDENTIFIERS})
    for column in dataset.columns.filter(role=Role.QUASI_IDENTIFIER):
        datasets.set_hierarchy_file(steward, dataset, column.pk, hierarchy_upload(column.name))
    release_request = request_release(steward, dataset, k=5, suppression_limit=0.05)
    release_run.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == ReleaseRequest.State.READY, release_request.error
    extract = extract_frame(release_request)
    written = storage.read_bytes(release_request.extract_path)
    assert pycanon.measure(written, ADULT_QUASI_IDENTIFIERS)["k"] >= 5
    assert extract.groupby(ADULT_QUASI_IDENTIFIERS).size().min() >= 5
    assert 30162 - len(extract) <= 0.05 * 30162
    assert release_request.summary["achieved"]["k"] >= 5


def test_nobody_decides_on_their_own_request(steward_officer):
    dataset = make_dataset(steward_officer, synthetic_csv())
    tag(steward_officer, dataset, {"age": Role.QUASI_IDENTIFIER})
    release_request = request_release(steward_officer, dataset, k=5, suppression_limit=0.05)
    release_run.run_release(release_request.pk)
    with pytest.raises(PermissionDenied, match="themselves"):
        review.review(steward_officer, release_request.pk, "approve")
    release_request.refresh_from_db()
    assert release_request.state == ReleaseRequest.State.READY


def test_reject_needs_a_reason_and_a_decision_is_final(ready_request, officer):
    with pytest.raises(InvalidInput, match="comment"):
        review.review(officer, ready_request.pk, "reject", "  ")
    review.review(officer, ready_request.pk, "reject", "Age is too fine.")
    ready_request.refresh_from_db()
    assert ready_request.state == ReleaseRequest.State.REJECTED
    assert ready_request.reviews.get().comment == "Age is too fine."
    with pytest.raises(InvalidInput, match="rejected"):
        review.review(officer, ready_request.pk, "approve")


def test_download_only_after_approval_by_named_people_and_logged(
    ready_request, officer, recipient, steward, other_recipient
):
    # Not approved yet: the requester is refused by the state, a recipient sees nothing.
    with pytest.raises(InvalidInput, match="only an approved release"):
        downloads.open_download(steward, ready_request.pk, "csv")
    with pytest.raises(Http404):
        downloads.open_download(recipient, ready_request.pk, "csv")
    approve(officer, ready_request, recipient)
    # A recipient the release does not name does not see it at all.
    with pytest.raises(Http404):
        downloads.open_download(other_recipient, ready_request.pk, "csv")
    # The terms of use come first.
    with pytest.raises(InvalidInput, match="Accept the terms"):
        downloads.open_download(recipient, ready_request.pk, "csv")
    content = download(recipient, ready_request)
    assert content == storage.read_bytes(ready_request.extract_path)
    assert storage.sha256_hex(content) == ready_request.extract_sha256
    assert download(steward, ready_request) == content
    logged = AuditEvent.objects.filter(action=AuditEvent.Action.DOWNLOAD, request=ready_request)
    assert [e.actor for e in logged] == [recipient, steward]
    accepted = AuditEvent.objects.filter(action=AuditEvent.Action.TERMS_ACCEPTED)
    assert [e.actor for e in accepted] == [recipient, steward]


def test_download_refuses_an_extract_whose_bytes_changed(
    ready_request, officer, recipient, settings
):
    approve(officer, ready_request, recipient)
    path = settings.MEDIA_ROOT / ready_request.extract_path
    path.write_bytes(path.read_bytes() + b"tampered,row\n")
    with pytest.raises(downloads.DownloadUnavailable, match="no longer matches") as refused:
        download(recipient, ready_request)
    assert refused.value.status == 409
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.DOWNLOAD).exists()
    event = AuditEvent.objects.get(action=AuditEvent.Action.DOWNLOAD_REFUSED)
    assert event.actor == recipient and "no longer matches" in event.detail["reason"]


def test_audit_log_lists_every_step_in_order(ready_request, officer, recipient, steward):
    approve(officer, ready_request, recipient)
    download(recipient, ready_request)
    actions = [e.action for e in audit.events_for_request(ready_request)]
    A = AuditEvent.Action
    assert actions == [
        A.UPLOAD,
        A.PROFILED,
        *[A.TAGGING] * 5,  # age, sex, and the other three columns withheld
        A.REQUEST,
        A.RUN_START,
        A.RUN_END,
        A.RECIPIENTS,
        A.REVIEW,
        A.TERMS_ACCEPTED,
        A.DOWNLOAD,
    ]
    with pytest.raises(ValueError, match="append-only"):
        event = AuditEvent.objects.first()
        event.detail = {}
        event.save()
