"""Writes: projects and their settings, members and their roles, moving a dataset. Each checks
who may do it and writes its audit event in the same transaction."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from releases.core import audit, roles
from releases.core.errors import InvalidInput
from releases.models import AuditEvent, Dataset, Membership, Project
from releases.projects import rules

ROLES = tuple(Membership.Role.values)


@dataclass(frozen=True)
class Settings:
    name: str
    required_approvals: int = 1
    default_terms: str = ""
    default_expiry_days: int | None = None
    epsilon_total: Decimal | None = None
    stewards_see_all: bool = False
    webhooks_allowed: bool = True

    def as_detail(self) -> dict:
        return {
            "name": self.name,
            "required_approvals": self.required_approvals,
            "default_terms": self.default_terms,
            "default_expiry_days": self.default_expiry_days,
            "epsilon_total": None if self.epsilon_total is None else str(self.epsilon_total),
            "stewards_see_all": self.stewards_see_all,
            "webhooks_allowed": self.webhooks_allowed,
        }


def _apply(project: Project, settings: Settings) -> None:
    for field, value in vars(settings).items():
        setattr(project, field, value)


def create_project(user, slug: str, settings: Settings) -> Project:
    rules.check_manage_projects(user)
    if Project.objects.filter(slug=slug).exists():
        raise InvalidInput(f"A project with the short name {slug} exists already.")
    try:
        with transaction.atomic():
            project = Project(slug=slug)
            _apply(project, settings)
            project.save()
            audit.record(
                AuditEvent.Action.PROJECT_CREATED,
                user,
                project_id=project.pk,
                project=slug,
                **settings.as_detail(),
            )
    except IntegrityError:
        raise InvalidInput(f"A project with the short name {slug} exists already.") from None
    return project


def update_settings(user, project: Project, settings: Settings) -> Project:
    rules.check_manage_projects(user)
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)
        _apply(project, settings)
        project.save()
        audit.record(
            AuditEvent.Action.PROJECT_SETTINGS,
            user,
            project_id=project.pk,
            project=project.slug,
            **settings.as_detail(),
        )
    return project


def _admins_after(project: Project, user_id: int, new_roles: set[str]) -> int:
    others = (
        Membership.objects.filter(project=project, role=roles.ADMIN)
        .exclude(user_id=user_id)
        .count()
    )
    return others + (roles.ADMIN in new_roles)


def set_roles(actor, project: Project, username: str, new_roles: list[str] | set[str]) -> None:
    """Give ``username`` exactly ``new_roles`` in the project (none: remove them)."""
    rules.check_manage_members(actor, project)
    wanted = set(new_roles)
    unknown = wanted - set(ROLES)
    if unknown:
        raise InvalidInput(f"No such role: {', '.join(sorted(unknown))}.")
    member = get_user_model().objects.filter(username=username.strip()).first()
    if member is None:
        raise InvalidInput(f"No user is called {username.strip() or '(blank)'}.")
    with transaction.atomic():
        # Locks the project's memberships: two admins demoting each other at once cannot
        # both succeed.
        held = set(
            Membership.objects.select_for_update()
            .filter(project=project)
            .filter(user=member)
            .values_list("role", flat=True)
        )
        list(Membership.objects.select_for_update().filter(project=project, role=roles.ADMIN))
        if wanted == held:
            return
        if roles.ADMIN in held and roles.ADMIN not in wanted:
            rules.check_keeps_an_admin(project, _admins_after(project, member.pk, wanted))
        Membership.objects.filter(project=project, user=member).exclude(role__in=wanted).delete()
        Membership.objects.bulk_create(
            [Membership(project=project, user=member, role=r) for r in sorted(wanted - held)]
        )
        audit.record(
            AuditEvent.Action.MEMBERSHIP,
            actor,
            project_id=project.pk,
            project=project.slug,
            member=member.username,
            roles_before=sorted(held),
            roles_after=sorted(wanted),
        )
    roles.forget(member)


def add_roles(actor, project: Project, username: str, added: list[str] | set[str]) -> None:
    """Add roles to a member (a new member when they had none)."""
    member = get_user_model().objects.filter(username=username.strip()).first()
    held: set[str] = set()
    if member is not None:
        held = set(
            Membership.objects.filter(project=project, user=member).values_list("role", flat=True)
        )
    if not added:
        raise InvalidInput("Choose at least one role.")
    set_roles(actor, project, username, held | set(added))


def move_dataset(user, dataset: Dataset, target: Project) -> Dataset:
    """Move a dataset (its requests and budget with it) to another project."""
    with transaction.atomic():
        dataset = Dataset.objects.select_for_update().select_related("project").get(pk=dataset.pk)
        rules.check_move_dataset(user, dataset, target)
        source = dataset.project
        dataset.project = target
        dataset.save(update_fields=["project"])
        audit.record(
            AuditEvent.Action.DATASET_MOVED,
            user,
            dataset=dataset,
            project_id=target.pk,
            project=target.slug,
            from_project_id=source.pk,
            from_project=source.slug,
        )
    return dataset
