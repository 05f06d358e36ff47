"""Hostile names, unbounded hierarchies, integrity errors, deletion rules and the one way work
is handed to the workers."""

from __future__ import annotations

import functools
import re
from email.message import Message
from pathlib import Path
from unittest import mock

import pytest
from django.core import mail
from django.db import IntegrityError
from django.urls import reverse

from releases.engine import Hierarchy
from releases.models import Dataset, ReleaseRequest, Review, Role
from releases.services import InvalidInput, audit, datasets, lifecycle, review
from tests.support import factories
from tests.support.factories import synthetic_csv
from tests.support.workflow import approve, request_release, run, tag

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[1]
HOSTILE_NAME = "x\"; filename*=UTF-8''evil.html; a=\".csv"


def _filename(response) -> str:
    """The file name a browser takes from the Content-Disposition header."""
    header = response["Content-Disposition"]
    assert "filename*" not in header.lower() or header.lower().count("filename*") == 1
    parsed = Message()
    parsed["Content-Disposition"] = header
    params = [name for name, _ in parsed.get_params(header="content-disposition")[1:]]
    assert len(params) == 1, header  # one name, nothing smuggled beside it
    return parsed.get_filename()


def test_a_hostile_upload_name_never_reaches_a_download_header(client, steward, officer, recipient):
    text = synthetic_csv().replace("diagnosis", HOSTILE_NAME.replace('"', "").replace(",", ""), 1)
    dataset = factories.make_dataset(steward, text, HOSTILE_NAME)
    assert dataset.original_filename == HOSTILE_NAME
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "zip": Role.QUASI_IDENTIFIER})
    release_request = approve(officer, run(request_release(steward, dataset)), recipient)
    client.force_login(recipient)
    client.post(reverse("releases:accept_terms", args=[release_request.pk]))
    for url, suffix in [
        (reverse("releases:download_file", args=[release_request.pk, "csv"]), ".csv"),
        (reverse("releases:download_file", args=[release_request.pk, "xlsx"]), ".xlsx"),
        (reverse("releases:download_report", args=[release_request.pk]), "-report.json"),
    ]:
        response = client.get(url)
        assert response.status_code == 200
        name = _filename(response)
        assert name.endswith(f"-release-{release_request.pk}{suffix}"), name
        assert re.fullmatch(r"[A-Za-z0-9._-]+", name), name
    # The hierarchy download of a column with a hostile name.
    client.force_login(steward)
    column = dataset.columns.get(position=4)
    response = client.get(reverse("releases:hierarchy_download", args=[dataset.pk, column.pk]))
    name = _filename(response)
    assert name.startswith("hierarchy_") and name.endswith(".csv") and '"' not in name
    # The dataset page shows the name as text.
    page = client.get(reverse("releases:dataset_detail", args=[dataset.pk])).content.decode()
    assert HOSTILE_NAME not in page and "x&quot;; filename*=UTF-8&#x27;&#x27;evil.html" in page


# --- Hierarchies: bounded before they are parsed ----------------------------------------------


def _ids_dataset(steward, rows: int = 40) -> Dataset:
    return factories.make_dataset(
        steward, "id,group\n" + "".join(f"{i:07d},{i % 3}\n" for i in range(rows)), "ids.csv"
    )


@functools.cache  # read-only, the same for both cases
def _million_row_hierarchy() -> bytes:
    return "".join(
        f"{i:07d};{i // 10:06d}*;{i // 100:05d}**;*\n" for i in range(1_000_000)
    ).encode()


@pytest.mark.parametrize(
    ("max_bytes", "setting"),
    [(20 * 1024**2, "MAX_HIERARCHY_BYTES"), (64 * 1024**2, "MAX_HIERARCHY_ROWS")],
)
def test_a_million_row_hierarchy_is_refused_by_a_named_limit_before_it_is_parsed(
    client, steward, settings, max_bytes, setting
):
    settings.MAX_HIERARCHY_BYTES = max_bytes
    dataset = _ids_dataset(steward)
    column = dataset.columns.get(name="id")
    client.force_login(steward)
    with mock.patch.object(Hierarchy, "from_arx_csv", wraps=Hierarchy.from_arx_csv) as parse:
        response = client.post(
            reverse("releases:column_update", args=[dataset.pk, column.pk]),
            {f"hierarchy-{column.pk}": factories.upload(_million_row_hierarchy(), "ids.csv")},
            HTTP_HX_REQUEST="true",
        )
    assert setting in response.content.decode()
    assert parse.call_count == 0  # refused while reading, never parsed
    column.refresh_from_db()
    assert column.hierarchy_text == ""


def test_a_hierarchy_builder_on_more_values_than_the_limit_is_refused(steward, settings):
    settings.MAX_HIERARCHY_ROWS = 10
    dataset = _ids_dataset(steward)
    column = dataset.columns.get(name="id")
    datasets.set_column_role(steward, dataset, column.pk, Role.QUASI_IDENTIFIER)
    with pytest.raises(InvalidInput, match="MAX_HIERARCHY_ROWS"):
        datasets.set_hierarchy_builder(steward, dataset, column.pk, "masking", {})
    # Within the limit, the same builder works.
    small = dataset.columns.get(name="group")
    datasets.set_hierarchy_builder(steward, dataset, small.pk, "masking", {})


