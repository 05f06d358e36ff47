"""Every privacy model through the web layer: the steward's form post, the request service and
the worker's run (in this process), with the written extract checked independently: pycanon
(in its own venv) and counts for δ-disclosure and basic β-likeness, counts for enhanced
β-likeness and the risk models, the
population-uniqueness and attacker-risk estimates recomputed here from their formulas. Then the
form's round trip, the review refusing a failed check, the classes table, the candidates, the
data migration and the hierarchy warnings. The steward's people are uploaded and tagged once
for the module (tests/support/world.py): each test requests and runs inside its own
transaction, rolled back, on its own copy of the file."""

from __future__ import annotations

import io
import json
import math
import random
import re
from collections import Counter
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.engine import Hierarchy
from releases.engine.criteria.k_map import derived_k
from releases.models import AuditEvent, Dataset, DatasetColumn, ReleaseRequest, Role
from releases.requests import services as release
from releases.review import report as report_service
from releases.review import services as review
from tests.conftest import csv_upload
from tests.support import factories, pycanon
from tests.support import world as world_support
from tests.support.added_model import register as register_added_model
from tests.support.workflow import run

pytestmark = pytest.mark.django_db
State = ReleaseRequest.State
QIS = ["age", "city", "sex"]
ROWS = 600


def people_csv(n: int = ROWS, seed: int = 3) -> str:
    rng = random.Random(seed)
    lines = ["name,age,city,sex,diagnosis"]
    for i in range(n):
        lines.append(
            f"Person {i},{rng.randint(20, 69)},"
            f"{rng.choice(['Lyon', 'Paris', 'Nice', 'Metz', 'Brest'])},{rng.choice('FM')},"
            f"{rng.choice(['flu', 'cold', 'asthma', 'ulcer'])}"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def shared_people(django_db_setup, django_db_blocker):
    """``steward`` and their people, uploaded and tagged once for the module."""
    tagging = {
        "name": Role.IDENTIFIER,
        **{q: Role.QUASI_IDENTIFIER for q in QIS},
        "diagnosis": Role.SENSITIVE,
    }
    with world_support.dataset_once(django_db_blocker, people_csv(), tagging) as made:
        yield made


@pytest.fixture
def steward(shared_people, db) -> User:
    """The module's steward, read afresh."""
    return User.objects.get(pk=shared_people["steward"].pk)


@pytest.fixture
def people(shared_people, steward, private_media_root) -> Dataset:
    """The module's dataset, read afresh, its file copied to the test's media folder."""
    world_support.media_copy(shared_people, private_media_root)
    return Dataset.objects.get(pk=shared_people["dataset"].pk)


@pytest.fixture
def original() -> pd.DataFrame:
    return pd.read_csv(io.StringIO(people_csv()), dtype=str, keep_default_na=False)


def form(models: dict, suppression_percent="0", algorithm="optimal", **more) -> dict:
    """The request form's fields: each model ticked with its parameters."""
    data = {"suppression_percent": suppression_percent, "algorithm": algorithm, **more}
    for name, params in models.items():
        data[f"use__{name}"] = "on"
        data.update({f"{name}__{key}": value for key, value in params.items()})
    return data


def post_request(client, steward, dataset, data: dict) -> ReleaseRequest:
    """Post the request form as the steward, then run the request as the worker does."""
    client.force_login(steward)
    response = client.post(reverse("releases:request_create", args=[dataset.pk]), data)
    assert response.status_code == 302, response.content.decode()[-3000:]
    done = run(ReleaseRequest.objects.get(pk=int(response["Location"].rstrip("/").split("/")[-1])))
    assert done.state == State.READY, done.error
    return done


def extract_of(release_request: ReleaseRequest) -> pd.DataFrame:
    raw = storage.read_bytes(release_request.extract_path)
    return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)


def achieved(release_request: ReleaseRequest, model: str) -> dict:
    return next(m for m in release_request.summary["models"] if m["model"] == model)["achieved"]


def check_named(release_request: ReleaseRequest, name: str):
    return next(c for c in review.checks(release_request) if c.name == name)


# ----------------------------------------------------------------------- each model, independently


def class_shares(extract: pd.DataFrame) -> pd.DataFrame:
    """Each (class, diagnosis): its share in the class ("proportion") and in the table ("p")."""
    within = extract.groupby(QIS)["diagnosis"].value_counts(normalize=True).reset_index()
    table = extract["diagnosis"].value_counts(normalize=True)
    return within.assign(p=within["diagnosis"].map(table))


