"""Statistics publish only columns chosen for release, and only labels that are public or
released privately.

The attack: a steward tags ``fullname`` as a direct identifier and asks for a histogram by it,
its labels filled in from the data; or the mean of a withheld column. It must fail when it is
requested (service and page), in the worker (roles changed after the request), and at the
review (a round whose column or labels break the rules cannot be approved). Labels from the
data go out only through OpenDP's private key release, which needs δ, and which in repeated
runs publishes no label held by a single row. A recipient crawling an approved release finds
no identifier, no withheld value and no label only the data holds. The exact counts behind the
published cells are for privacy officers only. Releases made before these rules are re-checked
by migration 0016.

The steward's dataset is uploaded and tagged once for the module (tests/support/world.py): each
test funds and changes it inside its own transaction, rolled back, and reads its own copy of
the file.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import random
from decimal import Decimal

import pandas as pd
import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from releases.core.errors import InvalidInput
from releases.datasets import budget
from releases.datasets import services as datasets
from releases.engine import dp as D
from releases.models import AuditEvent, BudgetEntry, Dataset, ReleaseFile, ReleaseRequest, Role
from releases.requests import services as sharing
from releases.requests.services import Sharing
from releases.review import services as review
from releases.statistics import checks as statistics_checks
from releases.statistics import run as statistics_run
from releases.statistics import services as statistics
from tests.support import world as world_support
from tests.support.workflow import download

State = ReleaseRequest.State
pytestmark = pytest.mark.django_db

ROWS = 400
BIG_CITIES = ("Harrowgate", "Lindqvist", "Moravel")
#: Towns of a single row: a label only the data holds.
TOWN = "Smallholm"
SECRET = "SEC-"
ROLES = {
    "fullname": Role.IDENTIFIER,
    "city": Role.QUASI_IDENTIFIER,
    "sex": Role.QUASI_IDENTIFIER,
    "age": Role.QUASI_IDENTIFIER,
    "income": Role.SENSITIVE,
    "secret": Role.WITHHELD,
}


def people_csv(rows: int = ROWS, towns: int = 40, seed: int = 11) -> str:
    """``towns`` rows live in a town of their own; the others in one of three big cities."""
    rng = random.Random(seed)
    lines = ["fullname,city,sex,age,income,secret,note"]
    for i in range(rows):
        city = f"{TOWN}{i:03d}" if i < towns else BIG_CITIES[i % 3]
        lines.append(
            f"Quillon Varga{i:03d},{city},{rng.choice('FM')},{rng.randint(18, 90)},"
            f"{rng.randint(0, 90_000)},{SECRET}{rng.randint(10**6, 10**7):d},Nt{i:04d}q"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.read_csv(io.StringIO(people_csv()), dtype=str, keep_default_na=False)


@pytest.fixture(scope="module")
def shared_dataset(django_db_setup, django_db_blocker):
    """``steward`` and their people, uploaded and tagged with ``ROLES`` once for the module;
    "note" keeps no role: neither released nor chosen for statistics."""
    with world_support.dataset_once(django_db_blocker, people_csv(), ROLES, rest=None) as made:
        yield made


@pytest.fixture
def steward(shared_dataset, db) -> User:
    """The module's steward, read afresh."""
    return User.objects.get(pk=shared_dataset["steward"].pk)


@pytest.fixture
def dataset(shared_dataset, steward, officer, private_media_root) -> Dataset:
    """The module's dataset, read afresh, its file copied to the test's media folder, and
    funded by ``officer``."""
    world_support.media_copy(shared_dataset, private_media_root)
    made = Dataset.objects.get(pk=shared_dataset["dataset"].pk)
    budget.set_budget(officer, made, "5", "0.00001")
    return made


def ask(steward, dataset, queries, recipients=()) -> ReleaseRequest:
    return statistics.request_statistics(
        steward, dataset, [dict(q) for q in queries], Sharing(recipients=list(recipients))
    )


