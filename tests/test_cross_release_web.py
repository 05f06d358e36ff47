"""Releases judged together, on the web side: the dataset's release history, the cross-release
check the worker computes with every extract run, approval of a failing check only with a
written justification, and the search that protects earlier releases.

Every figure is checked against an independent computation written here: each extract is
rebuilt from the original rows with the ARX hierarchy files read by pandas (no engine code),
its classes smaller than k removed, compared with the released file, and the joint classes
are a pandas group-by over the source rows on (class in the new extract, class in the earlier
one or "not in it").
"""

from __future__ import annotations

import hashlib
import io

import pandas as pd
import pytest
from django.urls import reverse

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.datasets import services as datasets
from releases.models import AuditEvent, ReleaseRequest, Review, Role
from releases.requests import checks
from releases.requests.forms import ReleaseRequestForm
from releases.review import report
from releases.review import services as review
from tests.conftest import ADULT, hierarchy_upload
from tests.support import factories
from tests.support.frames import join_rows
from tests.support.workflow import approve, download, form_data, request_release, run, tag

pytestmark = pytest.mark.django_db

QIS = ["age", "education", "sex", "race"]
ROWS = 2000
K = 5


def _sample_bytes() -> bytes:
    lines = (ADULT / "adult.csv").read_text(encoding="utf-8").splitlines()
    return ("\n".join(lines[: ROWS + 1]) + "\n").encode("utf-8")


@pytest.fixture
def original() -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(_sample_bytes()), sep=";", dtype=str, keep_default_na=False)


@pytest.fixture
def adult(steward):
    """2,000 Adult rows: age, education, sex and race quasi-identifiers with ARX hierarchies,
    workclass released unchanged, the rest withheld."""
    dataset = factories.make_dataset(steward, _sample_bytes(), "adult.csv")
    tag(
        steward,
        dataset,
        {**{q: Role.QUASI_IDENTIFIER for q in QIS}, "workclass": Role.INSENSITIVE},
    )
    for column in dataset.columns.filter(name__in=QIS):
        datasets.set_hierarchy_file(steward, dataset, column.pk, hierarchy_upload(column.name))
    return dataset


# --------------------------------------------------------------------------- independent helpers


def generalized(original: pd.DataFrame, levels: dict[str, int]) -> pd.DataFrame:
    """The quasi-identifiers at ``levels``, from the ARX hierarchy files read by pandas."""
    out = {}
    for q, level in levels.items():
        table = pd.read_csv(ADULT / f"adult_hierarchy_{q}.csv", sep=";", header=None, dtype=str)
        out[q] = original[q].map(dict(zip(table[0], table[level], strict=True)))
    return pd.DataFrame(out)


def classes_at(original: pd.DataFrame, levels: dict[str, int], k: int = K) -> pd.Series:
    """Per source row its class (the generalized values joined), or None when its class has
    fewer than k rows (k-anonymity suppresses it)."""
    key = join_rows(generalized(original, levels), "|")
    size = key.map(key.value_counts())
    return key.where(size >= k, None)


def released(release_request: ReleaseRequest, user) -> tuple[bytes, pd.DataFrame]:
    raw = download(user, release_request)
    return raw, pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)


def assert_release_is(frame: pd.DataFrame, original: pd.DataFrame, classes: pd.Series) -> None:
    """The released rows are the original rows kept by ``classes``, generalized (as multisets
    of quasi-identifier values)."""
    kept = classes.dropna()
    expected = kept.value_counts().sort_index()
    got = join_rows(frame[QIS], "|").value_counts().sort_index()
    assert got.to_dict() == expected.to_dict()
    assert sorted(frame["workclass"]) == sorted(original.loc[kept.index, "workclass"])


def joint_sizes(new: pd.Series, earlier: pd.Series) -> pd.Series:
    """Sizes of the joint classes: the new extract's rows grouped by (new class, earlier
    class or "not in it")."""
    frame = pd.DataFrame({"new": new, "earlier": earlier.fillna("<not in it>")})
    return frame.dropna(subset=["new"]).groupby(["new", "earlier"]).size()