@pytest.mark.pycanon
def test_delta_disclosure_release_checked_with_pycanon(client, steward, people, original):
    done = post_request(
        client,
        steward,
        people,
        form({"k-anonymity": {"k": "2"}, "delta-disclosure": {"delta": "0.8"}}),
    )
    extract = extract_of(done)
    assert done.summary["suppressed"] == 0 and len(extract) == ROWS
    ours = achieved(done, "delta-disclosure")["delta"]["diagnosis"]
    # pycanon's δ uses the natural log (ours, as ARX, log2); without suppression both measure
    # against the same table, so pycanon's value is ours times ln 2.
    measured = pycanon.measure(
        storage.read_bytes(done.extract_path), QIS, ["diagnosis"], ("delta", "k")
    )
    theirs = measured["delta"]
    assert theirs == pytest.approx(ours * math.log(2))
    assert theirs < 0.8 * math.log(2)
    assert measured["k"] >= 2
    # Counted: the largest |log2(share in a class / share in the table)|, and class sizes.
    shares = class_shares(extract)
    delta = np.log2(shares["proportion"] / shares["p"]).abs().max()
    assert delta == pytest.approx(ours) and delta < 0.8
    assert extract.groupby(QIS).size().min() >= 2
    line = check_named(done, "δ-disclosure privacy of diagnosis")
    assert line.passed and "δ requested 0.8" in line.detail
    assert done.model_description == "k=2, 0.8-disclosure privacy, at most 0% of rows suppressed"
    # The dataset's list of requests names the models.
    page = client.get(reverse("releases:dataset_detail", args=[people.pk])).content.decode()
    assert "<td>k=2 and 0.8-disclosure privacy</td>" in page


@pytest.mark.pycanon
def test_basic_beta_likeness_release_checked_with_pycanon(client, steward, people):
    done = post_request(client, steward, people, form({"beta-likeness": {"beta": "0.6"}}))
    extract = extract_of(done)
    assert done.summary["suppressed"] == 0
    ours = achieved(done, "beta-likeness")["beta"]["diagnosis"]
    written = storage.read_bytes(done.extract_path)
    theirs = pycanon.measure(written, QIS, ["diagnosis"], ("basic_beta",))["basic_beta"]
    assert theirs == pytest.approx(ours)
    assert ours <= 0.6
    # Counted: the largest gain (share in a class - share in the table) / share in the table.
    shares = class_shares(extract)
    assert ((shares["proportion"] - shares["p"]) / shares["p"]).max() == pytest.approx(ours)
    assert check_named(done, "basic β-likeness of diagnosis").passed


@pytest.mark.pycanon
def test_enhanced_beta_likeness_release_counted(client, steward, people, original):
    done = post_request(
        client,
        steward,
        people,
        form({"beta-likeness": {"beta": "0.6", "variant": "enhanced"}}, suppression_percent="5"),
    )
    extract = extract_of(done)
    # Every value of every released class: gain over its share p in the input at most
    # min(β, -ln p) (ARX's enhanced β-likeness; pycanon's enhanced value is a weaker bound).
    p = original["diagnosis"].value_counts(normalize=True)
    shares = extract.groupby(QIS)["diagnosis"].value_counts(normalize=True).reset_index()
    base = shares["diagnosis"].map(p)
    gain = (shares["proportion"] - base) / base
    assert (gain <= np.minimum(0.6, -np.log(base)) + 1e-12).all()
    written = storage.read_bytes(done.extract_path)
    assert pycanon.measure(written, QIS, ["diagnosis"], ("enhanced_beta",))["enhanced_beta"] <= 0.6
    assert achieved(done, "beta-likeness")["beta"]["diagnosis"] == pytest.approx(gain.max())
    assert check_named(done, "enhanced β-likeness of diagnosis").passed


def test_highest_risk_release_counted(client, steward, people):
    done = post_request(
        client, steward, people, form({"highest-risk": {"risk": "0.2"}}, suppression_percent="5")
    )
    sizes = extract_of(done).groupby(QIS).size()
    assert 1 / sizes.min() <= 0.2
    risk = done.summary["risk_after"]
    assert risk["highest"] == pytest.approx(1 / sizes.min())
    # Without a population model the release stands for the population (as ARX does).
    assert risk["journalist"]["highest"] == pytest.approx(risk["highest"])
    assert risk["marketer"]["average"] == pytest.approx(len(sizes) / sizes.sum())
    assert check_named(done, "highest re-identification risk").passed
    client.force_login(steward)
    page = client.get(done.get_absolute_url()).content.decode()
    assert 'data-risk="journalist-highest"' in page and 'data-risk="marketer"' in page
    assert "Without a population model the release is taken as the population" in page