def ran(release_request: ReleaseRequest) -> ReleaseRequest:
    statistics_run.run_statistics(release_request.pk)
    release_request.refresh_from_db()
    return release_request


def by(column: str, **grouping) -> dict:
    return {"kind": "histogram", "epsilon": 0.5, "by": [{"column": column, **grouping}]}


FROM_DATA = by("city", source="data") | {"delta": 1e-6}
COUNT = {"kind": "count", "epsilon": 0.5}
MEAN_INCOME = {"kind": "mean", "column": "income", "lower": 0, "upper": 100_000, "epsilon": 0.5}


# --- 1. Columns the steward chose for release ------------------------------------------------


def _uses(column: str) -> list[dict]:
    """Every kind of query reading ``column``."""
    bounded = {"column": column, "lower": 0, "upper": 100, "epsilon": 0.5}
    return [
        by(column, source="data") | {"delta": 1e-6},
        by(column, categories=["a", "b"], source="typed"),
        dict(bounded, kind="sum"),
        dict(bounded, kind="mean"),
        dict(bounded, kind="quantiles", alphas=[0.5]),
    ]


@pytest.mark.parametrize(
    ("column", "words"),
    [("fullname", "a direct identifier"), ("secret", "withheld"), ("note", "no role yet")],
)
def test_every_kind_of_query_on_an_unreleased_column_is_refused_naming_it(
    dataset, steward, column, words
):
    before = budget.remaining(dataset)
    for query in _uses(column):
        with pytest.raises(InvalidInput) as refused:
            ask(steward, dataset, [COUNT, query])
        message = str(refused.value)
        assert f"uses {column}, which is" in message and words in message, message
        assert "Query 2" in message
    assert not ReleaseRequest.objects.exists()
    assert budget.remaining(dataset) == before


def test_the_attack_fails_on_the_page_and_in_the_preview(dataset, steward):
    """The form names the column and its role; nothing is saved."""
    from tests.test_statistics_release import form_data

    client = Client()
    client.force_login(steward)
    url = reverse("releases:statistics_request", args=[dataset.pk])
    data = form_data([by("fullname", source="data") | {"delta": 1e-6}])
    response = client.post(url, {**data, "action": "submit"})
    body = response.content.decode()
    assert response.status_code == 400
    assert "uses fullname, which is a direct identifier" in body
    assert not ReleaseRequest.objects.exists()
    preview = client.post(reverse("releases:statistics_preview", args=[dataset.pk]), data)
    assert "This query (histogram) uses fullname, which is a direct identifier" in (
        preview.content.decode()
    )


def test_a_column_made_an_identifier_after_the_request_fails_the_run_before_spending(
    dataset, steward
):
    release_request = ask(steward, dataset, [COUNT, FROM_DATA])
    city = dataset.columns.get(name="city")
    datasets.set_column_role(steward, dataset, city.pk, Role.IDENTIFIER)
    before = budget.remaining(dataset)
    release_request = ran(release_request)
    assert release_request.state == State.FAILED
    assert "uses city, which is a direct identifier" in release_request.error
    assert "budget was spent" not in release_request.error
    assert budget.remaining(dataset) == before
    assert not BudgetEntry.objects.filter(kind=BudgetEntry.Kind.DP_SPEND).exists()
    assert not ReleaseFile.objects.exists()


def test_a_round_whose_column_lost_its_role_cannot_be_approved(dataset, steward, officer):
    release_request = ran(ask(steward, dataset, [COUNT, MEAN_INCOME]))
    assert release_request.state == State.READY
    assert all(c.passed for c in statistics_checks.checks(release_request))
    income = dataset.columns.get(name="income")
    datasets.set_column_role(steward, dataset, income.pk, Role.WITHHELD)
    failed = {c.name: c for c in statistics_checks.checks(release_request) if not c.passed}
    assert list(failed) == ["columns used"]
    assert "uses income, which is withheld" in failed["columns used"].detail
    with pytest.raises(InvalidInput, match="columns used"):
        review.review(officer, release_request.pk, "approve")


