"""The four-eyes rule's number: how many officers must approve a round. Who may vote, and when,
is the request's lifecycle (``requests.rules``); nobody reviews their own request."""

from __future__ import annotations

from django.conf import settings

from releases.models import Project


def required_approvals(project: Project | None = None) -> int:
    """The project's number of approvals; ``REQUIRED_APPROVALS`` is the site's floor for every
    project."""
    floor = max(1, int(getattr(settings, "REQUIRED_APPROVALS", 1)))
    return max(floor, project.required_approvals) if project is not None else floor
