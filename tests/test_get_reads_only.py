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
from django.test import Client
from django.urls import URLPattern, reverse
from django.utils import timezone

from releases import urls as release_urls
from releases.datasets import budget, risk
from releases.models import AuditEvent, Dataset, EquivalenceClass, OutboxMessage, ReleaseRequest
from releases.requests import services as sharing
from releases.statistics import run as statistics_run
from releases.statistics import services as statistics
from tests.support import factories
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


@pytest.fixture
def world(ready_request, steward, officer, recipient, monkeypatch):
    """A dataset with a request ready for review, an approved extract naming ``recipient``
    (who accepted its terms) and an approved statistics release naming them too; and what a
    page once resolved as it read it: a run and a profiling whose workers died, a queued
    request whose message went out long ago, a dataset too large to measure in a page."""
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
    monkeypatch.setattr(risk, "INLINE_RISK_ROWS", 10)  # the 300 rows are measured by a worker
    return {
        "dataset_id": [dataset.pk, lost_profiling.pk],
        "column_id": [dataset.columns.get(name="age").pk],
        "request_id": [ready_request.pk, approved.pk, stats.pk, lost_run.pk, queued.pk],
        "class_id": [EquivalenceClass.objects.filter(request=ready_request).first().pk],
        "section": ["unchanged", "sample", "distributions"],
        "fmt": ["csv", "xlsx", "parquet", "json"],
        "slug": ["default", "no-such-project"],
    }


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
