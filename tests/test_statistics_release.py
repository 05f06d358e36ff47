"""Statistics releases end to end through the services and pages: request, the worker's body,
review, approval, downloads; the budget refusing what does not fit (up front and when spending);
re-runs spending again; rejected and failed releases keeping their spend; bounds; the free
preview; who sees what.

Concurrent releases on PostgreSQL are in tests/test_statistics_concurrency.py; the noise's
scale against OpenDP's promise in tests/test_dp_engine.py; the browser path in
tests/test_browser_statistics.py.

The steward's dataset is uploaded and tagged once for the module (tests/support/world.py): each
test funds and changes it inside its own transaction, rolled back, and reads its own copy of
the file.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
from decimal import Decimal
from unittest import mock

import pandas as pd
import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.test import Client
from django.urls import reverse

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.datasets import budget
from releases.datasets import services as datasets
from releases.engine import dp as D
from releases.models import AuditEvent, BudgetEntry, Dataset, ReleaseFile, ReleaseRequest, Role
from releases.requests import reproduction
from releases.requests import rules as lifecycle
from releases.requests.services import Sharing
from releases.review import services as review
from releases.statistics import run as statistics_run
from releases.statistics import services as statistics
from tests.support import factories
from tests.support import world as world_support
from tests.support.workflow import download, request_release, run, tag

State = ReleaseRequest.State
Kind = BudgetEntry.Kind
pytestmark = pytest.mark.django_db

#: Region names that exist in the original only: no page or file a recipient gets holds one.
MARKER = "Qvillemark"
ROWS = 240


def people_csv(rows: int = ROWS, seed: int = 7) -> str:
    rng = random.Random(seed)
    lines = ["name,region,sex,age,income"]
    for i in range(rows):
        lines.append(
            f"Zorblatt {i:03d},{MARKER}{i % 6},{rng.choice('FM')},{rng.randint(18, 90)},"
            f"{rng.randint(0, 90_000)}"
        )
    return "\n".join(lines) + "\n"


COUNT = {"kind": "count", "epsilon": 0.25}
BY_SEX = {
    "kind": "histogram",
    "epsilon": 0.25,
    "by": [{"column": "sex", "categories": ["F", "M"]}, {"column": "age", "edges": [0, 40, 120]}],
}
MEAN_INCOME = {"kind": "mean", "column": "income", "lower": 0, "upper": 100_000, "epsilon": 0.25}
MEDIAN_AGE = {
    "kind": "quantiles",
    "column": "age",
    "lower": 0,
    "upper": 120,
    "alphas": [0.5],
    "epsilon": 0.25,
}
QUERIES = [COUNT, BY_SEX, MEAN_INCOME, MEDIAN_AGE]


#: The roles the steward gives: statistics may read every column but the names.
ROLES = {
    "name": Role.IDENTIFIER,
    "region": Role.QUASI_IDENTIFIER,
    "sex": Role.QUASI_IDENTIFIER,
    "age": Role.QUASI_IDENTIFIER,
    "income": Role.SENSITIVE,
}


@pytest.fixture(scope="module")
def shared_dataset(django_db_setup, django_db_blocker):
    """``steward`` and their people, uploaded and tagged with ``ROLES`` once for the module."""
    with world_support.dataset_once(django_db_blocker, people_csv(), ROLES) as made:
        yield made


@pytest.fixture
def steward(shared_dataset, db) -> User:
    """The module's steward, read afresh."""
    return User.objects.get(pk=shared_dataset["steward"].pk)


@pytest.fixture
def dataset(shared_dataset, steward, private_media_root) -> Dataset:
    """The module's dataset, read afresh, its file copied to the test's media folder."""
    world_support.media_copy(shared_dataset, private_media_root)
    return Dataset.objects.get(pk=shared_dataset["dataset"].pk)


@pytest.fixture
def funded(dataset, officer):
    budget.set_budget(officer, dataset, "2", "0")
    return dataset


def ask(steward, dataset, queries=QUERIES, recipients=()) -> ReleaseRequest:
    return statistics.request_statistics(
        steward, dataset, [dict(q) for q in queries], Sharing(recipients=list(recipients))
    )


def ran(release_request: ReleaseRequest) -> ReleaseRequest:
    statistics_run.run_statistics(release_request.pk)
    release_request.refresh_from_db()
    return release_request