def test_average_risk_release_counted(client, steward, people):
    done = post_request(
        client,
        steward,
        people,
        form({"average-risk": {"risk": "0.05"}}, suppression_percent="10"),
    )
    sizes = extract_of(done).groupby(QIS).size()
    assert len(sizes) / sizes.sum() <= 0.05
    assert done.summary["risk_after"]["average"] == pytest.approx(len(sizes) / sizes.sum())
    assert done.summary["suppressed"] == ROWS - sizes.sum() <= 0.1 * ROWS
    assert check_named(done, "average re-identification risk").passed


# The estimators again, from their definitions (Zayatz 1991 as ARX computes it; Benedetti and
# Franconi's E[1/F | f] as a plain series), on the class sizes counted in the extract.


def zayatz_share(sizes, big_n: int) -> float:
    hist = sorted(Counter(int(s) for s in sizes).items())
    n = sum(k * c for k, c in hist)
    c1 = dict(hist).get(1, 0)
    if c1 == 0:
        return 0.0

    def log_comb(a, b):
        return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)

    def p_one(k):  # exactly one of k population records drawn in a sample of n of N
        return k * math.exp(log_comb(big_n - k, n - 1) - log_comb(big_n, n))

    conditional = c1 * p_one(1) / sum(c * p_one(k) for k, c in hist)
    return c1 * conditional / (n / big_n) / big_n


def expected_inverse(f: int, fraction: float, terms: int = 3000) -> float:
    total = 0.0
    for h in range(f, f + terms):
        log_term = (
            math.lgamma(h)
            - math.lgamma(f)
            - math.lgamma(h - f + 1)
            + f * math.log(fraction)
            + (h - f) * math.log1p(-fraction)
        )
        total += math.exp(log_term) / h
    return total


def test_population_uniqueness_release_against_the_recomputed_estimate(
    client, steward, people, original
):
    done = post_request(
        client,
        steward,
        people,
        form(
            {"population-uniqueness": {"risk": "0.00001", "estimator": "zayatz"}},
            suppression_percent="10",
            sampling_fraction="0.1",
        ),
    )
    big_n = round(ROWS / 0.1)
    before = original.groupby(QIS).size()
    after = extract_of(done).groupby(QIS).size()
    expected_before, expected_after = zayatz_share(before, big_n), zayatz_share(after, big_n)
    assert expected_before > 0.00001  # the model had something to do
    assert expected_after <= 0.00001
    risk_before, risk_after = done.summary["risk_before"], done.summary["risk_after"]
    assert risk_before["population"]["zayatz"] == pytest.approx(expected_before, rel=1e-6)
    assert risk_after["population"]["zayatz"] == pytest.approx(expected_after, rel=1e-6, abs=1e-15)
    assert achieved(done, "population-uniqueness")["population_uniques"] == pytest.approx(
        expected_after, rel=1e-6, abs=1e-15
    )
    assert risk_after["population"]["population_size"] == big_n
    # Journalist and marketer risk of the release against that population.
    fraction = after.sum() / big_n
    inverse = {f: expected_inverse(int(f), fraction) for f in set(after)}
    marketer = sum(f * inverse[f] for f in after) / after.sum()
    assert risk_after["marketer"]["average"] == pytest.approx(marketer, rel=1e-6)
    assert risk_after["journalist"]["highest"] == pytest.approx(max(inverse.values()), rel=1e-6)
    assert check_named(done, "population uniqueness").passed
    # The officer's risk panel shows every estimator, Dankar's choice, before and after.
    client.force_login(steward)
    page = client.get(done.get_absolute_url()).content.decode()
    panel = page[page.index('id="population-uniqueness"') :]
    for estimator in ("pitman", "zayatz", "snb", "dankar"):
        assert f'data-estimator="{estimator}"' in panel
    assert "measured against a population of 6,000" in page
    # The report carries them too (JSON, as an officer downloads it).
    body = json.loads(
        b"".join(client.get(reverse("releases:download_report", args=[done.pk])).streaming_content)
    )
    assert body["risk"]["before"]["population"]["zayatz"] == pytest.approx(expected_before)
    assert body["risk"]["after"]["marketer"]["average"] == pytest.approx(marketer, rel=1e-6)
    assert body["privacy"]["models"][0]["checks"][0]["name"] == "population uniqueness"