def ready(steward, dataset, levels=None, k=K, limit=0.3, **extra) -> ReleaseRequest:
    done = run(request_release(steward, dataset, k=k, suppression_limit=limit, levels=levels))
    assert done.state == ReleaseRequest.State.READY, done.error
    return done


FIRST = {"age": 1, "education": 3, "sex": 0, "race": 0}
SECOND = {"age": 4, "education": 0, "sex": 0, "race": 0}


# --------------------------------------------------------------------------- release history


def test_history_lists_the_approved_extract_with_the_sha256_of_its_bytes(
    client, steward, officer, recipient, adult
):
    first = approve(officer, ready(steward, adult, FIRST), recipient)
    raw, _ = released(first, recipient)
    client.force_login(steward)
    page = client.get(reverse("releases:dataset_detail", args=[adult.pk]))
    assert page.status_code == 200
    history = page.context["history"]
    assert [h["id"] for h in history] == [first.pk]
    entry = history[0]
    csv = next(f for f in entry["files"] if f["format"] == "csv")
    assert csv["sha256"] == hashlib.sha256(raw).hexdigest()
    assert (
        entry["recipients"] == ["recipient"]
        and entry["k_achieved"] == first.summary["achieved"]["k"]
    )
    levels = {c["name"]: c.get("level") for c in entry["columns"] if c["role"] == "quasi"}
    assert levels == FIRST
    roles = {c["name"]: c["role"] for c in entry["columns"]}
    assert roles["workclass"] == Role.INSENSITIVE
    assert hashlib.sha256(raw).hexdigest() in page.content.decode()
    # Beside the review: the officer sees the same history on a later request's page.
    second = ready(steward, adult, SECOND)
    client.force_login(officer)
    page = client.get(reverse("releases:request_detail", args=[second.pk]))
    assert [h["id"] for h in page.context["history"]] == [first.pk]
    assert 'id="history-table"' in page.content.decode()
    # And on the officers' page of the dataset (its budget page), with the same bytes' hash.
    page = client.get(reverse("releases:budget_detail", args=[adult.pk]))
    assert page.status_code == 200
    assert [h["id"] for h in page.context["history"]] == [first.pk]
    assert hashlib.sha256(raw).hexdigest() in page.content.decode()


def test_a_recipient_and_another_steward_see_neither_history_nor_joint_classes(
    client, steward, other_steward, officer, recipient, adult
):
    first = approve(officer, ready(steward, adult, FIRST), recipient)
    second = ready(steward, adult, SECOND)
    review.review(officer, second.pk, "approve", justification="Tested: the recipients differ.")
    second.refresh_from_db()
    second.recipients.add(recipient)
    for user in (recipient, other_steward):
        client.force_login(user)
        for name in ("releases:dataset_detail", "releases:budget_detail"):
            assert client.get(reverse(name, args=[adult.pk])).status_code in (403, 404)
    client.force_login(other_steward)
    assert client.get(reverse("releases:request_detail", args=[second.pk])).status_code == 404
    client.force_login(recipient)
    for release in (first, second):
        page = client.get(reverse("releases:request_detail", args=[release.pk]))
        assert page.status_code == 200
        text = page.content.decode()
        assert "joint class" not in text.lower() and "history-table" not in text
        assert "history" not in page.context
    # The recipient's report holds no cross-release section, the officer's does.
    assert "cross_release" not in report.build(second, report.RECIPIENT)
    assert report.build(second, report.REVIEWER)["cross_release"]["earlier_releases"]


# --------------------------------------------------------------------------- the check


