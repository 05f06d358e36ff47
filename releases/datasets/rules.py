"""A dataset's lifecycle: one transition table, and who may work with a dataset.

An upload waits for a worker (pending), is read and profiled (profiling), and ends ready or
refused (its file rejected, with the reason). The worker's and the sweeper's steps are actions
of the system; a steward works with their own dataset (its columns, hierarchies, requests)
once it is ready, and may delete it in any state (``services.delete_dataset`` refuses it while
releases depend on it).
"""

from __future__ import annotations

from releases.background.rules import SYSTEM, Table, Transition
from releases.core import roles
from releases.core.errors import InvalidInput
from releases.models import Dataset

Status = Dataset.Status
OWNER = "owner"

TABLE = Table(
    {
        (Status.PENDING, "start_profiling"): Transition(Status.PROFILING, SYSTEM, "Profile"),
        (Status.PROFILING, "finish_profiling"): Transition(Status.READY, SYSTEM, "Finish"),
        # The worker profiling it stopped (killed, out of memory): another attempt.
        (Status.PROFILING, "retry_profiling"): Transition(Status.PENDING, SYSTEM, "Retry"),
        (Status.PENDING, "refuse"): Transition(Status.FAILED, SYSTEM, "Refuse the file"),
        (Status.PROFILING, "refuse"): Transition(Status.FAILED, SYSTEM, "Refuse the file"),
        (Status.READY, "use"): Transition(None, OWNER, "Tag, build hierarchies, request"),
        **{
            (status, "delete"): Transition(None, OWNER, "Delete")
            for status in (Status.PENDING, Status.PROFILING, Status.READY, Status.FAILED)
        },
    }
)
#: The state of an upload.
UPLOADED = Status.PENDING
sources = TABLE.sources
target = TABLE.target

#: Why a dataset in this state cannot be used yet (or any more).
_NOT_USABLE: dict[str, str] = {
    Status.FAILED: "This dataset's file was refused; upload a corrected file.",
    Status.PENDING: "This dataset is still being profiled; wait until its columns are shown.",
    Status.PROFILING: "This dataset is still being profiled; wait until its columns are shown.",
}


def check_owner(user) -> None:
    """Only data stewards work with datasets (their own: the selectors look only there)."""
    roles.require(user, roles.STEWARDS, "work with datasets")


def can_use(status: str) -> bool:
    return TABLE.allows(status, "use")


def check_use(status: str | None) -> None:
    """Refuse a dataset still being profiled, or whose file was refused (``InvalidInput``)."""
    if status is None or not can_use(status):
        raise InvalidInput(_NOT_USABLE.get(status or Status.PENDING, _NOT_USABLE[Status.PENDING]))