# --- 2. Where labels come from -------------------------------------------------------------------


def test_labels_from_the_data_need_a_delta_and_a_budget_with_delta(dataset, steward, officer):
    with pytest.raises(InvalidInput, match="needs a δ above 0"):
        ask(steward, dataset, [by("city", source="data")])
    with pytest.raises(InvalidInput, match="declare no categories"):
        ask(steward, dataset, [by("city", source="data", categories=["x"]) | {"delta": 1e-6}])
    with pytest.raises(InvalidInput, match="Only a histogram whose labels come from the data"):
        ask(steward, dataset, [COUNT | {"delta": 1e-6}])
    budget.set_budget(officer, dataset, "5", "0")
    with pytest.raises(InvalidInput, match=r"need ε 0\.5 and δ 0\.000001, but only ε 5"):
        ask(steward, dataset, [FROM_DATA])
    assert not ReleaseRequest.objects.exists()


def test_labels_from_a_source_are_those_of_the_source(dataset, steward):
    city = dataset.columns.get(name="city")
    datasets.set_declared_domain(steward, dataset, city.pk, "\n".join(BIG_CITIES))
    asked = ask(steward, dataset, [by("city", source="domain")])
    assert asked.queries[0]["by"][0]["categories"] == list(BIG_CITIES)
    with pytest.raises(InvalidInput, match="is not a label of the declared values of city"):
        ask(steward, dataset, [by("city", source="domain", categories=[f"{TOWN}001"])])
    # Ages from level 1 of the automatic hierarchy: intervals, never an age.
    asked = ask(steward, dataset, [by("age", source="hierarchy", level=1)])
    labels = asked.queries[0]["by"][0]["categories"]
    hierarchy = datasets.current_hierarchy(dataset, dataset.columns.get(name="age"))
    assert labels == list(dict.fromkeys(hierarchy.level(1)))
    assert not set(labels) & set(hierarchy.level(0))
    with pytest.raises(InvalidInput, match="level 0 holds the column's own values"):
        ask(steward, dataset, [by("age", source="hierarchy", level=0, categories=["20"])])
    with pytest.raises(InvalidInput, match="no declared values yet"):
        ask(steward, dataset, [by("sex", source="domain")])


def test_the_review_page_says_where_each_label_comes_from(dataset, steward, officer):
    sex = dataset.columns.get(name="sex")
    datasets.set_declared_domain(steward, dataset, sex.pk, "F\nM\nX")
    queries = [
        by("sex", source="domain"),
        by("age", source="hierarchy", level=2),
        by("income", edges=[0, 50_000, 100_000]),
        by("city", categories=list(BIG_CITIES), source="typed"),
        FROM_DATA,
    ]
    release_request = ran(ask(steward, dataset, queries))
    assert release_request.state == State.READY, release_request.error
    client = Client()
    client.force_login(officer)
    body = client.get(release_request.get_absolute_url()).content.decode()
    for words in (
        "sex: 3 labels from the column&#x27;s declared values",
        "labels from level 2 of the column&#x27;s hierarchy",
        "income: bins with edges 0, 50000, 100000 (typed by the steward)",
        "city: 3 labels typed by the steward",
        "city: labels from the data, released privately (noisy counts above a threshold)",
    ):
        assert words in body, words
    (labels,) = [c for c in statistics_checks.checks(release_request) if c.name == "label sources"]
    assert labels.passed
    assert "query 5, city: labels from the data, released privately" in labels.detail


def test_labels_of_unrecorded_origin_fail_the_review(dataset, steward, officer):
    """A round stored without its labels' source (as before the rules) cannot be approved."""
    release_request = ran(ask(steward, dataset, [by("city", categories=list(BIG_CITIES))]))
    queries = release_request.queries
    del queries[0]["by"][0]["source"]
    ReleaseRequest.objects.filter(pk=release_request.pk).update(queries=queries)
    release_request.refresh_from_db()
    failed = {c.name: c for c in statistics_checks.checks(release_request) if not c.passed}
    assert list(failed) == ["label sources"]
    assert "may have been filled in from the data" in failed["label sources"].detail
    with pytest.raises(InvalidInput, match="label sources"):
        review.review(officer, release_request.pk, "approve")