def test_mondrian_and_population_uniqueness_are_refused_on_the_form(client, steward, people):
    client.force_login(steward)
    data = form(
        {"population-uniqueness": {"risk": "0.01"}},
        algorithm="mondrian",
        sampling_fraction="0.1",
    )
    response = client.post(reverse("releases:request_create", args=[people.pk]), data)
    assert response.status_code == 400
    assert "cannot be enforced by Mondrian" in response.content.decode()
    assert not ReleaseRequest.objects.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "Choose at least one privacy model."),
        ({"use__delta-disclosure": "on"}, "δ-disclosure privacy needs δ."),
        (form({"beta-likeness": {"beta": "-1"}}), "β must be above 0, not -1.0."),
        (form({"k-anonymity": {"k": "2.5"}}), "k must be a whole number of at least 1, not 2.5."),
        (
            form({"population-uniqueness": {"risk": "0.01"}}),
            "Population uniqueness needs the population size or the sampling fraction.",
        ),
        (
            form({"k-anonymity": {"k": "2"}}, sampling_fraction="0.1", population_size="9000"),
            "Give either the population size or the sampling fraction.",
        ),
        (form({"k-anonymity": {"k": "1"}}), "holds even when every record is alone"),
        (
            form({"k-anonymity": {"k": "2"}}, population_size="9000.5"),
            "population size must be a whole number of at least 1, not 9000.5.",
        ),
    ],
)
def test_the_form_shows_the_engines_sentence_and_saves_nothing(
    client, steward, people, data, message
):
    client.force_login(steward)
    response = client.post(
        reverse("releases:request_create", args=[people.pk]),
        {"suppression_percent": "5", **data},
    )
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not ReleaseRequest.objects.exists()


def test_a_new_request_form_asks_for_k_5_with_5_percent_by_default(client, steward, people):
    client.force_login(steward)
    page = client.get(reverse("releases:dataset_detail", args=[people.pk])).content.decode()
    fields = FormFields.of(page, "request-form")
    assert fields["use__k-anonymity"] == "on" and fields["k-anonymity__k"] == "5"
    assert fields["suppression_percent"] == "5"
    assert "use__delta-disclosure" not in fields  # not ticked
    # One group per model the engine defines, each with its parameters.
    for name in (
        "k-anonymity",
        "l-diversity",
        "t-closeness",
        "delta-disclosure",
        "beta-likeness",
        "highest-risk",
        "average-risk",
        "population-uniqueness",
    ):
        assert f'data-model="{name}"' in page


