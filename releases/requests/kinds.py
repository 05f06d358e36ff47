"""The kinds of release request (a row-level extract, differentially private statistics): what
differs between them, as one strategy object per kind.

Everything else is the same for every kind: the lifecycle (``requests.rules``), rounds, the
four-eyes review, sharing, terms, expiry, revocation and downloads. A kind says what runs a
round, what its result must pass before approval and which of those checks a user may see,
what the release report and the request's page show of it.

The features that make a kind register it (:func:`register`) from ``ReleasesConfig.ready``:
the extract from ``requests.extract``, statistics from ``statistics.kinds``. Code below them
asks for a request's kind (:func:`of`) instead of testing ``release_request.kind``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from releases.engine import Check
from releases.models import ReleaseFile, ReleaseRequest, Review

#: The two audiences of a release report: a named recipient (facts about the release only),
#: and the officers and the requester (also what was computed on the original).
RECIPIENT = "recipient"
REVIEWER = "reviewer"

#: A compliance checklist item's status.
DONE, OPEN, NOT_APPLICABLE = "done", "open", "n/a"


def iso(value) -> str | None:
    """A date or time in a release report (ISO 8601), or None."""
    return value.isoformat() if value else None


def checklist_item(key: str, title: str, status: str, reason: str) -> dict:
    """One item of a release report's compliance checklist."""
    return {"key": key, "item": title, "status": status, "reason": reason}


class RequestKind(ABC):
    """What a kind of request supplies; the base gives what most kinds share."""

    #: ``ReleaseRequest.Kind`` value.
    name: str = ""
    #: The Celery task (by name) that runs a round of this kind.
    task: str = ""

    @abstractmethod
    def run(self, request_id: int) -> None:
        """Run a queued round (the worker's body)."""
        ...

    @abstractmethod
    def checks(self, release_request: ReleaseRequest) -> list[Check]:
        """What the round's stored result must satisfy before it can be approved."""
        ...

    def acceptable_checks(self) -> frozenset[str]:
        """Checks an approving officer may accept with a written justification instead of
        them blocking approval (by name); none by default."""
        return frozenset()

    def checks_for(self, user, release_request: ReleaseRequest) -> list[Check]:
        """The checks as ``user`` may see them (``None``: a report that travels)."""
        return self.checks(release_request)

    def on_approved(self, release_request: ReleaseRequest, officer) -> None:
        """Inside the approving transaction, once the round is approved."""
        return None  # Optional hook: most kinds have nothing to add.

    def resubmit_page(self, release_request: ReleaseRequest) -> str | None:
        """Where the requester edits a resubmission, when it is not the request's page."""
        return None

    def page(self, user, release_request: ReleaseRequest) -> dict:
        """What the officers' and requester's page shows of this kind (beside the common
        parts: checks, votes, rounds, files)."""
        return {}

    def report_header(self) -> dict:
        """Fields the release report names first (after its version)."""
        return {}

    @abstractmethod
    def report_body(
        self, release_request: ReleaseRequest, audience: str, files: list[dict]
    ) -> dict[str, Any]:
        """The report's ``dataset`` and ``extract`` sections and the kind's own sections, in
        their order; ``files``: the round's files as the report lists them."""
        ...

    @abstractmethod
    def compliance(
        self, release_request: ReleaseRequest, files: list[ReleaseFile], approvals: list[Review]
    ) -> list[dict]:
        """The compliance checklist (``checklist_item``), each item from facts the app holds."""
        ...

    def add_reviewer_detail(self, report: dict, release_request: ReleaseRequest) -> None:
        """What only officers and the requester see, before the checks (computed on the
        original); nothing by default."""
        return None

    def reviewer_tail(self, release_request: ReleaseRequest) -> dict:
        """What only officers and the requester see, after the reviews and recipients."""
        return {}


_kinds: dict[str, RequestKind] = {}


def register(kind: RequestKind) -> None:
    _kinds[kind.name] = kind


def named(name: str) -> RequestKind:
    try:
        return _kinds[name]
    except KeyError:
        raise LookupError(f"No kind of request {name!r} is registered.") from None


def of(release_request: ReleaseRequest) -> RequestKind:
    return named(release_request.kind)