# --- The private key release ---------------------------------------------------------------------


def test_the_private_key_release_publishes_no_label_held_by_a_single_row(frame):
    """20 runs at δ = 1e-6 over 40 single-row towns: a town would appear with probability at
    most 20 · 40 · 1e-6 = 0.0008 in all. The three cities of about 120 rows each pass the
    threshold every time (missing one would take noise past 100 rows at scale 2)."""
    query = D.queries_from_list([FROM_DATA])
    columns = ["city"]
    compiled = D.compile_release(query, columns)
    (plan,) = compiled.plans
    assert plan.detail["privacy_loss_delta"] <= 1e-6 and compiled.privacy_loss <= 0.5
    true = frame["city"].value_counts()
    assert (true[true.index.str.startswith(TOWN)] == 1).all() and len(true) == 43
    for _ in range(20):
        (result,) = compiled.run(frame[columns]).results
        published = {c["cell"][0] for c in result.value}
        assert published == set(BIG_CITIES), published
        for cell in result.value:  # noisy counts near the true ones, never below the threshold
            assert cell["count"] >= plan.detail["threshold"]
            assert abs(cell["count"] - true[cell["cell"][0]]) <= 10 * result.error


def test_a_private_key_release_spends_its_delta_from_the_ledger(dataset, steward):
    release_request = ran(ask(steward, dataset, [COUNT, FROM_DATA]))
    assert release_request.state == State.READY, release_request.error
    (spend,) = BudgetEntry.objects.filter(kind=BudgetEntry.Kind.DP_SPEND)
    assert spend.epsilon == Decimal("1") and spend.delta == Decimal("0.000001")
    remaining = budget.remaining(dataset)
    assert remaining.epsilon == Decimal("4") and remaining.delta == Decimal("0.000009")
    checked = {c.name: c for c in statistics_checks.checks(release_request)}
    assert checked["privacy budget spent"].passed
    assert "δ 0.000001 spent" in checked["privacy budget spent"].detail


# --- 3. The exact counts behind the cells, for officers only -------------------------------------


def _smallest_expected(frame: pd.DataFrame, categories: list[str]) -> tuple[int, str]:
    """Smallest non-empty cell of a histogram by city over ``categories`` and its other cell."""
    counts = {c: int((frame["city"] == c).sum()) for c in categories}
    counts["(other or missing)"] = int((~frame["city"].isin(categories)).sum())
    occupied = {k: v for k, v in counts.items() if v}
    label = min(occupied, key=occupied.get)
    return occupied[label], label


def test_the_smallest_true_count_is_counted_and_shown_to_officers_only(
    dataset, steward, officer, frame
):
    categories = [BIG_CITIES[0], f"{TOWN}007"]
    release_request = ran(
        ask(steward, dataset, [COUNT, by("city", categories=categories, source="typed")])
    )
    smallest, label = _smallest_expected(frame, categories)
    assert (smallest, label) == (1, f"{TOWN}007")
    counted = release_request.summary["true_counts"]
    assert counted[0]["smallest"] == len(frame)
    assert (counted[1]["smallest"], counted[1]["cell"]) == (smallest, label)
    detail = f"1 row (query 2, cell '{TOWN}007')"
    (check,) = [
        c for c in statistics_checks.checks(release_request) if c.name == "smallest true count"
    ]
    assert check.passed and detail in check.detail

    def shown(user) -> str:
        client = Client()
        client.force_login(user)
        return client.get(release_request.get_absolute_url()).content.decode()

    assert detail.replace("'", "&#x27;") in shown(officer)
    assert "shown to privacy officers only" in shown(steward)
    assert f"cell &#x27;{TOWN}007" not in shown(steward)
    # The report travels: it never holds the figures, whoever asks.
    client = Client()
    client.force_login(officer)
    response = client.get(reverse("releases:download_report", args=[release_request.pk]))
    report = json.loads(b"".join(response.streaming_content))
    (line,) = [c for c in report["checks"] if c["name"] == "smallest true count"]
    assert line["detail"] == "shown to privacy officers only"
    assert "true_counts" not in json.dumps(report)


