"""Short-hands for tests that walk the release workflow through its services."""

from __future__ import annotations

from releases.datasets import services as datasets
from releases.models import Dataset, ReleaseRequest, Role
from releases.requests import run as release_run
from releases.requests import services as release
from releases.requests.parameters import ReleaseParameters


def request_release(user, dataset, k: int = 5, suppression_limit: float = 0.05, **model):
    """Request a release with ``k``, a suppression limit and any other keyword of
    ``PrivacyModel`` (``l``, ``t``, ``criteria``, ``population``...) or of
    ``ReleaseParameters`` (``algorithm``, ``levels``)."""
    return release.request_release(
        user, dataset, ReleaseParameters(k=k, suppression_limit=suppression_limit, **model)
    )


def form_data(params: ReleaseParameters | None = None, **extra) -> dict:
    """What the request form posts for ``params`` (k=5 with 5 % suppression by default): the
    ticked models' checkboxes and parameters, the suppression limit in percent."""
    from releases.requests.forms import ModelForm

    params = params or ReleaseParameters(k=5, suppression_limit=0.05)
    data = {}
    for name, value in ModelForm.initial_for(params).items():
        if value is True:
            data[name] = "on"
        elif value is not False and value is not None:
            data[name] = str(value)
    return {**data, **extra}


def run(release_request: ReleaseRequest) -> ReleaseRequest:
    """Run the request's round in this process (the worker's body) and reload it."""
    release_run.run_release(release_request.pk)
    release_request.refresh_from_db()
    return release_request


def ready_release(
    steward,
    content: str | bytes,
    roles: dict[str, str],
    filename: str = "people.csv",
    prepare=None,
    k: int = 5,
    suppression_limit: float = 0.05,
    **model,
) -> ReleaseRequest:
    """A release request whose run finished and waits for review: ``content`` uploaded and
    profiled, its columns given ``roles`` (the others withheld), ``prepare(steward, dataset)``
    run if given (to attach hierarchies, say), then requested with the model and run here."""
    from tests.support.factories import make_dataset

    dataset = make_dataset(steward, content, filename)
    tag(steward, dataset, roles)
    if prepare is not None:
        prepare(steward, dataset)
    release_request = run(
        request_release(steward, dataset, k=k, suppression_limit=suppression_limit, **model)
    )
    assert release_request.state == ReleaseRequest.State.READY, release_request.error
    return release_request


def approve(officer, release_request: ReleaseRequest, *recipients) -> ReleaseRequest:
    """Approve the round as ``officer``, naming ``recipients`` on the release."""
    from releases.requests.services import Additions
    from releases.review import services as review

    review.review(
        officer, release_request.pk, "approve", additions=Additions(recipients=list(recipients))
    )
    release_request.refresh_from_db()
    return release_request


def download(user, release_request: ReleaseRequest, fmt: str = "csv") -> bytes:
    """Accept the terms (once) and download ``fmt`` through the service; the file's bytes."""
    from releases.requests import downloads
    from releases.requests import rules as lifecycle
    from releases.requests import services as sharing

    if not lifecycle.has_accepted_terms(user, release_request):
        sharing.accept_terms(user, release_request.pk)
    prepared = downloads.open_download(user, release_request.pk, fmt)
    return b"".join(downloads.verified_stream(user, prepared))


def tag(user, dataset: Dataset, roles: dict[str, str], rest: str | None = Role.WITHHELD) -> None:
    """Give the named columns their roles, and every other column without a role ``rest``
    (withheld unless said otherwise; ``None`` leaves them without a role)."""
    for column in dataset.columns.all():
        role = roles.get(column.name, rest if not column.role else None)
        if role is not None:
            datasets.set_column_role(user, dataset, column.pk, role)
