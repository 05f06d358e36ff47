"""The project pages: the site administrators' list, creation and settings; a project admin's
members page; moving a dataset. Thin: the services check and write, the selectors read."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from releases.core.errors import InvalidInput
from releases.core.http import error_page
from releases.core.http import is_htmx as _is_htmx
from releases.projects import rules, selectors, services
from releases.projects.forms import ROLE_CHOICES, MemberForm, MoveForm, ProjectForm


@require_GET
def project_list(request: HttpRequest) -> HttpResponse:
    return _list(request, ProjectForm(), 200)


def _list(request: HttpRequest, form: ProjectForm, status: int) -> HttpResponse:
    context = {
        "projects": selectors.projects_for(request.user),
        "form": form,
        "can_manage": rules.can_manage_projects(request.user),
    }
    return render(request, "releases/project_list.html", context, status=status)


@require_POST
def project_create(request: HttpRequest) -> HttpResponse:
    rules.check_manage_projects(request.user)
    form = ProjectForm(request.POST)
    if form.is_valid():
        try:
            project = services.create_project(
                request.user, form.cleaned_data["slug"], form.settings()
            )
        except InvalidInput as exc:
            form.add_error("slug", str(exc))
        else:
            messages.success(request, f"Created {project.name}.")
            return redirect("releases:project_members", slug=project.slug)
    return _list(request, form, 400)


@require_http_methods(["GET", "POST"])
def project_settings(request: HttpRequest, slug: str) -> HttpResponse:
    rules.check_manage_projects(request.user)
    project = selectors.get_project(slug)
    form = ProjectForm.of(project, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        services.update_settings(request.user, project, form.settings())
        messages.success(request, f"Saved the settings of {project.name}.")
        return redirect("releases:project_settings", slug=project.slug)
    status = 400 if form.errors else 200
    return render(
        request, "releases/project_settings.html", {"project": project, "form": form}, status=status
    )


def _members(request, project, form: MemberForm, status: int = 200, error: str = ""):
    context = {
        "project": project,
        "members": selectors.members(project),
        "form": form,
        "role_choices": ROLE_CHOICES,
        "error": error,
    }
    template = "releases/partials/project_members.html" if _is_htmx(request) else None
    return render(request, template or "releases/project_members.html", context, status=status)


@require_GET
def project_members(request: HttpRequest, slug: str) -> HttpResponse:
    project = selectors.project_for_members(request.user, slug)
    return _members(request, project, MemberForm())


@require_POST
def member_roles(request: HttpRequest, slug: str) -> HttpResponse:
    """Add a member, change their roles (the roles given replace theirs), or remove them (no
    role); ``add`` adds the roles to those they hold."""
    project = selectors.project_for_members(request.user, slug)
    form = MemberForm(request.POST)
    if not form.is_valid():
        return _members(request, project, form, 400)
    username, chosen = form.cleaned_data["username"], form.cleaned_data["roles"]
    try:
        if request.POST.get("add"):
            services.add_roles(request.user, project, username, chosen)
        else:
            services.set_roles(request.user, project, username, chosen)
    except InvalidInput as exc:
        # htmx swaps 200 answers only: the card says why.
        return _members(request, project, form, 200 if _is_htmx(request) else 400, str(exc))
    if _is_htmx(request):
        return _members(request, project, MemberForm())
    messages.success(request, f"Saved the roles of {username} in {project.name}.")
    return redirect("releases:project_members", slug=project.slug)


@require_POST
def dataset_move(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = selectors.dataset_for_move(request.user, dataset_id)
    form = MoveForm(request.POST)
    if not form.is_valid():
        return error_page(request, "Name the project to move it to.", 400)
    target = selectors.project_named(form.cleaned_data["project"])
    try:
        services.move_dataset(request.user, dataset, target)
    except InvalidInput as exc:
        return error_page(request, str(exc), 400)
    messages.success(request, f"Moved {dataset.name} to {target.name}.")
    return redirect("releases:project_list")