def test_a_small_cell_released_with_noise_smaller_than_one_row_cannot_be_approved(
    dataset, steward, officer
):
    nearly_exact = by("city", categories=[f"{TOWN}003"], source="typed") | {"epsilon": 60}
    budget.set_budget(officer, dataset, "100", "0.00001")
    release_request = ran(ask(steward, dataset, [nearly_exact]))
    (check,) = [
        c for c in statistics_checks.checks(release_request) if c.name == "smallest true count"
    ]
    assert not check.passed and "hides nothing: lower its ε" in check.detail
    with pytest.raises(InvalidInput, match="smallest true count"):
        review.review(officer, release_request.pk, "approve")


# --- 5. What a recipient can reach ----------------------------------------------------------------


def test_a_recipient_crawling_a_statistics_release_finds_nothing_only_the_data_holds(
    dataset, steward, officer, recipient, frame
):
    release_request = ran(
        ask(
            steward,
            dataset,
            [COUNT, FROM_DATA, MEAN_INCOME, by("sex", categories=["F", "M"], source="typed")],
            [recipient],
        )
    )
    assert release_request.state == State.READY, release_request.error
    review.review(officer, release_request.pk, "approve")
    client = Client()
    client.force_login(recipient)
    pk = release_request.pk
    client.post(reverse("releases:accept_terms", args=[pk]))
    bodies = {}
    for name, url in {
        "page": reverse("releases:request_detail", args=[pk]),
        "report": reverse("releases:report", args=[pk]),
        "report_json": reverse("releases:download_report", args=[pk]),
        "csv": reverse("releases:download_file", args=[pk, "csv"]),
        "json": reverse("releases:download_file", args=[pk, "json"]),
        "activity": reverse("releases:request_activity", args=[pk]),
        "releases": reverse("releases:release_list"),
    }.items():
        htmx = {"HTTP_HX_REQUEST": "true"} if name == "activity" else {}
        response = client.get(url, **htmx)
        assert response.status_code == 200, (name, response.status_code)
        content = response.streaming_content if response.streaming else [response.content]
        bodies[name] = b"".join(content).decode()
    forbidden = (
        set(frame["fullname"])
        | set(frame["secret"])
        | set(frame.loc[frame["city"].str.startswith(TOWN), "city"])
        | set(frame["note"])
    )
    for name, body in bodies.items():
        found = [v for v in forbidden if v in body]
        assert not found, (name, found[:3])
        assert "smallest true count" not in body and "true_counts" not in body, name
    # What it does hold: the three cities, each with a noisy count.
    rows = list(csv.DictReader(io.StringIO(bodies["csv"])))
    assert {r["group"] for r in rows if r["query"] == "2"} == set(BIG_CITIES)
    assert download(recipient, release_request, "csv") == bodies["csv"].encode()


# --- 4. Statistics releases made before the rules: migration 0016 -----------------------------------


def _legacy(dataset, steward, queries, state) -> ReleaseRequest:
    """A statistics request stored as the app stored them before 0015 (no label source)."""
    return ReleaseRequest.objects.create(
        dataset=dataset,
        requested_by=steward,
        kind=ReleaseRequest.Kind.STATISTICS,
        queries=queries,
        config={"kind": "statistics"},
        state=state,
    )


