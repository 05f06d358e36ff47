"""People's roles in projects, for tests: the default project (made by the migration to
projects) unless another is named."""

from __future__ import annotations

from releases.core import roles
from releases.models import Membership, Project


def default_project() -> Project:
    return Project.objects.get_or_create(slug="default", defaults={"name": "Default"})[0]


def make_project(slug: str, **settings) -> Project:
    return Project.objects.create(slug=slug, name=settings.pop("name", slug.title()), **settings)


def grant(user, *names: str, project: Project | None = None) -> None:
    """Give ``user`` these roles (or old group names: "Data stewards" ...) in ``project``."""
    project = project or default_project()
    for name in names:
        Membership.objects.get_or_create(
            project=project, user=user, role=roles.GROUP_ROLES.get(name, name)
        )
    roles.forget(user)
