"""Work a dead worker left behind is reported as failed, not left spinning."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from releases.models import AuditEvent, Dataset, ReleaseRequest, Role
from releases.services import dispatch, recovery, release
from releases.services.release import ReleaseParameters
from tests.support import factories
from tests.test_services import synthetic_csv, tag

State = ReleaseRequest.State


def running_request(steward, heartbeat_age: timedelta) -> ReleaseRequest:
    dataset = factories.make_dataset(steward, synthetic_csv(), "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER})
    # Nothing is queued: the request is made to look as if a worker had taken it and died.
    with mock.patch.object(dispatch, "send"):
        release_request = release.request_release(
            steward, dataset, ReleaseParameters(k=5, suppression_limit=0.05)
        )
    ReleaseRequest.objects.filter(pk=release_request.pk).update(
        state=State.RUNNING, heartbeat_at=timezone.now() - heartbeat_age
    )
    return release_request


@pytest.mark.django_db
def test_only_silent_work_is_marked_failed(steward, settings):
    settings.STALE_WORK_SECONDS = 600
    lost = running_request(steward, timedelta(minutes=30))
    alive = running_request(steward, timedelta(seconds=5))
    silent_upload = factories.make_dataset(steward, synthetic_csv(), "other.csv")
    Dataset.objects.filter(pk=silent_upload.pk).update(
        status=Dataset.Status.PROFILING, heartbeat_at=timezone.now() - timedelta(hours=1)
    )

    assert recovery.fail_stale_work() == (1, 1)

    lost.refresh_from_db()
    alive.refresh_from_db()
    silent_upload.refresh_from_db()
    assert (lost.state, alive.state) == (State.FAILED, State.RUNNING)
    assert "Resubmit" in lost.error
    assert (
        silent_upload.status == Dataset.Status.FAILED
        and "Upload the file again" in silent_upload.error
    )
    assert AuditEvent.objects.filter(action=AuditEvent.Action.RUN_FAILED, request=lost).exists()
    # A lost run can be resubmitted, like any failed one.
    release.resubmit(steward, lost.pk, ReleaseParameters(k=5, suppression_limit=0.05), "Again.")
    lost.refresh_from_db()
    assert (lost.state, lost.round) == (State.QUEUED, 2)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_starting_worker_fails_what_a_dead_worker_left_running(steward, start_worker):
    lost = running_request(steward, timedelta(hours=2))
    with start_worker():
        lost.refresh_from_db()
        assert lost.state == State.FAILED
        assert "stopped before it finished" in lost.error