def test_the_recheck_at_upgrade_returns_open_requests_and_lists_approved_ones(
    dataset, steward, officer
):
    recheck = importlib.import_module("releases.migrations.0016_recheck_statistics_releases")
    filled = {"kind": "histogram", "epsilon": 0.5, "by": [{"column": "city", "categories": ["x"]}]}
    by_name = {"kind": "histogram", "epsilon": 0.5, "by": [{"column": "fullname", "edges": [0, 1]}]}
    fine = {"kind": "mean", "column": "income", "lower": 0, "upper": 1, "epsilon": 0.5}
    ready = _legacy(dataset, steward, [fine, filled], State.READY)
    queued = _legacy(dataset, steward, [by_name], State.QUEUED)
    approved = _legacy(dataset, steward, [filled], State.APPROVED)
    untouched = _legacy(dataset, steward, [fine], State.APPROVED)
    rejected = _legacy(dataset, steward, [by_name], State.REJECTED)
    recheck.recheck(apps, None)
    for request in (ready, queued, approved, untouched, rejected):
        request.refresh_from_db()
    assert ready.state == queued.state == State.CHANGES_REQUESTED
    assert "query 2 groups by city with 1 labels whose origin was not recorded" in ready.error
    assert "query 1 uses fullname, which is a direct identifier" in queued.recheck_reason
    assert approved.state == State.APPROVED and "origin was not recorded" in approved.recheck_reason
    assert untouched.recheck_reason == "" and rejected.recheck_reason == ""
    events = AuditEvent.objects.filter(action=AuditEvent.Action.RECHECK).order_by("id")
    assert sorted((e.request_id, e.detail["outcome"]) for e in events) == [
        (ready.pk, "returned to the steward"),
        (queued.pk, "returned to the steward"),
        (approved.pk, "listed for revocation"),
    ]
    # The steward sees why, and resubmits; the officers see the release to revoke, until it is.
    client = Client()
    client.force_login(steward)
    assert "Returned to the steward on" in client.get(ready.get_absolute_url()).content.decode()
    client.force_login(officer)
    queue = client.get(reverse("releases:review_queue")).content.decode()
    assert f'href="/requests/{approved.pk}/"' in queue and 'id="to-revoke"' in queue
    assert (
        f'href="/requests/{untouched.pk}/"'
        not in queue.split('id="to-revoke"')[1].split("</section>")[0]
    )
    sharing.revoke(officer, approved.pk, "Labels filled in from the data.")
    assert 'id="to-revoke"' not in client.get(reverse("releases:review_queue")).content.decode()


def test_declared_values_are_set_by_the_datasets_steward_only(
    dataset, steward, other_steward, officer, recipient
):
    sex = dataset.columns.get(name="sex")
    url = reverse("releases:column_domain", args=[dataset.pk, sex.pk])
    client = Client()
    client.force_login(steward)
    response = client.post(url, {f"domain-{sex.pk}": "F\n M \n\nF\nX"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and 'data-declared="3"' in response.content.decode()
    sex.refresh_from_db()
    assert sex.declared_domain == ["F", "M", "X"]
    (event,) = AuditEvent.objects.filter(
        action=AuditEvent.Action.TAGGING, detail__column="sex", detail__has_key="declared_values"
    )
    assert event.detail["declared_values"] == 3 and event.actor == steward
    # The plain tagging form (no script) saves them too, with everything else it sends.
    response = client.post(
        reverse("releases:tagging", args=[dataset.pk]), {f"domain-{sex.pk}": "F\nM"}
    )
    assert response.status_code == 302
    sex.refresh_from_db()
    assert sex.declared_domain == ["F", "M"]
    response = client.post(url, {f"domain-{sex.pk}": "F\x07"}, HTTP_HX_REQUEST="true")
    assert "holds a control character" in response.content.decode()
    for user, status in ((other_steward, 404), (officer, 403), (recipient, 403)):
        other = Client()
        other.force_login(user)
        assert other.post(url, {f"domain-{sex.pk}": "Z"}).status_code == status
    sex.refresh_from_db()
    assert sex.declared_domain == ["F", "M"]