def test_complementary_extracts_fail_the_check_with_the_figures_of_a_pandas_group_by(
    client, steward, officer, recipient, adult, original
):
    """Sweeney's complementary release: age in 5-year bands without education, then
    education without age. Each is 5-anonymous; together they single people out."""
    first = approve(officer, ready(steward, adult, FIRST), recipient)
    second = ready(steward, adult, SECOND)
    theirs_first, theirs_second = classes_at(original, FIRST), classes_at(original, SECOND)
    # Each release is the independent rebuild, and each is 5-anonymous.
    _, first_frame = released(first, recipient)
    assert_release_is(first_frame, original, theirs_first)
    assert first_frame.groupby(QIS).size().min() >= K
    expected = joint_sizes(theirs_second, theirs_first)
    assert expected.min() < K  # the known answer: together they single people out
    entries = second.summary["cross_release"]
    assert [e["request"] for e in entries] == [first.pk]
    entry = entries[0]
    assert entry["smallest_joint_class"] == int(expected.min())
    assert entry["rows_below_k"] == int(expected[expected < K].sum())
    assert entry["joint_classes"] == len(expected)
    assert entry["passed"] is False and entry["membership"] == "stored"
    assert entry["evidence"]["unchanged"] == ["sex", "race", "workclass"]
    assert set(entry["evidence"]["quasi_identifiers"]) == set(QIS)
    check = next(c for c in checks.checks(second) if c.name == checks.CROSS_RELEASE)
    assert not check.passed and str(entry["rows_below_k"]) in check.detail
    # The steward sees it on the request's page in the ready state, before any review.
    client.force_login(steward)
    page = client.get(reverse("releases:request_detail", args=[second.pk])).content.decode()
    assert 'id="cross-release"' in page and "singles people out together" in page
    assert f'data-figure="rows_below_k">{entry["rows_below_k"]}<' in page
    assert "Rows can be linked across the two extracts" in page


def test_comparable_levels_without_suppression_are_safe_together(steward, officer, adult, original):
    """An extract whose levels are all at least those of an earlier one of the same rows,
    neither suppressing a row, adds nothing: every joint class is a class of the earlier one,
    which is k-anonymous already."""
    earlier_levels = {"age": 2, "education": 3, "sex": 1, "race": 1}
    later_levels = {"age": 3, "education": 3, "sex": 1, "race": 1}
    for levels in (earlier_levels, later_levels):
        assert classes_at(original, levels).notna().all()  # no row suppressed
    first = approve(officer, ready(steward, adult, earlier_levels, limit=0.0))
    second = ready(steward, adult, later_levels, limit=0.0)
    expected = joint_sizes(classes_at(original, later_levels), classes_at(original, earlier_levels))
    entry = second.summary["cross_release"][0]
    assert entry["request"] == first.pk and entry["passed"] is True
    assert entry["smallest_joint_class"] == int(expected.min()) >= K
    assert entry["rows_below_k"] == 0
    assert entry["joint_classes"] == len(expected) == classes_at(original, earlier_levels).nunique()
    assert next(c for c in checks.checks(second) if c.name == checks.CROSS_RELEASE).passed


def test_a_round_stored_without_its_membership_is_re_applied(steward, officer, adult, original):
    first = approve(officer, ready(steward, adult, FIRST))
    storage.delete_quietly(first.summary["membership_path"])
    second = ready(steward, adult, SECOND)
    entry = second.summary["cross_release"][0]
    expected = joint_sizes(classes_at(original, SECOND), classes_at(original, FIRST))
    assert entry["membership"] == "re-applied"
    assert entry["rows_below_k"] == int(expected[expected < K].sum())


# --------------------------------------------------------------------------- approval gating


