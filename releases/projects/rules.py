"""Who manages projects and members, and when a dataset may move. Paired ``can_x``/``check_x``:
pages ask ``can_x``, services call ``check_x`` (``PermissionDenied`` or ``InvalidInput``, each
with a sentence for the person)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from releases.core import roles
from releases.core.errors import InvalidInput
from releases.models import Dataset, Project, ReleaseRequest

#: A request in one of these states is still open: its dataset stays where it is.
OPEN_STATES = frozenset(
    {
        ReleaseRequest.State.QUEUED,
        ReleaseRequest.State.RUNNING,
        ReleaseRequest.State.READY,
        ReleaseRequest.State.CHANGES_REQUESTED,
    }
)


def can_manage_projects(user) -> bool:
    """Site administrators create projects and change their settings."""
    return roles.is_site_admin(user)


def check_manage_projects(user) -> None:
    if not can_manage_projects(user):
        raise PermissionDenied("Only site administrators can create projects or change them.")


def can_manage_members(user, project: Project) -> bool:
    return roles.is_project_admin(user, project.pk)


def check_manage_members(user, project: Project) -> None:
    if not can_manage_members(user, project):
        raise PermissionDenied("Only the project's admins can change its members.")


def check_keeps_an_admin(project: Project, admins_after: int) -> None:
    """A project is never left without an admin."""
    if admins_after < 1:
        raise InvalidInput(
            f"{project.name} would have no project admin left: make someone else its admin first."
        )


def can_offer_move(user, dataset: Dataset) -> bool:
    """A page offers the move to a site administrator and to a steward and admin of the
    dataset's project (the target project is checked when they choose it)."""
    return roles.is_site_admin(user) or (
        roles.has_role(user, roles.STEWARD, dataset.project_id)
        and roles.has_role(user, roles.ADMIN, dataset.project_id)
    )


def can_move_dataset(user, dataset: Dataset, target: Project) -> bool:
    if roles.is_site_admin(user):
        return True
    return all(
        roles.has_role(user, role, pid)
        for role in (roles.STEWARD, roles.ADMIN)
        for pid in (dataset.project_id, target.pk)
    )


def check_move_dataset(user, dataset: Dataset, target: Project) -> None:
    if not can_move_dataset(user, dataset, target):
        raise PermissionDenied(
            "Only a site administrator, or a data steward and admin of both projects, can "
            "move a dataset between them."
        )
    if target.pk == dataset.project_id:
        raise InvalidInput(f"{dataset.name} is already in {target.name}.")
    if dataset.requests.filter(state__in=OPEN_STATES).exists():
        raise InvalidInput(
            f"{dataset.name} has a release request still open (queued, running, ready for "
            "review or with changes requested): it moves once that is decided or cancelled."
        )
