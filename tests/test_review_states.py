"""The review's state machine: every decision and every resubmission in every state, allowed or
refused. The cases share one request ready for review, made once for the module (each test puts
it in a state inside its own transaction, rolled back); nothing else in the module runs beside
it, so the module's world (its patched outbox) touches no other test."""

from __future__ import annotations

import pytest

from releases.core.errors import InvalidInput
from releases.models import ReleaseRequest, ReleaseRound, Review
from releases.requests import services as release
from releases.requests.parameters import ReleaseParameters
from releases.review import services as review
from tests.conftest import READY_ROLES
from tests.support import world as world_support
from tests.support.factories import synthetic_csv

pytestmark = pytest.mark.django_db

State = ReleaseRequest.State
ALL_STATES = [s.value for s in State]
DECISIONS = [d.value for d in Review.Decision]


@pytest.fixture(scope="module")
def shared_world(django_db_setup, django_db_blocker):
    """One request ready for review (``ready_request``'s data and roles), made once for the
    state-machine tests: each puts it in a state inside its own transaction, rolled back."""
    with world_support.world(
        django_db_blocker, content=synthetic_csv(), tagging=READY_ROLES
    ) as made:
        yield made


@pytest.fixture
def shared_request(shared_world, settings) -> ReleaseRequest:
    """The module's ready request, read afresh, its files in the module's folder."""
    settings.MEDIA_ROOT = shared_world["media"]
    return ReleaseRequest.objects.get(pk=shared_world["request"].pk)


@pytest.fixture
def requester(shared_world):
    """The steward who made the module's request."""
    return shared_world["people"]["requester"]


EXPECTED = {
    (State.READY, "approve"): State.APPROVED,
    (State.READY, "changes"): State.CHANGES_REQUESTED,
    (State.READY, "reject"): State.REJECTED,
}


@pytest.mark.parametrize("state", ALL_STATES)
@pytest.mark.parametrize("decision", DECISIONS)
def test_every_review_transition_is_allowed_or_refused(shared_request, officer, state, decision):
    ReleaseRequest.objects.filter(pk=shared_request.pk).update(state=state)
    expected = EXPECTED.get((state, decision))
    if expected is None:
        with pytest.raises(InvalidInput, match="only a request that is ready for review"):
            review.review(officer, shared_request.pk, decision, "a comment")
        assert not Review.objects.exists()
    else:
        review.review(officer, shared_request.pk, decision, "a comment")
        assert Review.objects.get().decision == decision
    shared_request.refresh_from_db()
    assert shared_request.state == (expected or state)
    assert (shared_request.decided_at is not None) == (expected is not None)


RESUBMITTABLE = {State.CHANGES_REQUESTED, State.FAILED, State.CANCELLED}


@pytest.mark.parametrize("state", ALL_STATES)
def test_every_resubmit_transition_is_allowed_or_refused(
    shared_request, requester, state, django_capture_on_commit_callbacks
):
    ReleaseRequest.objects.filter(pk=shared_request.pk).update(state=state)
    params = ReleaseParameters(k=10, suppression_limit=0.1)
    if state in RESUBMITTABLE:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            release.resubmit(requester, shared_request.pk, params, "Coarser, as asked.")
        shared_request.refresh_from_db()
        assert (shared_request.state, shared_request.round, shared_request.privacy_model.k) == (
            State.QUEUED,
            2,
            10,
        )
        assert len(callbacks) == 2  # the old files removed, the new run enqueued
        assert ReleaseRound.objects.get(request=shared_request).outcome == state
    else:
        with pytest.raises(InvalidInput, match="can be resubmitted"):
            release.resubmit(requester, shared_request.pk, params, "Coarser.")
        shared_request.refresh_from_db()
        assert (shared_request.state, shared_request.round) == (state, 1)