def spends(dataset) -> list[BudgetEntry]:
    return list(BudgetEntry.objects.filter(dataset=dataset, kind=Kind.DP_SPEND).order_by("id"))


def page(user, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


# --- The whole path ------------------------------------------------------------------------


def test_request_run_approve_and_download_exactly_the_reviewed_tables(
    funded, steward, officer, recipient
):
    release_request = ran(ask(steward, funded, recipients=[recipient]))
    assert release_request.state == State.READY, release_request.error
    assert release_request.is_statistics and release_request.round == 1

    # Spent once, before the noise, linked to the request and its round.
    (spent,) = spends(funded)
    assert spent.epsilon == Decimal("1") and spent.actor == steward
    assert spent.release_request == release_request and spent.detail["round"] == 1
    assert [q["epsilon"] for q in spent.detail["queries"]] == [0.25] * 4
    assert budget.remaining(funded).epsilon == Decimal("1")
    (logged,) = AuditEvent.objects.filter(action=AuditEvent.Action.BUDGET_SPEND)
    assert logged.request == release_request and logged.detail["epsilon"] == "1"
    summary = release_request.summary
    assert summary["budget"]["before"] == "2" and summary["budget"]["after"] == "1"
    assert all(c.passed for c in review.checks(release_request)), review.checks(release_request)

    # The officer's page shows each query, its ε, mechanism, bounds, values with errors, the
    # budget before and after, and the files' SHA-256.
    files = {f.format: f for f in release_request.files.all()}
    assert set(files) == {ReleaseFile.Format.CSV, ReleaseFile.Format.JSON}
    officer_page = page(officer, release_request.get_absolute_url())
    for text in (
        "Number of rows",
        "Rows by sex × age",
        "Mean of income (values clamped to [0, 100000])",
        "discrete Laplace",
        "exponential mechanism",
        'id="budget-before">2<',
        'id="budget-after">1<',
        files["csv"].sha256,
        files["json"].sha256,
    ):
        assert text in officer_page, text

    approved = review.review(officer, release_request.pk, "approve")
    assert approved.state == State.APPROVED

    csv_bytes = download(recipient, release_request, "csv")
    json_bytes = download(recipient, release_request, "json")
    assert storage.sha256_hex(csv_bytes) == files["csv"].sha256
    assert storage.sha256_hex(json_bytes) == files["json"].sha256
    # The JSON holds exactly the reviewed results, and the CSV the same numbers.
    content = json.loads(json_bytes)
    assert content["result"] == summary["result"]
    assert content["result_sha256"] == summary["result_sha256"]
    rows = list(csv.DictReader(io.StringIO(csv_bytes.decode())))
    expected = D.ReleaseResult.from_dict(summary["result"]).table_rows()
    assert len(rows) == len(expected) == 1 + (4 + 1) + 1 + 1  # count, 2x2 cells + other, ...
    for row, want in zip(rows, expected, strict=True):
        assert row["statistic"] == want["statistic"] and row["group"] == want["group"]
        assert float(row["value"]) == pytest.approx(float(want["value"]), abs=0)
    methods = {m["statistic"]: m for m in content["methods"]}
    assert methods["Mean of income (values clamped to [0, 100000])"]["bounds"] == [0, 100_000]
    assert all(m["error_95"] is not None for m in content["methods"])

    # Downloads are logged; the release report carries the methods note and the budget.
    logged = AuditEvent.objects.filter(action=AuditEvent.Action.DOWNLOAD, actor=recipient)
    assert sorted(e.detail["file"] for e in logged) == ["csv", "json"]
    client = Client()
    client.force_login(recipient)
    response = client.get(reverse("releases:download_report", args=[release_request.pk]))
    report = json.loads(b"".join(response.streaming_content))
    assert report["kind"] == "statistics" and report["audience"] == "recipient"
    notes = report["statistics"]["queries"]
    assert [n["epsilon"] for n in notes] == [0.25] * 4
    assert notes[2]["bounds"] == [0, 100_000] and notes[2]["mechanism"].startswith("Laplace")
    assert report["statistics"]["privacy_unit"].startswith("one row")
    assert report["budget"] == {
        "epsilon_spent": "1",
        "delta_spent": "0",
        "before": "2",
        "after": "1",
        "spent_at": summary["budget"]["spent_at"],
    }
    assert "checks" not in report and "reviews" not in report


# --- The budget ------------------------------------------------------------------------------


def test_a_release_that_does_not_fit_is_refused_up_front_and_nothing_is_saved(
    dataset, steward, officer
):
    with pytest.raises(InvalidInput, match="No privacy budget is set"):
        ask(steward, dataset)
    budget.set_budget(officer, dataset, "0.9", "0")
    with pytest.raises(InvalidInput, match=r"need ε 1, but only ε 0\.9 .* remains"):
        ask(steward, dataset)
    assert not ReleaseRequest.objects.exists() and not spends(dataset)
    # The page says the same, with the preview's total, and keeps what was typed.
    client = Client()
    client.force_login(steward)
    response = client.post(
        reverse("releases:statistics_request", args=[dataset.pk]),
        {**form_data([COUNT, MEAN_INCOME, MEDIAN_AGE, BY_SEX]), "action": "submit"},
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "only ε 0.9" in body and 'id="preview-refusal"' in body
    assert not ReleaseRequest.objects.exists()


def test_a_release_that_no_longer_fits_when_it_runs_fails_without_spending(
    dataset, steward, officer
):
    budget.set_budget(officer, dataset, "1", "0")
    big = [dict(q, epsilon=0.3) for q in (COUNT, MEAN_INCOME)]  # ε 0.6 each: both pass up front
    first, second = ask(steward, dataset, big), ask(steward, dataset, big)
    assert ran(first).state == State.READY
    failed = ran(second)
    assert failed.state == State.FAILED
    assert "needs ε 0.6, but only ε 0.4" in failed.error
    assert [s.release_request for s in spends(dataset)] == [first]
    assert not failed.files.exists() and not failed.summary


def test_resubmitting_runs_again_and_spends_again_visibly(funded, steward, officer):
    release_request = ran(ask(steward, funded, [COUNT, MEAN_INCOME]))
    review.review(officer, release_request.pk, "changes", "Drop the mean, more ε on the count.")
    statistics.resubmit(steward, release_request.pk, [dict(COUNT, epsilon=0.75)], "Done.")
    release_request = ran(ReleaseRequest.objects.get(pk=release_request.pk))
    assert release_request.state == State.READY and release_request.round == 2
    first, second = spends(funded)
    assert (first.detail["round"], first.epsilon) == (1, Decimal("0.5"))
    assert (second.detail["round"], second.epsilon) == (2, Decimal("0.75"))
    assert first.release_request == second.release_request == release_request
    assert budget.remaining(funded).epsilon == Decimal("0.75")
    archived = release_request.rounds.get(number=1)
    assert archived.parameters["spent"] == "0.5" and archived.outcome == State.CHANGES_REQUESTED
    # Only the new round's files remain; both spends are on the ledger of the request page.
    assert {f.round for f in release_request.files.all()} == {2}
    body = page(steward, release_request.get_absolute_url())
    assert body.count(f'href="/requests/{release_request.pk}/">#{release_request.pk}</a>') == 2
    assert "round 1" in body and "round 2" in body


def test_a_rejected_release_keeps_its_spend_and_the_ledger_says_so(funded, steward, officer):
    release_request = ran(ask(steward, funded, [COUNT]))
    review.review(officer, release_request.pk, "reject", "Not for publication.")
    (spent,) = spends(funded)
    assert spent.epsilon == Decimal("0.25")
    assert budget.remaining(funded).epsilon == Decimal("1.75")
    line = re.search(
        rf'data-ledger="{spent.pk}".*?data-request-state="(\w+)"',
        page(officer, reverse("releases:budget_detail", args=[funded.pk])),
        re.S,
    )
    assert line and line.group(1) == "rejected"


def test_a_run_that_fails_after_spending_keeps_the_spend_and_says_so(funded, steward):
    release_request = ask(steward, funded, [COUNT])
    with mock.patch.object(datasets, "load_frame", side_effect=OSError("disk gone")):
        failed = ran(release_request)
    assert failed.state == State.FAILED
    assert "internal error" in failed.error and "spent all the same (ε 0.25)" in failed.error
    assert len(spends(funded)) == 1


def test_a_round_spends_once_even_when_its_task_runs_again(funded, steward):
    """A worker killed after spending leaves the round to be run again (redelivered, or
    re-queued by recovery): the second run draws the noise under the round's one spend."""
    release_request = ask(steward, funded, [COUNT])
    with (
        mock.patch.object(D, "run_release", side_effect=SystemExit("killed")),
        pytest.raises(SystemExit),
    ):
        statistics_run.run_statistics(release_request.pk)
    assert ReleaseRequest.objects.get(pk=release_request.pk).state == State.RUNNING
    ReleaseRequest.objects.filter(pk=release_request.pk).update(state=State.QUEUED)
    assert ran(release_request).state == State.READY
    assert len(spends(funded)) == 1
    # A third delivery finds nothing to run.
    statistics_run.run_statistics(release_request.pk)
    assert len(spends(funded)) == 1


def test_the_run_task_sent_for_a_statistics_release_runs_its_own_body(funded, steward):
    """Recovery and redelivery send ``releases.run_release`` for any request."""
    from releases.requests import tasks

    release_request = ask(steward, funded, [COUNT])
    tasks.run_release_task(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == State.READY and not release_request.classes.exists()
    assert {f.format for f in release_request.files.all()} == {"csv", "json"}
    tasks.run_release_task(release_request.pk)
    assert len(spends(funded)) == 1


# --- Bounds ----------------------------------------------------------------------------------


def test_bounds_are_the_stewards_and_clamp_every_value(steward, officer):
    """Incomes up to a billion, bounds [0, 100]: the sum's noise scale depends on the bounds
    alone, and no released value leaves what the bounds allow."""
    rng = random.Random(3)
    lines = ["income"] + [str(rng.choice([5, 50, 10**9])) for _ in range(300)]
    wild = factories.make_dataset(steward, "\n".join(lines) + "\n", "wild.csv")
    tag(steward, wild, {"income": Role.SENSITIVE})
    budget.set_budget(officer, wild, "10", "0")
    bounded = {"column": "income", "lower": 0, "upper": 100}
    queries = [
        dict(bounded, kind="sum", epsilon=1.0),
        dict(bounded, kind="mean", epsilon=1.0),
        dict(bounded, kind="quantiles", alphas=[0.1, 0.5, 0.99], epsilon=1.0),
    ]
    release_request = ran(ask(steward, wild, queries))
    results = D.ReleaseResult.from_dict(release_request.summary["result"]).results
    total, mean, quantiles = results
    # Sensitivity and scale: the bound, not the data's billion.
    # (OpenDP's float sum adds a hair for rounding: 100.00016.)
    assert total.plan.sensitivity == pytest.approx(100, rel=1e-5)
    assert total.plan.scale == pytest.approx(100, rel=1e-5)
    # True clamped sum <= 300 * 100; the Laplace noise passes 10 times its 95 % accuracy
    # with probability 20^-10 (under 1e-13).
    assert -10 * total.error <= total.value <= 300 * 100 + 10 * total.error
    assert 0 <= mean.value <= 100
    assert all(0 <= q["value"] <= 100 for q in quantiles.value)
    # The form never offers bounds from the data: the steward types them.
    body = page(steward, reverse("releases:statistics_request", args=[wild.pk]))
    for name in ("q-0-lower", "q-0-upper"):
        field = re.search(rf'<input[^>]*name="{name}"[^>]*>', body).group(0)
        assert "value=" not in field, field


def test_queries_without_bounds_or_with_bad_bounds_are_refused(funded, steward):
    for query, message in (
        ({"kind": "sum", "column": "income", "epsilon": 0.1}, "needs 'lower'"),
        (dict(MEAN_INCOME, lower=5, upper=5), "lower bound .* below its upper"),
        (dict(MEAN_INCOME, column="salary"), "no column 'salary'"),
        (dict(COUNT, epsilon=0), "ε must be above 0"),
    ):
        with pytest.raises(InvalidInput, match=message):
            ask(steward, funded, [query])
    assert not ReleaseRequest.objects.exists()


# --- The free preview ------------------------------------------------------------------------


def form_data(queries: list[dict], total: int | None = None) -> dict:
    """The request form's fields for ``queries``."""
    data = {"q-TOTAL_FORMS": str(total or len(queries)), "q-INITIAL_FORMS": "0"}
    for i, query in enumerate(queries):
        for name, value in statistics_form_fields(query).items():
            data[f"q-{i}-{name}"] = value
    return data


def statistics_form_fields(query: dict) -> dict:
    from releases.statistics.forms import StatisticsQueryForm

    initial = StatisticsQueryForm.initial_from(query)
    return {k: "" if v is None else str(v) for k, v in initial.items()}


def test_the_preview_spends_nothing_and_its_errors_are_those_of_the_run(funded, steward):
    client = Client()
    client.force_login(steward)
    response = client.post(
        reverse("releases:statistics_preview", args=[funded.pk]), form_data(QUERIES)
    )
    body = response.content.decode()
    assert response.status_code == 200 and 'id="preview-fits"' in body
    previewed = statistics.preview(steward, funded, [dict(q) for q in QUERIES])
    assert previewed.fits and previewed.epsilon == Decimal("1")
    shown = [float(e) for e in re.findall(r'data-error="([^"]+)"', body)]
    assert shown == [row.plan.error for row in previewed.rows]
    # Nothing spent, nothing logged as a spend.
    assert not spends(funded)
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.BUDGET_SPEND).exists()

    results = ran(ask(steward, funded)).summary["result"]["results"]
    for row, result in zip(previewed.rows, results, strict=True):
        if row.plan.kind == "mean":
            # Given at the dataset's ROWS rows; the run's at its noisy count: the same half-width
            # divided by that count instead.
            noisy_count = result["result_detail"]["noisy_count"]
            assert result["error"] == pytest.approx(row.plan.error * ROWS / noisy_count)
        else:
            assert result["error"] == row.plan.error
            assert result["scale"] == row.plan.scale


def test_the_preview_names_what_is_wrong_per_query_and_the_total_against_the_budget(
    funded, steward
):
    client = Client()
    client.force_login(steward)
    bad = {"kind": "histogram", "epsilon": 0.5, "by": [{"column": "sex", "edges": [5, 1]}]}
    huge = dict(COUNT, epsilon=5)
    body = client.post(
        reverse("releases:statistics_preview", args=[funded.pk]), form_data([bad, huge])
    ).content.decode()
    assert "must be increasing" in body and "Correct the queries" in body
    body = client.post(
        reverse("releases:statistics_preview", args=[funded.pk]), form_data([huge])
    ).content.decode()
    assert "need ε 5, but only ε 2" in body


def test_the_form_adds_queries_and_fills_labels_from_public_sources_for_its_steward_only(
    funded, steward, other_steward
):
    """The fill buttons offer the column's declared values or a level of its hierarchy, never
    the values found in the data; and only to the dataset's steward."""
    region = funded.columns.get(name="region")
    datasets.set_declared_domain(steward, funded, region.pk, "North\nSouth\nEast\nWest")
    client = Client()
    client.force_login(steward)
    url = reverse("releases:statistics_request", args=[funded.pk])
    data = form_data([{"kind": "histogram", "epsilon": 0.5, "by": [{"column": "region"}]}], 2)
    body = client.post(url, {**data, "action": "add"}).content.decode()
    assert 'name="q-2-kind"' in body

    def categories(body: str) -> list[str]:
        found = re.search(r'<textarea name="q-0-categories"[^>]*>(.*?)</textarea>', body, re.S)
        return found.group(1).split()

    body = client.post(url, {**data, "action": "domain-0-1"}).content.decode()
    assert categories(body) == ["North", "South", "East", "West"]
    assert re.search(r'<option value="domain" selected>', body)
    # The age column's hierarchy (automatic: intervals); level 1 holds intervals, not ages.
    age = {"kind": "histogram", "epsilon": 0.5, "by": [{"column": "age"}]}
    body = client.post(
        url, {**form_data([age], 2), "q-0-level": "1", "action": "hierarchy-0-1"}
    ).content.decode()
    ages = set(pd.read_csv(io.StringIO(people_csv()))["age"].astype(str))
    assert categories(body) and not set(categories(body)) & ages
    # Level 0 is the column's own values: refused, and nothing is filled in.
    body = client.post(
        url, {**form_data([age], 2), "q-0-level": "0", "action": "hierarchy-0-1"}
    ).content.decode()
    assert "is not one of them" in body and categories(body) == []
    # The old "use the column's values" action fills nothing from the data any more.
    body = client.post(url, {**data, "action": "fill-0-1"}).content.decode()
    assert categories(body) == [] and MARKER not in body
    other = Client()
    other.force_login(other_steward)
    assert other.post(url, {**data, "action": "domain-0-1"}).status_code == 404
    assert other.get(url).status_code == 404


# --- Review and lifecycle ------------------------------------------------------------------------


def test_a_statistics_release_is_not_reproduced_and_its_checks_bind_the_files(
    funded, steward, officer
):
    release_request = ran(ask(steward, funded, [COUNT]))
    assert "reproduce" not in lifecycle.buttons(officer, release_request)
    with pytest.raises(InvalidInput, match="not re-run"):
        reproduction.request_reproduction(officer, release_request.pk)
    # A JSON file changed after the run fails the checks, and the approval is refused.
    stored = release_request.files.get(format="json")
    path = storage.private_storage().path(stored.path)
    content = json.loads(storage.read_bytes(stored.path))
    content["result"]["results"][0]["value"] += 1
    with open(path, "w") as handle:
        json.dump(content, handle)
    failing = [c for c in review.checks(release_request) if not c.passed]
    assert [c.name for c in failing] == ["files"]
    with pytest.raises(InvalidInput, match="checks did not pass"):
        review.review(officer, release_request.pk, "approve")


def test_an_approved_extract_is_recorded_in_the_ledger_outside_the_budget(funded, steward, officer):
    # The extract releases sex and age generalized and nothing else.
    tag(
        steward,
        funded,
        {
            "sex": Role.QUASI_IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "region": Role.WITHHELD,
            "income": Role.WITHHELD,
        },
    )
    extract = run(request_release(steward, funded, k=5, suppression_limit=0.1))
    assert not BudgetEntry.objects.filter(kind=Kind.ROW_LEVEL).exists()
    review.review(officer, extract.pk, "approve")
    (line,) = BudgetEntry.objects.filter(kind=Kind.ROW_LEVEL)
    assert line.release_request == extract and line.epsilon is None and line.actor == steward
    assert line.detail["approved_by"] == officer.get_username()
    assert budget.remaining(funded).epsilon == Decimal("2")  # outside the DP budget
    for user, url in (
        (steward, reverse("releases:dataset_detail", args=[funded.pk])),
        (officer, reverse("releases:budget_detail", args=[funded.pk])),
        (officer, extract.get_absolute_url()),
    ):
        assert 'data-ledger-kind="row_level_release"' in page(user, url)


# --- Budget pages ------------------------------------------------------------------------------


def test_officers_set_and_raise_budgets_never_below_what_was_spent(
    funded, steward, officer, steward_officer, recipient, other_steward
):
    client = Client()
    client.force_login(officer)
    overview = client.get(reverse("releases:budget_list")).content.decode()
    assert "people.csv" in overview and MARKER not in overview
    ran(ask(steward, funded, [dict(COUNT, epsilon=1.5)]))
    url = reverse("releases:budget_set", args=[funded.pk])
    refused = client.post(url, {"epsilon": "1", "delta": "0"})
    assert refused.status_code == 400 and "cannot be set below" in refused.content.decode()
    assert client.post(url, {"epsilon": "3", "delta": "0"}).status_code == 302
    assert budget.remaining(funded).epsilon == Decimal("1.5")
    lines = BudgetEntry.objects.filter(dataset=funded, kind=Kind.BUDGET_SET)
    assert [line.epsilon for line in lines] == [Decimal(2), Decimal(3)]
    # Only officers who do not own the dataset set it; recipients and others see nothing.
    own = factories.make_dataset(steward_officer, people_csv(20), "own.csv")
    both = Client()
    both.force_login(steward_officer)
    body = both.get(reverse("releases:budget_detail", args=[own.pk])).content.decode()
    assert 'id="budget-form"' not in body and 'id="own-dataset"' in body
    denied = both.post(reverse("releases:budget_set", args=[own.pk]), {"epsilon": "9"})
    assert denied.status_code == 403 and "another privacy officer" in denied.content.decode()
    for user, status in ((steward, 403), (recipient, 403), (other_steward, 404)):
        other = Client()
        other.force_login(user)
        assert other.post(url, {"epsilon": "50"}).status_code == status
    for user, status in ((recipient, 403), (other_steward, 404)):
        other = Client()
        other.force_login(user)
        assert other.get(reverse("releases:budget_detail", args=[funded.pk])).status_code == (
            status
        )
    assert Client().get(reverse("releases:budget_list")).status_code == 302
    assert budget.budget_of(funded).epsilon_total == Decimal(3)


def test_the_ledger_pages_through_its_lines_newest_first(funded, steward, officer):
    for total in range(3, 3 + 25):
        budget.set_budget(officer, funded, total, 0)
    client = Client()
    client.force_login(officer)
    url = reverse("releases:ledger", args=[funded.pk])
    first = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    second = client.get(url + "?page=2", HTTP_HX_REQUEST="true").content.decode()
    assert first.count("data-ledger=") == 20 and second.count("data-ledger=") == 6
    assert "total ε 27" in first and "total ε 2<" not in first and "total ε 2" in second
    assert client.get(url + "?page=2").status_code == 302  # a plain link: the budget page


# --- Who sees what ---------------------------------------------------------------------------------

PEOPLE = ("requester", "other_steward", "officer", "recipient", "other_recipient", "anonymous")


@pytest.fixture
def people(steward, other_steward, officer, recipient, other_recipient):
    return {
        "requester": steward,
        "other_steward": other_steward,
        "officer": officer,
        "recipient": recipient,
        "other_recipient": other_recipient,
        "anonymous": AnonymousUser(),
    }


def _expected(person: str, state: str) -> dict[str, int]:
    released = state in ("approved", "revoked")
    sees = person in ("officer", "requester") or (person == "recipient" and released)
    out = dict.fromkeys(("detail", "report", "report_json"), 200 if sees else 404)
    for fmt in ("csv", "json"):
        if not sees:
            out[fmt] = 404
        elif person == "officer":
            out[fmt] = 403
        else:
            out[fmt] = {"approved": 200, "revoked": 410}.get(state, 409)
    out["statistics_form"] = {"requester": 200, "other_steward": 404}.get(person, 403)
    out["budget"] = {"requester": 200, "officer": 200, "other_steward": 404}.get(person, 403)
    if person == "anonymous":
        out = dict.fromkeys(out, 302)
    return out


@pytest.mark.parametrize("state", ["ready", "approved", "revoked"])
def test_who_sees_what_of_a_statistics_release(funded, people, officer, state):
    steward, recipient = people["requester"], people["recipient"]
    release_request = ran(ask(steward, funded, [COUNT, BY_SEX, MEAN_INCOME], [recipient]))
    if state != "ready":
        review.review(officer, release_request.pk, "approve")
    if state == "revoked":
        from releases.requests import services as sharing

        sharing.revoke(officer, release_request.pk, "Withdrawn.")
    pk = release_request.pk
    urls = {
        "detail": reverse("releases:request_detail", args=[pk]),
        "report": reverse("releases:report", args=[pk]),
        "report_json": reverse("releases:download_report", args=[pk]),
        "csv": reverse("releases:download_file", args=[pk, "csv"]),
        "json": reverse("releases:download_file", args=[pk, "json"]),
        "statistics_form": reverse("releases:statistics_request", args=[funded.pk]),
        "budget": reverse("releases:budget_detail", args=[funded.pk]),
    }
    for person, user in people.items():
        client = Client()
        if user.is_authenticated:
            client.force_login(user)
            if person in ("requester", "recipient") and state == "approved":
                client.post(reverse("releases:accept_terms", args=[pk]))
        expected = _expected(person, state)
        bodies = {}
        for name, url in urls.items():
            response = client.get(url)
            assert response.status_code == expected[name], (person, name, response.status_code)
            content = response.streaming_content if response.streaming else [response.content]
            bodies[name] = b"".join(content).decode()
        if person in ("recipient", "other_recipient"):
            for name, body in bodies.items():
                # No value of the original (region names, people's names), no ledger.
                assert MARKER not in body and "Zorblatt" not in body, (name, person)
                assert 'id="ledger"' not in body
        if person == "recipient" and state == "approved":
            assert 'data-query="3"' in bodies["detail"] and "noise scale" in bodies["detail"]
            assert storage.sha256_hex(bodies["csv"].encode()) == release_request.extract_sha256
        if person in ("officer", "requester"):
            assert 'id="ledger"' in bodies["detail"] and 'id="statistics"' in bodies["detail"]
            # Nothing the release holds comes from the data but the noisy numbers: even the
            # officers' pages of a statistics release show no region name.
            assert MARKER not in bodies["detail"]
