"""Reads for the project pages and for the upload's choice of project."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import Http404

from releases.core import roles
from releases.core.errors import InvalidInput
from releases.models import Dataset, Membership, Project
from releases.projects import rules


def get_project(slug: str) -> Project:
    try:
        return Project.objects.get(slug=slug)
    except Project.DoesNotExist:
        raise Http404("No such project.") from None


def projects_for(user) -> QuerySet[Project]:
    """Every project for a site administrator; for anyone else the projects they belong to."""
    found = Project.objects.annotate(
        member_count=Count("memberships__user", distinct=True),
        dataset_count=Count("datasets", distinct=True),
    )
    if roles.is_site_admin(user):
        return found
    return found.filter(pk__in=roles.project_roles(user).keys())


def project_for_members(user, slug: str) -> Project:
    """A project whose members ``user`` manages (404 for a project they cannot see)."""
    project = get_project(slug)
    if not roles.is_site_admin(user) and project.pk not in roles.project_roles(user):
        raise Http404("No such project.")
    rules.check_manage_members(user, project)
    return project


def members(project: Project) -> list[dict]:
    """Each member with their roles, by user name."""
    rows: dict[int, dict] = {}
    for membership in Membership.objects.filter(project=project).select_related("user"):
        row = rows.setdefault(membership.user_id, {"user": membership.user, "roles": []})
        row["roles"].append(membership.role)
    return sorted(rows.values(), key=lambda row: row["user"].username)


def steward_projects(user) -> QuerySet[Project]:
    return Project.objects.filter(pk__in=roles.projects_where(user, roles.STEWARD))


def upload_project(user, slug: str = "") -> Project:
    """The project an upload goes into: the one named, or the steward's only project."""
    mine = steward_projects(user)
    if slug:
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise InvalidInput(f"No such project: {slug}.")
        if not roles.has_role(user, roles.STEWARD, project.pk):
            raise PermissionDenied(
                f"You are not a data steward of {project.name}: you cannot upload into it."
            )
        return project
    found = list(mine[:2])
    if not found:
        raise PermissionDenied("Only data stewards can upload datasets.")
    if len(found) > 1:
        raise InvalidInput("You are a data steward in several projects: choose the project.")
    return found[0]


def project_named(slug: str) -> Project:
    """A project by its short name, for a form: an unknown one is a clear error (404)."""
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        raise Http404(f"No such project: {slug}.")
    return project


def dataset_for_move(user, dataset_id: int) -> Dataset:
    """A dataset ``user`` might move: any for a site administrator, else one of a project where
    they are a steward and an admin (404 otherwise: others' datasets stay out of sight)."""
    dataset = Dataset.objects.select_related("project").filter(pk=dataset_id).first()
    if dataset is None:
        raise Http404("No such dataset.")
    if roles.is_site_admin(user):
        return dataset
    held = roles.project_roles(user).get(dataset.project_id, frozenset())
    if roles.STEWARD not in held:
        raise Http404("No such dataset.")
    if roles.ADMIN not in held:
        raise PermissionDenied("Only a data steward who is also the project's admin can move it.")
    return dataset