# --- Reviews --------------------------------------------------------------------------------


def test_only_a_second_vote_is_reported_as_already_reviewed(ready_request, officer):
    # Any other integrity error is a fault, not a vote: it is raised.
    broken = IntegrityError("NOT NULL constraint failed: releases_review.decision")
    with (
        mock.patch.object(Review.objects, "create", side_effect=broken),
        pytest.raises(IntegrityError),
    ):
        review.review(officer, ready_request.pk, "changes", "Too coarse.")
    # A second vote racing past the check hits the one-vote constraint: "already reviewed".
    Review.objects.create(
        request=ready_request,
        round=1,
        reviewer=officer,
        decision="changes",
        extract_sha256=ready_request.extract_sha256,
    )
    transition = lifecycle.TRANSITIONS[(ReleaseRequest.State.READY, "request_changes")]
    with (
        mock.patch.object(lifecycle, "check", return_value=transition),
        pytest.raises(InvalidInput, match="already reviewed"),
    ):
        review.review(officer, ready_request.pk, "changes", "Again.")


def test_the_decision_email_goes_out_once_and_again_after_a_failed_send(ready_request, officer):
    with mock.patch("releases.services.review.dispatch.send"):
        review.review(officer, ready_request.pk, "changes", "Drop the zip column.")
    vote = Review.objects.get()
    with mock.patch.object(review, "send_mail", side_effect=ConnectionRefusedError()):
        review.notify_requester(vote.pk)
    vote.refresh_from_db()
    assert vote.notified_at is None and mail.outbox == []  # not sent: it will be sent again
    review.notify_requester(vote.pk)
    review.notify_requester(vote.pk)  # a repeated message sends nothing more
    assert len(mail.outbox) == 1 and "Drop the zip column." in mail.outbox[0].body
    vote.refresh_from_db()
    assert vote.notified_at is not None


# --- Deletion --------------------------------------------------------------------------------


def test_a_dataset_with_a_result_waiting_for_review_cannot_be_deleted(ready_request, steward):
    with pytest.raises(InvalidInput, match="waiting for review"):
        datasets.delete_dataset(steward, ready_request.dataset)


# --- Work goes to the workers one way ---------------------------------------------------------


def test_work_is_handed_to_the_workers_only_through_the_outbox():
    """Upload, request, resubmit, review e-mail, reproduction and retries all call
    ``dispatch.enqueue``; a direct send would skip the outbox and be lost with the broker."""
    direct = re.compile(r"\.(delay|apply_async|send_task)\(")
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for path in (REPO / "releases").rglob("*.py")
        if path.name != "dispatch.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if direct.search(line)
    ]
    assert offenders == []
    # Every task is enqueued somewhere, by name or through a module's TASK constant.
    named = re.compile(r'(?:enqueue\(\s*|TASK\s*=\s*)"(releases\.\w+)"')
    enqueued = {
        match
        for path in (REPO / "releases").rglob("*.py")
        for match in named.findall(path.read_text())
    }
    from releases import tasks

    assert set(tasks.BY_NAME) <= enqueued


# --- A busy release's activity list is paged ------------------------------------------------


def test_the_activity_list_of_a_busy_release_is_paged_latest_first(
    client, steward, officer, recipient
):
    from releases.models import AuditEvent

    dataset = factories.make_dataset(steward, synthetic_csv(), "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "zip": Role.QUASI_IDENTIFIER})
    release_request = approve(officer, run(request_release(steward, dataset)), recipient)
    AuditEvent.objects.bulk_create(
        AuditEvent(
            action=AuditEvent.Action.DOWNLOAD,
            actor=recipient,
            request=release_request,
            dataset=dataset,
            detail={"file": f"csv-{i}"},
        )
        for i in range(120)
    )
    from releases.selectors import EVENTS_PER_PAGE

    total = audit.events_for_request(release_request).count()
    pages = -(-total // EVENTS_PER_PAGE)
    client.force_login(officer)
    page = client.get(reverse("releases:request_detail", args=[release_request.pk]))
    body = page.content.decode()
    assert body.count("<li><time>") == EVENTS_PER_PAGE
    assert "(csv-119)" in body and "(csv-0)" not in body  # the latest first
    assert body.index("(csv-119)") < body.index("(csv-118)")
    assert f"Page 1 of {pages} ({total} events, newest first)" in body
    last = client.get(
        reverse("releases:request_detail", args=[release_request.pk]), {"events": pages}
    ).content.decode()
    assert "uploaded dataset" in last and "(csv-119)" not in last
    client.force_login(recipient)
    own = client.get(reverse("releases:request_detail", args=[release_request.pk])).content
    # Its own 120 downloads and the approval, nothing of how the release was prepared.
    assert "(csv-119)" in own.decode() and "events, newest first" in own.decode()
    assert f"({120 + 1} events, newest first)" in own.decode()
