"""A release request through a real Redis broker to a real Celery worker process."""

from __future__ import annotations

import pytest

from releases.models import ReleaseRequest, Role
from tests.support import processes
from tests.support.factories import make_dataset
from tests.support.workflow import request_release
from tests.test_services import synthetic_csv, tag

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_request_goes_through_the_broker_to_ready_for_review(steward, worker):
    dataset = make_dataset(steward, synthetic_csv(), "people.csv")
    tag(
        steward,
        dataset,
        {
            "name": Role.IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "zip": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
        },
    )
    release_request = request_release(steward, dataset, k=5, suppression_limit=0.05)

    def finished():
        release_request.refresh_from_db()
        return release_request.is_settled

    processes.wait_until(finished, 60, "the worker to finish the request")
    assert release_request.state == ReleaseRequest.State.READY, release_request.error
    assert release_request.summary["achieved"]["k"] >= 5
    assert release_request.started_at is not None and release_request.finished_at is not None
    assert release_request.classes.exists()
