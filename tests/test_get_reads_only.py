"""A GET changes nothing: every address of ``releases/urls.py``, asked for by each role, with and
without htmx, leaves every table as it was. A page polling a request or a dataset only reads
(the sweeper resolves lost work), and so does the dataset's risk panel (a worker is asked when
the roles change). Downloads are the one exception, by design: each download, and each refused
one, is logged in the audit log, and nothing else changes.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import transaction
from django.test import Client, override_settings
from django.urls import URLPattern, reverse
from django.utils import timezone

from releases import urls as release_urls
from releases.core import roles
from releases.datasets import budget, risk
from releases.models import AuditEvent, Dataset, EquivalenceClass, OutboxMessage, ReleaseRequest
from releases.requests import recipes
from releases.requests import services as sharing
from releases.statistics import run as statistics_run
from releases.statistics import services as statistics
from tests.conftest import READY_ROLES, make_user
from tests.support import factories, workflow
from tests.support.workflow import approve, request_release, run

pytestmark = pytest.mark.django_db

#: The addresses whose GET logs a download (or its refusal) in the audit log.
DOWNLOADS = {"download", "download_file", "download_report"}


def snapshot() -> dict[str, tuple[int, str]]:
    """Per model, its number of rows and a hash of every row."""
    out = {}
    for model in apps.get_models():
        rows = list(model.objects.order_by("pk").values_list())
        out[model._meta.label] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
    return out


LONG_AGO = timezone.now() - timedelta(hours=1)


@pytest.fixture(scope="module")
def made(django_db_setup, django_db_blocker, tmp_path_factory):
    """The module's world, made once inside a transaction of the module's own: every test runs in
    a savepoint of it (rolled back) and the whole is rolled back at the end, as if each test had
    made it in its own transaction. Its people stand in for the fixtures of the same names."""
    media = tmp_path_factory.mktemp("get-reads-only-media")
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
    try:
        with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=media):
            yield build_world(media)
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def build_world(media) -> dict:
    """A dataset with a request ready for review, an approved extract naming ``recipient``
    (who accepted its terms) and an approved statistics release naming them too; and what a
    page once resolved as it read it: a run and a profiling whose workers died, a queued
    request whose message went out long ago, a dataset too large to measure in a page."""
    steward = make_user("steward", roles.STEWARDS)
    steward.email = "steward@example.org"
    steward.save(update_fields=["email"])
    people = {
        "steward": steward,
        "other_steward": make_user("steward2", roles.STEWARDS),
        "officer": make_user("officer", roles.OFFICERS),
        "recipient": make_user("recipient", roles.RECIPIENTS),
    }
    officer, recipient = people["officer"], people["recipient"]
    ready_request = workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
    dataset = ready_request.dataset
    approved = approve(officer, run(request_release(steward, dataset)), recipient)
    sharing.accept_terms(recipient, approved.pk)
    budget.set_budget(officer, dataset, "1", 0)
    stats = statistics.request_statistics(
        steward, dataset, [{"kind": "count", "epsilon": 0.25}], sharing.Sharing([recipient])
    )
    statistics_run.run_statistics(stats.pk)
    stats = approve(officer, ReleaseRequest.objects.get(pk=stats.pk))
    assert (ready_request.state, approved.state, stats.state) == ("ready", "approved", "approved")
    lost_run = request_release(steward, dataset)
    ReleaseRequest.objects.filter(pk=lost_run.pk).update(
        state=ReleaseRequest.State.RUNNING, attempts=1, worker="gone:1", heartbeat_at=LONG_AGO
    )
    queued = request_release(steward, dataset)
    OutboxMessage.objects.filter(args=[queued.pk]).update(sent_at=LONG_AGO, attempts=1)
    lost_profiling = factories.make_dataset(steward, factories.synthetic_csv(), "lost.csv")
    Dataset.objects.filter(pk=lost_profiling.pk).update(
        status=Dataset.Status.PROFILING, attempts=1, worker="gone:1", heartbeat_at=LONG_AGO
    )
    recipe = recipes.save_recipe(steward, ready_request.pk, "Monthly")
    values = {
        "recipe_id": [recipe.pk],
        "dataset_id": [dataset.pk, lost_profiling.pk],
        "column_id": [dataset.columns.get(name="age").pk],
        "request_id": [ready_request.pk, approved.pk, stats.pk, lost_run.pk, queued.pk],
        "class_id": [EquivalenceClass.objects.filter(request=ready_request).first().pk],
        "section": ["unchanged", "sample", "distributions"],
        "fmt": ["csv", "xlsx", "parquet", "json"],
        "slug": ["default", "no-such-project"],
    }
    return {"people": people, "media": media, "values": values}


@pytest.fixture
def private_media_root(settings, made):
    """The world's files are in the module's folder."""
    settings.MEDIA_ROOT = made["media"]
    return settings.MEDIA_ROOT


@pytest.fixture
def world(made, monkeypatch):
    monkeypatch.setattr(risk, "INLINE_RISK_ROWS", 10)  # the 300 rows are measured by a worker
    return made["values"]


@pytest.fixture
def steward(made):
    return made["people"]["steward"]


@pytest.fixture
def other_steward(made):
    return made["people"]["other_steward"]


@pytest.fixture
def officer(made):
    return made["people"]["officer"]


@pytest.fixture
def recipient(made):
    return made["people"]["recipient"]


def addresses(values: dict[str, list]) -> list[tuple[str, str]]:
    """(name, address) of every route, its parameters taken from ``values``."""
    out = []
    for pattern in release_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        names = re.findall(r"<(?:\w+:)?(\w+)>", str(pattern.pattern))
        for combination in itertools.product(*(values[name] for name in names)):
            kwargs = dict(zip(names, combination, strict=True))
            out.append((pattern.name, reverse(f"releases:{pattern.name}", kwargs=kwargs)))
    return out


@pytest.mark.parametrize(
    "person", ["anonymous", "steward", "other_steward", "officer", "recipient"]
)
def test_no_get_changes_a_row(world, person, request):
    client = Client()
    if person != "anonymous":
        client.force_login(request.getfixturevalue(person))
    listed = addresses(world)
    assert len({name for name, _ in listed}) == len(release_urls.urlpatterns)

    before = snapshot()
    for _name, address in (entry for entry in listed if entry[0] not in DOWNLOADS):
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            client.get(address, **headers)
    after = snapshot()
    assert [label for label in before if after[label] != before[label]] == []

    logged = AuditEvent.objects.count()
    for _name, address in (entry for entry in listed if entry[0] in DOWNLOADS):
        client.get(address)
    after = snapshot()
    changed = [label for label in before if after[label] != before[label]]
    assert set(changed) <= {AuditEvent._meta.label}
    new = AuditEvent.objects.order_by("pk")[logged:]
    assert {e.action for e in new} <= {
        AuditEvent.Action.DOWNLOAD,
        AuditEvent.Action.DOWNLOAD_REFUSED,
    }
    if person == "recipient":  # the files of the two releases it received
        assert any(e.action == AuditEvent.Action.DOWNLOAD for e in new)
