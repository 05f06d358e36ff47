"""The worker decides between the release batch by batch and the release from the rows before
it reads any column: a round the engine releases only from its rows reads them once, never the
frequency table first; a round released batch by batch reads the table once."""

from __future__ import annotations

import pytest

from releases.models import ReleaseRequest
from releases.requests import streamed
from tests.support import factories
from tests.support.workflow import request_release, run, tag
from tests.test_streamed_run import CLINIC_ROLES, clinic_csv

pytestmark = pytest.mark.django_db


@pytest.fixture
def tables_read(monkeypatch) -> list[list[str]]:
    """The columns of each frequency table the worker reads."""
    read: list[list[str]] = []
    counted = streamed.frequencies

    def counting(dataset, columns):
        read.append(list(columns))
        return counted(dataset, columns)

    monkeypatch.setattr(streamed, "frequencies", counting)
    return read


def test_a_round_that_needs_the_rows_reads_no_frequency_table(steward, tables_read):
    dataset = factories.make_dataset(steward, clinic_csv(300), "clinic.csv")
    tag(steward, dataset, CLINIC_ROLES)
    ready = run(
        request_release(steward, dataset, k=5, suppression_limit=0.05, algorithm="mondrian")
    )
    assert ready.state == ReleaseRequest.State.READY, ready.error
    assert tables_read == []


def test_a_round_released_batch_by_batch_reads_its_table_once(steward, tables_read):
    dataset = factories.make_dataset(steward, clinic_csv(300), "clinic.csv")
    tag(steward, dataset, CLINIC_ROLES)
    # Automatic hierarchies: built from the values the table counts.
    ready = run(request_release(steward, dataset, k=5, suppression_limit=0.05))
    assert ready.state == ReleaseRequest.State.READY, ready.error
    assert tables_read == [["age", "zip", "sex", "diagnosis"]]
