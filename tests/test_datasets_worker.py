"""Uploads are parsed and profiled by a real Celery worker process, through a real Redis broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from releases.datasets import services as datasets
from releases.models import AuditEvent, Dataset
from tests.support import processes
from tests.support.factories import upload

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DATA = Path(__file__).parent / "data"


def wait_final(dataset: Dataset) -> Dataset:
    def final():
        dataset.refresh_from_db()
        return dataset.is_final

    processes.wait_until(final, 60, "the worker to profile the dataset")
    return dataset


def test_the_worker_profiles_an_upload_or_records_why_it_refused_it(steward, worker):
    good = datasets.create_dataset(
        steward, upload((DATA / "formats" / "people.xlsx").read_bytes(), "people.xlsx")
    )
    bad = datasets.create_dataset(
        steward, upload((DATA / "bad" / "ragged.csv").read_bytes(), "ragged.csv")
    )
    assert good.status == Dataset.Status.PENDING  # queued on commit, not parsed in the request

    assert wait_final(good).status == Dataset.Status.READY, good.error
    assert (good.row_count, good.columns.count()) == (5, 11)
    assert good.columns.get(name="email").suggested_role == "identifier"
    assert AuditEvent.objects.filter(action=AuditEvent.Action.PROFILED, dataset=good).exists()

    assert wait_final(bad).status == Dataset.Status.FAILED
    assert "Line 3 has 2 fields" in bad.error and not bad.columns.exists()
