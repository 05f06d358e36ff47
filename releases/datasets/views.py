"""Dataset pages: upload, profiling progress, column profiles, tagging, hierarchies, deletion."""

from __future__ import annotations

import io

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import FileResponse, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from releases.core import roles
from releases.core.errors import InvalidInput
from releases.core.http import is_htmx as _is_htmx
from releases.datasets import hierarchies, risk, rules, selectors, services, versions
from releases.datasets.forms import UploadForm
from releases.models import DatasetColumn
from releases.projects import selectors as project_selectors

# Multipart framing and the other fields around the file.
UPLOAD_OVERHEAD_BYTES = 64 * 1024


def _column_context(dataset, column, **extra) -> dict:
    return {
        "dataset": dataset,
        "column": selectors.decorate(column),
        **selectors.COLUMN_CHOICES,
        **extra,
    }


def _list_context(form, upload_error: str = "") -> dict:
    return {
        "form": form,
        "upload_error": upload_error,
        "max_upload_bytes": settings.MAX_UPLOAD_BYTES,
        "limit_message": services.limit_message(),
    }


@require_http_methods(["GET", "POST"])
def dataset_list(request: HttpRequest) -> HttpResponse:
    form = UploadForm(projects=project_selectors.steward_projects(request.user))
    status = 200
    upload_error = ""
    if request.method == "POST":
        roles.require(request.user, roles.STEWARDS, "upload datasets")
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > settings.MAX_UPLOAD_BYTES + UPLOAD_OVERHEAD_BYTES:
            # Refused before the body is read: the file never reaches the disk.
            upload_error = services.refuse_oversized_upload(request.user, length)
        else:
            form = UploadForm(
                request.POST,
                request.FILES,
                projects=project_selectors.steward_projects(request.user),
            )
        if form.is_bound and form.is_valid():
            try:
                dataset = services.create_dataset(
                    request.user,
                    form.cleaned_data["file"],
                    form.cleaned_data["name"],
                    form.cleaned_data["sheet"],
                    form.cleaned_data["project"],
                )
            except InvalidInput as exc:
                form.add_error("file", str(exc))
            else:
                messages.success(request, f"Uploaded {dataset.name}; reading and profiling it now.")
                url = reverse("releases:dataset_detail", args=[dataset.pk])
                if _is_htmx(request):
                    return HttpResponse(status=204, headers={"HX-Redirect": url})
                return redirect(url)
        status = 400
        if _is_htmx(request):
            # htmx swaps 200 answers only: the card with its error replaces the upload card.
            return render(
                request, "releases/partials/dataset_upload.html", _list_context(form, upload_error)
            )
    context = _list_context(form, upload_error)
    context["datasets"] = Paginator(selectors.datasets_for(request.user), 25).get_page(
        request.GET.get("page")
    )
    return render(request, "releases/dataset_list.html", context, status=status)