def test_a_model_added_to_the_registry_reaches_the_form_the_run_the_classes_and_the_review(
    client, steward, officer, people, monkeypatch
):
    """α-deassociation (tests/support/added_model.py) is added to the registry and nothing
    else: the form offers it, the run enforces it, the classes table and the review show it."""
    register_added_model(monkeypatch)
    client.force_login(steward)
    page = client.get(reverse("releases:dataset_detail", args=[people.pk])).content.decode()
    assert 'data-model="alpha-deassociation"' in page
    assert 'name="alpha-deassociation__alpha"' in page
    assert "β-likeness and α-deassociation also protect the sensitive columns" in page

    done = post_request(
        client,
        steward,
        people,
        form({"k-anonymity": {"k": "2"}, "alpha-deassociation": {"alpha": "0.5"}}),
    )
    assert done.parameters["model"]["criteria"][1] == {"model": "alpha-deassociation", "alpha": 0.5}
    extract = extract_of(done)
    largest = extract.groupby(QIS)["diagnosis"].value_counts(normalize=True).groupby(QIS).max()
    assert largest.max() <= 0.5 and extract.groupby(QIS).size().min() >= 2
    stored = {tuple(c.values[q] for q in QIS): c for c in done.classes.all()}
    assert len(stored) == len(largest)
    for key, share in largest.items():
        assert stored[key].sensitive["diagnosis"]["alpha"] == pytest.approx(share)
    table = client.get(
        reverse("releases:request_classes", args=[done.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'data-measure="diagnosis:alpha"' in table and "largest value share (diagnosis)" in table

    line = check_named(done, "α-deassociation of diagnosis")
    assert line.passed and f"largest value share {largest.max():.4f}" in line.detail
    items = report_service.build(done, report_service.REVIEWER)["compliance"]
    sensitive = next(i for i in items if i["key"] == "sensitive")
    assert sensitive["reason"] == "0.5-deassociation on diagnosis: met by every class."
    review.review(officer, done.pk, "approve")
    done.refresh_from_db()
    assert done.state == State.APPROVED

    # Without a model on the sensitive column, the report names every one that would cover it.
    only_k = post_request(client, steward, people, form({"k-anonymity": {"k": "2"}}))
    items = report_service.build(only_k, report_service.REVIEWER)["compliance"]
    assert next(i for i in items if i["key"] == "sensitive")["reason"] == (
        "Sensitive columns diagnosis are released without l-diversity, t-closeness, "
        "δ-disclosure privacy, β-likeness or α-deassociation."
    )


# ----------------------------------------------------------------------- the form's round trip


class FormFields(HTMLParser):
    """The fields a browser would post from the form with ``id``: text and number inputs, the
    ticked checkboxes, the selected options, the text areas."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id, self.inside, self.fields = form_id, False, {}
        self.select = self.textarea = None

    @classmethod
    def of(cls, html: str, form_id: str) -> dict:
        parser = cls(form_id)
        parser.feed(html)
        return parser.fields

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("id") == self.form_id:
            self.inside = True
        if not self.inside or "name" not in a and tag != "option":
            return
        if tag == "input":
            if a.get("type") == "checkbox":
                if "checked" in a:
                    self.fields[a["name"]] = a.get("value", "on")
            elif a.get("type") != "submit":
                self.fields[a["name"]] = a.get("value", "")
        elif tag == "select":
            self.select = a["name"]
        elif tag == "option" and self.select:
            if "selected" in a or self.select not in self.fields:
                self.fields[self.select] = a.get("value", "")
        elif tag == "textarea":
            self.textarea = a["name"]
            self.fields[a["name"]] = ""

    def handle_data(self, data):
        if self.textarea:
            self.fields[self.textarea] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self.select = None
        elif tag == "textarea":
            self.textarea = None


def test_the_resubmit_form_is_refilled_with_every_model_and_posts_it_back(client, steward, people):
    every_model = form(
        {
            "k-anonymity": {"k": "3"},
            "l-diversity": {"l": "2", "variant": "recursive", "c": "2.5"},
            "t-closeness": {"t": "0.35", "distance": "ordered"},
            "delta-disclosure": {"delta": "1.5"},
            "beta-likeness": {"beta": "1.25", "variant": "enhanced"},
            "highest-risk": {"risk": "0.5"},
            "average-risk": {"risk": "0.3"},
            "population-uniqueness": {"risk": "0.2", "estimator": "pitman"},
        },
        suppression_percent="7.5",
        sampling_fraction="0.05",
    )
    client.force_login(steward)
    response = client.post(reverse("releases:request_create", args=[people.pk]), every_model)
    assert response.status_code == 302
    first = ReleaseRequest.objects.get()
    stored = first.parameters
    assert [c["model"] for c in stored["model"]["criteria"]] == [
        "k-anonymity",
        "l-diversity",
        "t-closeness",
        "delta-disclosure",
        "beta-likeness",
        "highest-risk",
        "average-risk",
        "population-uniqueness",
    ]
    assert stored["model"]["criteria"][1] == {
        "model": "l-diversity",
        "l": 2.0,
        "variant": "recursive",
        "c": 2.5,
    }
    assert stored["model"]["suppression_limit"] == 0.075
    assert stored["model"]["population"] == {"sampling_fraction": 0.05}
    # Changes requested: the page's resubmit form holds the same model; posted back as it
    # is (with an answer), the next round asks for exactly the same.
    ReleaseRequest.objects.filter(pk=first.pk).update(state=State.CHANGES_REQUESTED)
    page = client.get(first.get_absolute_url()).content.decode()
    fields = FormFields.of(page, "resubmit-form")
    assert fields["l-diversity__variant"] == "recursive" and fields["delta-disclosure__delta"]
    fields["response"] = "Same model, once more."
    response = client.post(reverse("releases:request_resubmit", args=[first.pk]), fields)
    assert response.status_code == 302, response.content.decode()[-2000:]
    again = ReleaseRequest.objects.get()
    assert again.round == 2 and again.parameters == stored
    # Unticking a model drops it, whatever its fields still hold.
    ReleaseRequest.objects.filter(pk=first.pk).update(state=State.CHANGES_REQUESTED)
    del fields["use__t-closeness"]
    client.post(reverse("releases:request_resubmit", args=[first.pk]), fields)
    again.refresh_from_db()
    assert "t-closeness" not in [c["model"] for c in again.parameters["model"]["criteria"]]


# ----------------------------------------------------------------------- review and classes table

COMBINED = form(
    {
        "delta-disclosure": {"delta": "1"},
        "beta-likeness": {"beta": "1"},
        "highest-risk": {"risk": "0.2"},
        "average-risk": {"risk": "0.05"},
        "population-uniqueness": {"risk": "0.00001", "estimator": "zayatz"},
    },
    suppression_percent="10",
    sampling_fraction="0.1",
)

#: How each model's stored figures are broken, and the check line that must then fail.
BROKEN = {
    "delta-disclosure": ({"delta": {"diagnosis": 1.0}}, "δ-disclosure privacy of diagnosis"),
    "beta-likeness": (
        {"beta": {"diagnosis": 1.5}, "share_of_allowed_gain": {"diagnosis": 1.5}},
        "basic β-likeness of diagnosis",
    ),
    "highest-risk": ({"highest_risk": 0.25, "smallest_class": 4}, "highest re-identification risk"),
    "average-risk": ({"average_risk": 0.06}, "average re-identification risk"),
    "population-uniqueness": (
        {"population_uniques": 0.001, "sample_uniques": 0.01, "population_size": 6000},
        "population uniqueness",
    ),
}


def test_a_failed_models_check_refuses_approval(client, steward, officer, people):
    done = post_request(client, steward, people, COMBINED)
    assert all(c.passed for c in review.checks(done)), review.checks(done)
    summary = done.summary
    for model, (figures, line) in BROKEN.items():
        broken = json.loads(json.dumps(summary))
        next(m for m in broken["models"] if m["model"] == model)["achieved"] = figures
        ReleaseRequest.objects.filter(pk=done.pk).update(summary=broken)
        done.refresh_from_db()
        assert [c.name for c in review.checks(done) if not c.passed] == [line], model
        with pytest.raises(InvalidInput, match=re.escape(line)):
            review.review(officer, done.pk, "approve")
    # A result computed for another model than the one requested fails too.
    other = json.loads(json.dumps(summary))
    other["privacy_model"]["suppression_limit"] = 0.5
    ReleaseRequest.objects.filter(pk=done.pk).update(summary=other)
    done.refresh_from_db()
    assert [c.name for c in review.checks(done) if not c.passed] == ["privacy model as requested"]
    ReleaseRequest.objects.filter(pk=done.pk).update(summary=summary)
    review.review(officer, done.pk, "approve")
    done.refresh_from_db()
    assert done.state == State.APPROVED


def test_the_classes_table_shows_each_models_measures_and_flags(client, steward, people, original):
    done = post_request(client, steward, people, COMBINED)
    extract = extract_of(done)
    # Per class, δ and the largest relative gain counted on the extract (shares of the input).
    p = original["diagnosis"].value_counts(normalize=True)
    shares = extract.groupby(QIS)["diagnosis"].value_counts(normalize=True).reset_index()
    shares["delta"] = np.abs(np.log2(shares["proportion"] / shares["diagnosis"].map(p)))
    shares["gain"] = (shares["proportion"] - shares["diagnosis"].map(p)) / shares["diagnosis"].map(
        p
    )
    per_class = shares.groupby(QIS).agg(delta=("delta", "max"), gain=("gain", "max"))
    per_class["size"] = extract.groupby(QIS).size()
    stored = {tuple(c.values[q] for q in QIS): c for c in done.classes.all()}
    assert len(stored) == len(per_class)
    for key, row in per_class.iterrows():
        measures = stored[key].sensitive["diagnosis"]
        assert measures["delta"] == pytest.approx(row["delta"])
        assert measures["beta"] == pytest.approx(row["gain"])
        near = {
            "delta-disclosure": row["delta"] >= 0.9 * 1.0,
            "beta-likeness": row["gain"] >= 0.9 * 1.0,
            "highest-risk": row["size"] == 5,
        }
        assert set(stored[key].borderline) == {m for m, flag in near.items() if flag}
    client.force_login(steward)
    table = client.get(
        reverse("releases:request_classes", args=[done.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'data-measure="diagnosis:delta"' in table and "δ (diagnosis)" in table
    assert 'data-measure="diagnosis:beta"' in table and "largest relative gain (diagnosis)" in table
    largest = max(stored.values(), key=lambda c: c.sensitive["diagnosis"]["delta"])
    assert f"{largest.sensitive['diagnosis']['delta']:.3f}".rstrip("0") in table
    detail = client.get(
        reverse("releases:class_detail", args=[done.pk, largest.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'data-measure="delta"' in detail and "δ (diagnosis) =" in detail


# ----------------------------------------------------------------------- candidates


@pytest.mark.pycanon
def test_the_steward_reruns_with_a_candidate_and_the_officer_sees_it_beside_the_optimum(
    client, steward, officer, people, original
):
    first = post_request(client, steward, people, form({"k-anonymity": {"k": "5"}}))
    optimum = first.summary["optimum"]
    candidate = next(c for c in first.summary["candidates"] if not c["optimum"])
    assert first.summary["levels"] == optimum["levels"]
    levels = ",".join(f"{q}={v}" for q, v in candidate["levels"].items())
    # Only the requester's button, on the page; a level set that is no candidate is refused.
    page = client.get(first.get_absolute_url()).content.decode()
    assert f'value="{levels}"' in page and 'data-action="rerun"' in page
    with pytest.raises(InvalidInput, match="one of the candidates"):
        release.rerun_with_levels(steward, first.pk, {"age": 0, "city": 0, "sex": 1})
    response = client.post(reverse("releases:request_rerun", args=[first.pk]), {"levels": levels})
    assert response.status_code == 302
    queued = ReleaseRequest.objects.get()
    assert (queued.state, queued.round, queued.fixed_levels) == (
        State.QUEUED,
        2,
        candidate["levels"],
    )
    assert queued.parameters["model"] == first.parameters["model"]
    done = run(queued)
    summary = done.summary
    assert summary["levels"] == candidate["levels"] and summary["levels_fixed"]
    assert summary["optimum"]["levels"] == optimum["levels"]
    assert summary["metrics"]["loss"] == pytest.approx(candidate["loss"])
    assert summary["suppressed"] == candidate["suppressed"]
    # The extract is generalized to the candidate's levels, and still 5-anonymous.
    extract = extract_of(done)
    assert pycanon.measure(storage.read_bytes(done.extract_path), QIS)["k"] >= 5
    assert extract.groupby(QIS).size().min() >= 5
    for q in QIS:
        hierarchy = Hierarchy.automatic(original[q].unique(), attribute=q)
        expected = {hierarchy.generalize(v, candidate["levels"][q]) for v in original[q]}
        assert set(extract[q]) == expected
    # The officer sees which was chosen and how it compares with the optimum.
    client.force_login(officer)
    page = client.get(done.get_absolute_url()).content.decode()
    comparison = page[page.index('id="chosen-vs-optimum"') :]
    comparison = comparison[: comparison.index("</table>")]
    assert f"{candidate['loss']:.4f}" in comparison and f"{optimum['loss']:.4f}" in comparison
    assert 'data-action="rerun"' not in page  # not the officer's to do
    assert "levels fixed at " + levels.replace(",", ", ") in page
    report = json.loads(
        b"".join(client.get(reverse("releases:download_report", args=[done.pk])).streaming_content)
    )
    assert report["privacy"]["candidate"]["chosen"]["levels"] == candidate["levels"]
    assert report["privacy"]["candidate"]["optimum"]["levels"] == optimum["levels"]
    assert report["reproduction"]["parameters"]["levels"] == candidate["levels"]
    assert report["privacy"]["candidates"] == summary["candidates"]
    # A recipient's report says levels were fixed, not the losses measured on the original.
    for_recipients = report_service.build(done, report_service.RECIPIENT)
    assert (
        for_recipients["privacy"]["levels_fixed"] and "candidate" not in for_recipients["privacy"]
    )
    # The round before is kept, with its optimum; going back to the optimum searches again.
    assert done.rounds.get().parameters["levels"] is None
    release.rerun_with_levels(steward, done.pk, optimum["levels"])
    done.refresh_from_db()
    assert done.fixed_levels is None and done.round == 3


# ----------------------------------------------------------------------- hierarchy warnings


def test_a_hierarchy_with_a_repeated_identical_row_is_accepted_with_a_warning(
    client, steward, tmp_path
):
    from tests.conftest import ADULT

    fars = ADULT.parent / "fars" / "fars_hierarchy_iage.csv"
    rng = random.Random(2)
    content = "iage,sex\n" + "".join(
        f"{rng.randint(0, 99)},{rng.choice('FM')}\n" for _ in range(80)
    )
    dataset = factories.make_dataset(steward, content, "fars.csv")
    iage = dataset.columns.get(name="iage")
    client.force_login(steward)
    url = reverse("releases:column_update", args=[dataset.pk, iage.pk])
    response = client.post(
        url,
        {
            f"role-{iage.pk}": Role.QUASI_IDENTIFIER,
            f"hierarchy-{iage.pk}": csv_upload(fars.read_bytes(), "iage.csv"),
        },
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert response.status_code == 200 and 'role="alert"' not in body
    assert "value &#x27;99&#x27; is listed twice with the same generalizations" in body
    iage.refresh_from_db()
    assert iage.hierarchy_source == DatasetColumn.HierarchySource.UPLOADED
    assert iage.hierarchy_height == 4
    event = AuditEvent.objects.filter(action=AuditEvent.Action.TAGGING).last()
    assert "listed twice" in event.detail["warnings"][0]
    # A value given two different rows is refused, naming them; the accepted file stays.
    conflicting = fars.read_text().replace("99;95-99;90-99;*\n", "99;95-99;80-99;*\n", 1)
    response = client.post(
        url, {f"hierarchy-{iage.pk}": csv_upload(conflicting, "iage.csv")}, HTTP_HX_REQUEST="true"
    )
    assert "appears twice with different generalizations (rows 100 and 101)" in (
        response.content.decode().replace("&#x27;", "'")
    )
    iage.refresh_from_db()
    assert iage.hierarchy_filename == "iage.csv" and "80-99" not in iage.hierarchy_text
    # Without htmx the warning comes back as a message on the dataset page.
    response = client.post(
        url, {f"hierarchy-{iage.pk}": csv_upload(fars.read_bytes(), "iage.csv")}, follow=True
    )
    assert "listed twice with the same generalizations" in response.content.decode().replace(
        "&#x27;", "'"
    )


# ----------------------------------------------------------------------- the data migration


# Migrates the test database back to 0010 and forward again.
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_migration_converts_old_style_requests_and_back():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("releases", "0010_columns_without_an_explicit_role")]
    executor = MigrationExecutor(connection)
    # Forward to the newest migration, so the current model matches the table it reads.
    after = executor.loader.graph.leaf_nodes("releases")
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    user = old.get_model("auth", "User").objects.create(username="old-steward")
    dataset = old.get_model("releases", "Dataset").objects.create(
        owner=user,
        name="old.csv",
        original_filename="old.csv",
        file_path="datasets/old.csv",
        sha256="0" * 64,
        size_bytes=10,
    )
    Request = old.get_model("releases", "ReleaseRequest")
    req = Request.objects.create(
        dataset=dataset,
        requested_by=user,
        k=5,
        suppression_limit=0.05,
        l_diversity=3,
        l_variant="recursive",
        c=2.0,
        t_closeness=0.2,
        t_distance="ordered",
        algorithm="mondrian",
        config={},
        state="ready",
        summary={
            "rows_in": 100,
            "suppressed": 2,
            "achieved": {"k": 6, "l": {"diagnosis": 3.0}, "t": {"diagnosis": 0.15}},
        },
    )
    old.get_model("releases", "ReleaseRound").objects.create(
        request=req,
        number=1,
        parameters={"k": 2, "suppression_limit": 0.0, "algorithm": "optimal", "config": {}},
        outcome="changes",
        submitted_at=req.created_at,
    )
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    converted = ReleaseRequest.objects.get(pk=req.pk)
    assert converted.parameters == {
        "model": {
            "criteria": [
                {"model": "k-anonymity", "k": 5},
                {"model": "l-diversity", "l": 3.0, "variant": "recursive", "c": 2.0},
                {"model": "t-closeness", "t": 0.2, "distance": "ordered"},
            ],
            "suppression_limit": 0.05,
            "population": None,
        },
        "algorithm": "mondrian",
        "levels": None,
    }
    assert converted.model_description == (
        "k=5, recursive (2,3)-diversity, 0.2-closeness (ordered distance), at most 5% of rows "
        "suppressed"
    )
    # The old result is checked model by model, like a new one.
    assert [(c.name, c.passed) for c in review.checks(converted)][:5] == [
        ("privacy model as requested", True),
        ("k-anonymity", True),
        ("recursive (c,l)-diversity of diagnosis", True),
        ("t-closeness of diagnosis", True),
        ("suppression limit", True),
    ]
    round_parameters = converted.rounds.get().parameters
    assert round_parameters["model"]["criteria"] == [{"model": "k-anonymity", "k": 2}]
    assert "k" not in round_parameters and round_parameters["config"] == {}
    # Back again: the columns hold the model as it was.
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    back = old.get_model("releases", "ReleaseRequest").objects.get(pk=req.pk)
    assert (back.k, back.l_diversity, back.l_variant, back.c) == (5, 3.0, "recursive", 2.0)
    assert (back.t_closeness, back.t_distance, back.algorithm) == (0.2, "ordered", "mondrian")
    assert back.suppression_limit == 0.05
    old_round = old.get_model("releases", "ReleaseRound").objects.get(request_id=req.pk)
    assert old_round.parameters["k"] == 2 and "model" not in old_round.parameters
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


# ------------------------------------------------- models that need a population (k-map, δ-presence)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            form({"delta-presence": {"dmin": "0", "dmax": "0.5"}}),
            "δ-presence needs a research subset: the population table with the released rows "
            "marked. A request made here cannot attach one yet",
        ),
        (
            form({"k-map": {"k": "20"}}),
            "A k-map request made here needs the population size or the sampling fraction",
        ),
    ],
)
def test_a_model_that_needs_a_research_subset_is_refused_on_the_form_with_the_reason(
    client, steward, people, data, message
):
    client.force_login(steward)
    response = client.post(reverse("releases:request_create", args=[people.pk]), data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not ReleaseRequest.objects.exists()


def test_k_map_estimated_from_the_population_size_releases_classes_of_the_derived_size(
    client, steward, people, original
):
    done = post_request(
        client,
        steward,
        people,
        form({"k-map": {"k": "50", "significance": "0.01"}}, population_size="60000"),
    )
    smallest, _error = derived_k(50, 0.01, ROWS, 60000, "poisson")
    assert smallest > 1  # the estimate asks more than k-anonymity with k=1
    extract = extract_of(done)
    sizes = extract.groupby(QIS).size()
    assert sizes.min() >= smallest
    # Every released row is one of the people's rows, with its quasi-identifiers generalized.
    assert len(extract) + done.summary["suppressed"] == len(original)
