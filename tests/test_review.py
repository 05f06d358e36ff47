"""The review workflow: blind votes, approvals bound to bytes, rounds (its state machine:
tests/test_review_states.py). The steward's ready request is made once for the module
(tests/support/world.py): each test changes it inside its own transaction, rolled back, and
works on its own copy of the files."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.urls import reverse

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.models import AuditEvent, ReleaseFile, ReleaseRequest, ReleaseRound, Review, Role
from releases.requests import package
from releases.requests import rules as lifecycle
from releases.requests import services as release
from releases.requests.parameters import ReleaseParameters
from releases.review import selectors
from releases.review import services as review
from tests.support import factories
from tests.support import world as world_support
from tests.support.factories import synthetic_csv
from tests.support.workflow import approve, download, request_release, run, tag

pytestmark = pytest.mark.django_db

State = ReleaseRequest.State
ALL_STATES = [s.value for s in State]
DECISIONS = [d.value for d in Review.Decision]


shared_ready, steward, ready_request = world_support.module_ready_request()


def make_dataset(user):
    return factories.make_dataset(user, synthetic_csv(), "people.csv")


# --- Who may do what ---------------------------------------------------------------------------


@pytest.mark.parametrize("role_user", ["steward", "recipient", "other_steward"])
def test_only_officers_review(request, ready_request, role_user):
    # The requester is refused; people who cannot see the request do not learn it exists.
    with pytest.raises(PermissionDenied if role_user == "steward" else Http404):
        review.review(request.getfixturevalue(role_user), ready_request.pk, "approve")
    assert not Review.objects.exists()


def test_nobody_reviews_their_own_request(steward_officer):
    dataset = make_dataset(steward_officer)
    tag(steward_officer, dataset, {"age": Role.QUASI_IDENTIFIER})
    own = run(request_release(steward_officer, dataset))
    for decision in DECISIONS:
        with pytest.raises(PermissionDenied, match="themselves"):
            review.review(steward_officer, own.pk, decision, "comment")
    assert not lifecycle.can_review(steward_officer, own)


def test_only_the_requester_resubmits(ready_request, officer, other_steward, steward):
    review.review(officer, ready_request.pk, "changes", "Coarser ages please.")
    params = ReleaseParameters(k=10, suppression_limit=0.05)
    with pytest.raises(PermissionDenied):
        release.resubmit(officer, ready_request.pk, params, "I'll do it")
    with pytest.raises(Http404):
        release.resubmit(other_steward, ready_request.pk, params, "Not mine")
    with pytest.raises(InvalidInput, match="Answer"):
        release.resubmit(steward, ready_request.pk, params, " ")


def test_a_reviewer_votes_once_per_round(ready_request, officer, second_officer, settings):
    settings.REQUIRED_APPROVALS = 2
    review.review(officer, ready_request.pk, "approve")
    with pytest.raises(InvalidInput, match="already reviewed"):
        review.review(officer, ready_request.pk, "approve")
    assert Review.objects.count() == 1
    ready_request.refresh_from_db()
    assert ready_request.state == State.READY


# --- Independent approvals, blind voting, binding to bytes --------------------------------------


def test_two_independent_approvals_when_required(ready_request, officer, second_officer, settings):
    settings.REQUIRED_APPROVALS = 2
    review.review(officer, ready_request.pk, "approve")
    ready_request.refresh_from_db()
    assert ready_request.state == State.READY and selectors.approvals_so_far(ready_request) == 1
    review.review(second_officer, ready_request.pk, "approve")
    ready_request.refresh_from_db()
    assert ready_request.state == State.APPROVED


def test_blind_voting_hides_other_votes_until_one_votes(
    ready_request, officer, second_officer, steward, settings, client
):
    settings.REQUIRED_APPROVALS = 2
    review.review(officer, ready_request.pk, "approve", "Fine by me, the secret word is zebra")
    ready_request.refresh_from_db()
    assert selectors.votes_hidden_from(second_officer, ready_request)
    assert selectors.reviews_for(second_officer, ready_request) == []
    assert not any(
        e.action == AuditEvent.Action.REVIEW
        for e in selectors.timeline_for(second_officer, ready_request)
    )
    assert selectors.votes_hidden_from(steward, ready_request)

    client.force_login(second_officer)
    page = client.get(reverse("releases:request_detail", args=[ready_request.pk])).content.decode()
    assert "zebra" not in page and "stay hidden" in page
    # Not even that somebody approved: no running count before one's own vote.
    assert "1 of 2 approvals" not in page and "2 approvals needed for this round" in page

    review.review(second_officer, ready_request.pk, "approve")
    ready_request.refresh_from_db()
    page = client.get(reverse("releases:request_detail", args=[ready_request.pk])).content.decode()
    assert "zebra" in page
    assert [r.reviewer for r in selectors.reviews_for(steward, ready_request)] == [
        officer,
        second_officer,
    ]


def test_an_approval_counts_only_for_the_bytes_it_saw(
    ready_request, officer, second_officer, settings
):
    settings.REQUIRED_APPROVALS = 2
    review.review(officer, ready_request.pk, "approve")
    # The package changes (a re-run writes other bytes): the earlier approval no longer counts.
    csv_file = ready_request.files.get(format="csv")
    content = storage.read_bytes(csv_file.path).replace(b"\n", b"\r\n")
    new_path = storage.save_bytes("extracts", ".csv", content)
    ReleaseFile.objects.filter(pk=csv_file.pk).update(
        path=new_path, sha256=storage.sha256_hex(content)
    )
    hashes = {f.format: f.sha256 for f in ready_request.files.all()}
    ReleaseRequest.objects.filter(pk=ready_request.pk).update(
        extract_path=new_path,
        extract_sha256=storage.sha256_hex(content),
        package_sha256=package.package_digest(hashes),
    )
    ready_request.refresh_from_db()
    assert selectors.approvals_so_far(ready_request) == 0
    review.review(second_officer, ready_request.pk, "approve")
    ready_request.refresh_from_db()
    assert ready_request.state == State.READY
    vote = Review.objects.get(reviewer=second_officer)
    assert (vote.extract_sha256, vote.package_sha256) == (
        ready_request.extract_sha256,
        ready_request.package_sha256,
    )


def test_approving_a_result_whose_checks_failed_is_refused(ready_request, officer, client):
    summary = dict(ready_request.summary)
    assert summary["models"][0]["model"] == "k-anonymity"
    summary["models"][0]["achieved"] = {"k": 3}
    ReleaseRequest.objects.filter(pk=ready_request.pk).update(summary=summary)
    ready_request.refresh_from_db()
    failed = [c.name for c in review.checks(ready_request) if not c.passed]
    assert failed == ["k-anonymity"]
    with pytest.raises(InvalidInput, match="checks did not pass"):
        review.review(officer, ready_request.pk, "approve")
    client.force_login(officer)
    response = client.post(
        reverse("releases:request_review", args=[ready_request.pk]), {"decision": "approve"}
    )
    assert response.status_code == 400
    assert "cannot be approved" in response.content.decode()
    # Requesting changes stays possible.
    review.review(officer, ready_request.pk, "changes", "k is not met")
    ready_request.refresh_from_db()
    assert ready_request.state == State.CHANGES_REQUESTED


@pytest.mark.parametrize("fmt", ["csv", "xlsx", "parquet"])
def test_approval_of_a_tampered_or_missing_file_is_refused(ready_request, officer, settings, fmt):
    path = settings.MEDIA_ROOT / ready_request.files.get(format=fmt).path
    path.write_bytes(path.read_bytes() + b"x,y\n")
    with pytest.raises(InvalidInput, match="no longer matches"):
        review.review(officer, ready_request.pk, "approve")
    path.unlink()
    with pytest.raises(InvalidInput, match="missing"):
        review.review(officer, ready_request.pk, "approve")
    assert not Review.objects.exists()


# --- Rounds ---------------------------------------------------------------------------------------


def test_changes_requested_then_resubmitted_starts_a_new_round(
    ready_request, officer, steward, client
):
    review.review(officer, ready_request.pk, "changes", "Please use k=10.")
    release.resubmit(
        steward, ready_request.pk, ReleaseParameters(k=10, suppression_limit=0.05), "Done: k=10."
    )
    ready_request = run(ready_request)
    assert (ready_request.state, ready_request.round, ready_request.privacy_model.k) == (
        State.READY,
        2,
        10,
    )
    assert ready_request.summary["achieved"]["k"] >= 10
    extract = pd.read_csv(
        io.BytesIO(storage.read_bytes(ready_request.extract_path)), dtype=str, keep_default_na=False
    )
    assert extract.groupby(["age", "sex"]).size().min() >= 10
    earlier = ReleaseRound.objects.get(request=ready_request)
    assert (earlier.number, earlier.outcome, earlier.response) == (
        1,
        State.CHANGES_REQUESTED,
        "Done: k=10.",
    )
    assert earlier.parameters["model"]["criteria"] == [{"model": "k-anonymity", "k": 5}]
    # The officer's first-round review does not count for round 2, and they may vote again.
    assert lifecycle.can_review(officer, ready_request)
    review.review(officer, ready_request.pk, "approve")
    ready_request.refresh_from_db()
    assert ready_request.state == State.APPROVED

    client.force_login(steward)
    page = client.get(reverse("releases:request_detail", args=[ready_request.pk])).content.decode()
    assert "Earlier rounds" in page and "Please use k=10." in page and "Done: k=10." in page


def test_the_requester_is_emailed_each_decision(
    ready_request, officer, steward, mailoutbox, django_capture_on_commit_callbacks, monkeypatch
):
    from releases.review.tasks import notify_requester_task

    steward.email = "steward@example.org"
    steward.save()
    # The task runs here, with the arguments it was queued with, as the worker would run it.
    queued = []
    monkeypatch.setattr(
        notify_requester_task,
        "delay",
        lambda *args: queued.append(args) or notify_requester_task(*args),
    )
    with django_capture_on_commit_callbacks(execute=True):
        review.review(officer, ready_request.pk, "changes", "Coarser ages, please.")
    assert queued == [(Review.objects.get().pk,)]
    assert len(mailoutbox) == 1
    message = mailoutbox[0]
    assert message.to == ["steward@example.org"]
    assert "requested changes" in message.subject.lower()
    assert "Coarser ages, please." in message.body
    assert f"http://127.0.0.1:8000/requests/{ready_request.pk}/" in message.body


def test_approved_extract_download_matches_the_reviewed_bytes(ready_request, officer, recipient):
    approve(officer, ready_request, recipient)
    vote = Review.objects.get()
    for fmt in ("csv", "xlsx", "parquet"):
        content = download(recipient, ready_request, fmt)
        assert storage.sha256_hex(content) == ready_request.files.get(format=fmt).sha256
    assert storage.sha256_hex(download(recipient, ready_request)) == vote.extract_sha256
    assert vote.package_sha256 == ready_request.package_sha256


# --- The page ----------------------------------------------------------------------------------


def test_review_page_shows_figures_checks_charts_and_classes(ready_request, officer, client):
    client.force_login(officer)
    page = client.get(reverse("releases:request_detail", args=[ready_request.pk])).content.decode()
    for needle in [
        'id="k-achieved"',
        'id="loss"',
        "highest re-identification risk",
        'class="chart histogram"',
        'class="chart risk"',
        "Checks",
        "Examples",
        "A sample of released rows",
        'id="classes"',
        "Request changes",
    ]:
        assert needle in page, needle


def test_classes_table_sorts_filters_and_expands(ready_request, officer, client):
    client.force_login(officer)
    url = reverse("releases:request_classes", args=[ready_request.pk])
    largest = client.get(url + "?order=-size", HTTP_HX_REQUEST="true").content.decode()
    sizes = list(ready_request.classes.order_by("-size").values_list("size", flat=True))
    assert f'<td class="num">{sizes[0]}</td>' in largest.split("<tbody>")[1].split("</tr>")[0]
    one = ready_request.classes.order_by("size").first()
    filtered = client.get(
        url, {"attribute": "sex", "value": one.values["sex"]}, HTTP_HX_REQUEST="true"
    )
    expected = ready_request.classes.filter(values__sex=one.values["sex"]).count()
    assert filtered.content.decode().count('class="class-row') == min(expected, 25)
    detail = client.get(
        reverse("releases:class_detail", args=[ready_request.pk, one.pk]), HTTP_HX_REQUEST="true"
    )
    body = detail.content.decode()
    assert "diagnosis" in body and "distinct l" in body
    counts = one.sensitive["diagnosis"]["values"]
    assert sum(counts.values()) == one.size


def test_queue_filters_and_shows_the_reviewers_progress(
    ready_request, officer, second_officer, client, settings
):
    settings.REQUIRED_APPROVALS = 2
    review.review(officer, ready_request.pk, "approve")
    client.force_login(officer)
    page = client.get(reverse("releases:review_queue")).content.decode()
    assert f"#{ready_request.pk}" in page and "reviewed" in page
    client.force_login(second_officer)
    page = client.get(reverse("releases:review_queue")).content.decode()
    assert "waiting for you" in page
    assert 'class="badge"' in page  # the navigation counts what waits for this officer
    page = client.get(reverse("releases:review_queue") + "?state=approved").content.decode()
    assert f"#{ready_request.pk}" not in page
