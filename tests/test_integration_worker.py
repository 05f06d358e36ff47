"""A release request through a real Redis broker to a real Celery worker process."""

from __future__ import annotations

import pytest

from releases.models import ReleaseRequest, Role
from tests.support import processes
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import request_release, tag

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


def test_the_decision_email_is_in_the_workers_log_with_a_link_on_site_url(
    steward, officer, start_worker, tmp_path
):
    """As `make run` has it: the console e-mail backend (DEBUG), sent by the worker, so the
    e-mail is printed in the worker's log; its link is on SITE_URL (`make run` derives it from
    PORT)."""
    from releases.services import review

    steward.email = "steward@example.org"
    steward.save()
    dataset = make_dataset(steward, synthetic_csv(rows=60), "people.csv")
    tag(steward, dataset, {"name": Role.IDENTIFIER, "age": Role.QUASI_IDENTIFIER})
    with start_worker(SITE_URL="http://127.0.0.1:8123"):
        release_request = request_release(steward, dataset, k=2, suppression_limit=0.1)
        processes.wait_until(
            lambda: ReleaseRequest.objects.get(pk=release_request.pk).state == "ready",
            60,
            "the worker to finish the request",
        )
        review.review(officer, release_request.pk, "changes", "Coarser ages, please.")
        log = tmp_path / "worker.log"
        link = f"See http://127.0.0.1:8123/requests/{release_request.pk}/"
        processes.wait_until(lambda: link in log.read_text(), 30, "the e-mail in the worker log")
    text = log.read_text()
    assert "To: steward@example.org" in text and "Coarser ages, please." in text
