"""Short-hands for tests that walk the release workflow through its services."""

from __future__ import annotations

from releases.models import ReleaseRequest
from releases.services import release
from releases.services.release import ReleaseParameters


def request_release(user, dataset, k: int = 5, suppression_limit: float = 0.05, **model):
    """Request a release with ``k``, a suppression limit and any other model parameters."""
    return release.request_release(
        user, dataset, ReleaseParameters(k=k, suppression_limit=suppression_limit, **model)
    )


def run(release_request: ReleaseRequest) -> ReleaseRequest:
    """Run the request's round in this process (the worker's body) and reload it."""
    release.run_release(release_request.pk)
    release_request.refresh_from_db()
    return release_request