def test_a_failing_cross_release_check_is_approved_only_with_a_written_justification(
    client, steward, officer, recipient, adult
):
    approve(officer, ready(steward, adult, FIRST), recipient)
    second = ready(steward, adult, SECOND)
    with pytest.raises(InvalidInput, match="justification"):
        review.review(officer, second.pk, "approve")
    second.refresh_from_db()
    assert second.state == ReleaseRequest.State.READY and not second.reviews.exists()
    # Through the page: the form asks for the justification and refuses without it.
    client.force_login(officer)
    url = reverse("releases:request_review", args=[second.pk])
    page = client.get(reverse("releases:request_detail", args=[second.pk])).content.decode()
    assert 'id="justification-field"' in page
    refused = client.post(url, {"decision": "approve"})
    assert refused.status_code == 400 and "write why you accept it" in refused.content.decode()
    reason = "Both recipients are the same team, bound by the same agreement."
    assert client.post(url, {"decision": "approve", "justification": reason}).status_code == 302
    second.refresh_from_db()
    assert second.state == ReleaseRequest.State.APPROVED
    vote = Review.objects.get(request=second)
    assert vote.justification == reason and vote.accepted_checks == [checks.CROSS_RELEASE]
    event = AuditEvent.objects.filter(request=second, action=AuditEvent.Action.REVIEW).latest("id")
    assert event.detail["justification"] == reason
    assert checks.CROSS_RELEASE in event.detail["accepted_checks"]
    content = report.build(second, report.REVIEWER)
    assert content["cross_release"]["accepted"][0]["justification"] == reason
    assert content["reviews"][0]["justification"] == reason
    page = client.get(reverse("releases:report", args=[second.pk])).content.decode()
    assert reason in page and 'id="report-cross-release"' in page


def test_a_passing_check_needs_no_justification(steward, officer, adult):
    levels = {"age": 4, "education": 1, "sex": 0, "race": 1}
    approve(officer, ready(steward, adult, levels, limit=0.0))
    second = approve(officer, ready(steward, adult, levels, limit=0.0))
    assert second.state == ReleaseRequest.State.APPROVED
    assert Review.objects.get(request=second).accepted_checks == []


# --------------------------------------------------------------------------- the protecting search


def test_the_form_offers_the_protection_only_when_there_are_earlier_extracts(
    steward, officer, adult
):
    assert "protect_earlier" not in ReleaseRequestForm(dataset=adult).fields
    first = approve(officer, ready(steward, adult, FIRST))
    form = ReleaseRequestForm(dataset=adult)
    assert form.fields["protect_earlier"].initial is True
    bound = ReleaseRequestForm(form_data(protect_earlier="on"), dataset=adult)
    assert bound.is_valid(), bound.errors
    params = bound.parameters()
    assert params.earlier_releases == (first.pk,)
    assert params.to_json()["earlier_releases"] == [first.pk]
    assert any(c.name == "earlier-releases" for c in params.model.criteria)
    unticked = ReleaseRequestForm(form_data(), dataset=adult)
    assert unticked.is_valid() and unticked.parameters().earlier_releases == ()


def test_the_protected_search_is_safe_with_the_earlier_release_and_names_it(
    client, steward, officer, recipient, adult, original
):
    first = approve(officer, ready(steward, adult, FIRST), recipient)
    plain = ready(steward, adult, None, limit=0.05)
    assert plain.summary["cross_release"][0]["rows_below_k"] > 0  # the optimum is not safe
    client.force_login(steward)
    response = client.post(
        reverse("releases:request_create", args=[adult.pk]),
        form_data(protect_earlier="on", recipients=[recipient.pk]),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    protected = run(ReleaseRequest.objects.exclude(pk__in=[first.pk, plain.pk]).get())
    assert protected.state == ReleaseRequest.State.READY, protected.error
    assert protected.parameters["earlier_releases"] == [first.pk]
    assert protected.summary["protection"]["constrained_by"] == [f"request #{first.pk}"]
    levels = protected.summary["levels"]
    # Independently: rebuild the release from its levels and its released file, then group.
    _, frame = released(approve(officer, protected, recipient), recipient)
    kept = set(join_rows(frame[QIS], "|"))  # a class is released whole or not at all
    new = join_rows(generalized(original, {q: levels[q] for q in QIS}), "|")
    new = new.where(new.isin(kept), None)
    assert_release_is(frame, original, new)
    sizes = joint_sizes(new, classes_at(original, FIRST))
    assert sizes.min() >= K
    entry = protected.summary["cross_release"][0]
    assert entry["passed"] and entry["smallest_joint_class"] == int(sizes.min())
    page = client.get(reverse("releases:request_detail", args=[protected.pk])).content.decode()
    assert 'id="constrained-by"' in page and f"request #{first.pk}" in page