@require_GET
def dataset_status(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """Polled while the file is read and profiled; reloads the page once it is final (reads
    only: a lost worker or message is the sweeper's)."""
    dataset = selectors.get_dataset_for(request.user, dataset_id, to_change=False)
    if dataset.is_final and _is_htmx(request):
        return HttpResponse(status=200, headers={"HX-Refresh": "true"})
    return render(
        request,
        "releases/partials/dataset_status.html",
        {
            "dataset": dataset,
            "waiting_for_queue": selectors.waiting_for_queue(dataset),
            "stalled": selectors.stalled(dataset),
        },
    )


@require_GET
def dataset_risk(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = selectors.get_dataset_for(request.user, dataset_id, to_change=False)
    error = ""
    try:
        panel = risk.reidentification_risk(dataset)
    except InvalidInput as exc:
        panel, error = {}, str(exc)
    return render(
        request,
        "releases/partials/dataset_risk.html",
        {"dataset": dataset, "risk": panel, "error": error},
    )


@require_POST
def dataset_delete(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = selectors.get_dataset_for(request.user, dataset_id)
    name = dataset.name
    try:
        services.delete_dataset(request.user, dataset)
    except InvalidInput as exc:
        messages.error(request, str(exc))
        return redirect("releases:dataset_detail", dataset_id=dataset.pk)
    messages.success(request, f"Deleted {name}.")
    return redirect("releases:dataset_list")


@require_POST
def accept_suggestions(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = selectors.get_dataset_for(request.user, dataset_id)
    try:
        changed = services.accept_suggestions(request.user, dataset)
    except InvalidInput as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Accepted the suggested roles ({changed} columns changed).")
    return redirect(reverse("releases:dataset_detail", args=[dataset.pk]) + "#tagging")


@require_GET
def suggestions(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """The note on the suggested roles, fetched again after each role change (htmx)."""
    dataset = selectors.get_dataset_for(request.user, dataset_id, to_change=False)
    if not _is_htmx(request):
        return redirect(reverse("releases:dataset_detail", args=[dataset.pk]) + "#tagging")
    return render(
        request,
        "releases/dataset_detail.html#suggestions",
        {
            "dataset": dataset,
            "suggestions_pending": selectors.suggestions_pending(dataset),
            "read_only": not rules.can_change(request.user, dataset),
        },
    )


def _apply_column(request: HttpRequest, dataset, column) -> list[str]:
    """Apply one column's fields from an htmx post (one change at a time); the warnings of
    an uploaded hierarchy."""
    role = request.POST.get(f"role-{column.pk}")
    if role is not None:
        services.set_column_role(request.user, dataset, column.pk, role)
    uploaded = request.FILES.get(f"hierarchy-{column.pk}")
    if uploaded is not None:
        return services.set_hierarchy_file(
            request.user, dataset, column.pk, uploaded
        ).hierarchy_warnings
    if request.POST.get(f"automatic-{column.pk}"):
        services.use_automatic_hierarchy(request.user, dataset, column.pk)
    return []


def _builder_fields(request: HttpRequest, column) -> tuple[str, dict]:
    """The builder chosen for ``column`` and its parameters' fields, as posted (or asked)."""
    data = {
        "widths": request.POST.get(
            f"widths-{column.pk}", request.GET.get(f"widths-{column.pk}", "")
        ),
        "dayfirst": request.POST.get(
            f"dayfirst-{column.pk}", request.GET.get(f"dayfirst-{column.pk}")
        ),
    }
    builder = request.POST.get(f"builder-{column.pk}") or request.GET.get(
        f"builder-{column.pk}", ""
    )
    return builder, data


def _builder_params(request: HttpRequest, column) -> tuple[str, dict]:
    builder, data = _builder_fields(request, column)
    return builder, hierarchies.params_from(data, builder)


@require_POST
def tagging(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """The plain-form path: every column's role and hierarchy in one post, saved all or none."""
    dataset = selectors.get_dataset_for(request.user, dataset_id)
    changes = []
    for column in dataset.columns.all():
        builder, params, error = request.POST.get(f"builder-{column.pk}", ""), None, ""
        if builder and builder != DatasetColumn.HierarchySource.UPLOADED:
            try:
                builder, params = _builder_params(request, column)
            except InvalidInput as exc:
                error = str(exc)
        changes.append(
            services.ColumnChange(
                column_id=column.pk,
                role=request.POST.get(f"role-{column.pk}"),
                hierarchy_file=request.FILES.get(f"hierarchy-{column.pk}"),
                automatic=bool(request.POST.get(f"automatic-{column.pk}")),
                builder=builder,
                builder_params=params,
                builder_error=error,
                declared_domain=request.POST.get(f"domain-{column.pk}"),
            )
        )
    try:
        warnings = services.save_tagging(request.user, dataset, changes)
    except InvalidInput as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Tagging saved.")
        for warning in warnings:
            messages.warning(request, warning)
    return redirect("releases:dataset_detail", dataset_id=dataset.pk)


def _column_response(
    request, dataset, column, error: str = "", warnings: list[str] | None = None
) -> HttpResponse:
    if not _is_htmx(request):
        if error:
            messages.error(request, error)
        for warning in warnings or []:
            messages.warning(request, warning)
        return redirect(
            reverse("releases:dataset_detail", args=[dataset.pk]) + f"#column-{column.pk}"
        )
    column.refresh_from_db()
    response = render(
        request,
        "releases/partials/dataset_column_row.html",
        _column_context(dataset, column, error=error, hierarchy_warnings=warnings or []),
    )
    response["HX-Trigger"] = "roles-changed"
    return response


def _owned_column(request, dataset_id: int, column_id: int, *, to_change: bool = True):
    dataset = selectors.get_dataset_for(request.user, dataset_id, to_change=to_change)
    return dataset, dataset.columns.filter(pk=column_id).first()


@require_POST
def column_update(request: HttpRequest, dataset_id: int, column_id: int) -> HttpResponse:
    """The htmx path: one column changed in place; answers with its rows."""
    dataset, column = _owned_column(request, dataset_id, column_id)
    if column is None:
        return HttpResponse(status=404)
    error, warnings = "", []
    try:
        warnings = _apply_column(request, dataset, column)
    except InvalidInput as exc:
        error = str(exc)
    return _column_response(request, dataset, column, error, warnings)


@require_POST
def column_type(request: HttpRequest, dataset_id: int, column_id: int) -> HttpResponse:
    dataset, column = _owned_column(request, dataset_id, column_id)
    if column is None:
        return HttpResponse(status=404)
    error = ""
    try:
        services.set_column_type(
            request.user,
            dataset,
            column.pk,
            request.POST.get(f"type-{column.pk}", ""),
            request.POST.get(f"date-order-{column.pk}", ""),
        )
    except InvalidInput as exc:
        error = str(exc)
    return _column_response(request, dataset, column, error)


@require_POST
def column_domain(request: HttpRequest, dataset_id: int, column_id: int) -> HttpResponse:
    """Declare the column's values (public knowledge statistics may publish as labels)."""
    dataset, column = _owned_column(request, dataset_id, column_id)
    if column is None:
        return HttpResponse(status=404)
    error = ""
    try:
        services.set_declared_domain(
            request.user, dataset, column.pk, request.POST.get(f"domain-{column.pk}", "")
        )
    except InvalidInput as exc:
        error = str(exc)
    return _column_response(request, dataset, column, error)


@require_POST
def column_hierarchy(request: HttpRequest, dataset_id: int, column_id: int) -> HttpResponse:
    """Save the chosen builder's hierarchy, materialized on the column's values."""
    dataset, column = _owned_column(request, dataset_id, column_id)
    if column is None:
        return HttpResponse(status=404)
    error = ""
    try:
        builder, params = _builder_params(request, column)
        services.set_hierarchy_builder(request.user, dataset, column.pk, builder, params)
    except InvalidInput as exc:
        error = str(exc)
    return _column_response(request, dataset, column, error)


@require_GET
def hierarchy_preview(request: HttpRequest, dataset_id: int, column_id: int) -> HttpResponse:
    """The levels the chosen builder makes on the column's actual values (htmx, live)."""
    dataset, column = _owned_column(request, dataset_id, column_id, to_change=False)
    if column is None:
        return HttpResponse(status=404)
    builder, data = _builder_fields(request, column)
    context = selectors.hierarchy_preview(dataset, column, builder, data)
    return render(request, "releases/partials/column_hierarchy_preview.html", context)


@require_GET
def hierarchy_download(request: HttpRequest, dataset_id: int, column_id: int) -> HttpResponseBase:
    try:
        filename, content = services.hierarchy_download(request.user, dataset_id, column_id)
    except InvalidInput as exc:
        return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8")
    response = FileResponse(
        io.BytesIO(content),
        as_attachment=True,
        filename=filename,
        content_type="text/csv; charset=utf-8",
    )
    response["X-Content-Type-Options"] = "nosniff"
    return response


# --- Versions ---------------------------------------------------------------------------------


@require_POST
def version_upload(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """Upload the next version of a dataset (with the upload's bounds)."""
    dataset = selectors.get_dataset_for(request.user, dataset_id)
    back = reverse("releases:dataset_detail", args=[dataset.pk]) + "#versions"
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    if length > settings.MAX_UPLOAD_BYTES + UPLOAD_OVERHEAD_BYTES:
        messages.error(request, services.refuse_oversized_upload(request.user, length))
        return redirect(back)
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return redirect(back)
    try:
        version = services.create_version(
            request.user, dataset, form.cleaned_data["file"], form.cleaned_data["sheet"]
        )
    except InvalidInput as exc:
        messages.error(request, str(exc))
        return redirect(back)
    messages.success(
        request, f"Uploaded version {version.version} of {version.name}; profiling it now."
    )
    return redirect("releases:dataset_detail", dataset_id=version.pk)


@require_POST
def key_column(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """Pick the lineage's key column (never released; links the versions' rows)."""
    dataset = selectors.get_dataset_for(request.user, dataset_id)
    try:
        versions.set_key_column(request.user, dataset, request.POST.get("key_column", ""))
    except InvalidInput as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Saved the key column of this dataset's versions.")
    return redirect(reverse("releases:dataset_detail", args=[dataset.pk]) + "#versions")
