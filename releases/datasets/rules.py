"""A dataset's lifecycle: one transition table, and who may work with a dataset.

An upload waits for a worker (pending), is read and profiled (profiling), and ends ready or
refused (its file rejected, with the reason). The worker's and the sweeper's steps are actions
of the system; a steward works with their own dataset (its columns, hierarchies, requests)
once it is ready, and may delete it in any state (``services.delete_dataset`` refuses it while
releases depend on it).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from releases.background.rules import SYSTEM, Table, Transition
from releases.core import roles
from releases.core.errors import InvalidInput
from releases.models import RELEASED_ROLES, Dataset

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


def can_see(user, dataset: Dataset) -> bool:
    """A steward of the dataset's project sees it when it is theirs, or when the project lets
    stewards see all of its datasets (then read-only: ``can_change``)."""
    if user is None or not user.is_authenticated:
        return False
    if not roles.has_role(user, roles.STEWARD, dataset.project_id):
        return False
    return dataset.owner_id == user.pk or dataset.project.stewards_see_all


def can_change(user, dataset: Dataset) -> bool:
    """Only the steward who uploaded it changes a dataset (tags, hierarchies, requests,
    versions, deletion), while a steward of its project."""
    return can_see(user, dataset) and dataset.owner_id == user.pk


def check_change(user, dataset: Dataset) -> None:
    """Refuse a change to a dataset its project lets ``user`` see but not change (403)."""
    if not can_change(user, dataset):
        raise PermissionDenied(
            f"{dataset.name} is {dataset.owner.username}'s dataset: its project lets you see "
            "it, read-only; only they can change it."
        )


def can_use(status: str) -> bool:
    return TABLE.allows(status, "use")


def check_use(status: str | None) -> None:
    """Refuse a dataset still being profiled, or whose file was refused (``InvalidInput``)."""
    if status is None or not can_use(status):
        raise InvalidInput(_NOT_USABLE.get(status or Status.PENDING, _NOT_USABLE[Status.PENDING]))


# --- Versions -------------------------------------------------------------------------------


def unroled_new_columns(schema_changes: dict, roles_by_name: dict[str, str]) -> list[str]:
    """The columns new in this version that still have no role."""
    return [n for n in (schema_changes or {}).get("new", []) if not roles_by_name.get(n)]


def can_request(schema_changes: dict, roles_by_name: dict[str, str], key_column: str) -> bool:
    return not unroled_new_columns(schema_changes, roles_by_name) and (
        not key_column or key_column in roles_by_name
    )


def check_request(schema_changes: dict, roles_by_name: dict[str, str], key_column: str) -> None:
    """Refuse a request of a version with a new column not given a role yet, or lacking the
    lineage's key column (``InvalidInput`` naming the columns)."""
    new = unroled_new_columns(schema_changes, roles_by_name)
    if new:
        raise InvalidInput(
            "This version has new columns without a role: "
            f"{', '.join(new)}. Give each an explicit role before requesting a release."
        )
    if key_column and key_column not in roles_by_name:
        raise InvalidInput(
            f"This version has no column {key_column!r}, the key column of its lineage."
        )


def check_key_role(column: str, key_column: str, role: str) -> None:
    """The lineage's key column is never released: refuse a role that would release it."""
    if key_column and column == key_column and role in RELEASED_ROLES:
        raise InvalidInput(
            f"{column} is the key column linking this dataset's versions: it is never "
            "released. Choose withheld or direct identifier."
        )


# --- Registering a source in place ----------------------------------------------------------

#: Who registered: a person through the API, or whoever runs ``manage.py`` on the server.
COMMAND_LINE = None


def _register_refusal(actor, owner, project, kind: str) -> str | None:
    """Why ``actor`` may not register a ``kind`` source for ``owner`` in ``project`` (one
    sentence), or None. The owner must be a data steward of the project. Through the API the
    steward registers for themselves, and a server folder only as a site administrator (the
    command line runs on the server: it may register a folder for any steward)."""
    if not owner.is_active or not roles.has_role(owner, roles.STEWARD, project.pk):
        return (
            f"{owner.username} is not a data steward of {project.name}: a dataset registered "
            "there must belong to one."
        )
    if actor is COMMAND_LINE:
        return None
    if actor.pk != owner.pk:
        return "A steward registers datasets for themselves."
    if kind == Dataset.SourceKind.FOLDER and not roles.is_site_admin(actor):
        return (
            "Only site administrators may register files from a server folder; ask one to run "
            "manage.py register_dataset."
        )
    return None


def can_register(actor, owner, project, kind: str) -> bool:
    return _register_refusal(actor, owner, project, kind) is None


def check_register(actor, owner, project, kind: str) -> None:
    """Refuse a registration ``can_register`` does not allow (``PermissionDenied``, saying why)."""
    if not can_register(actor, owner, project, kind):
        raise PermissionDenied(_register_refusal(actor, owner, project, kind))
