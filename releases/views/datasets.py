"""Dataset pages: the home page, upload, tagging, and making a release request."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ..forms import ReleaseRequestForm, UploadForm
from ..models import Role
from ..services import InvalidInput, datasets
from ._common import is_htmx as _is_htmx


@require_http_methods(["GET", "POST"])
def dataset_list(request: HttpRequest) -> HttpResponse:
    form = UploadForm()
    status = 200
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                dataset = datasets.create_dataset(
                    request.user, form.cleaned_data["file"], form.cleaned_data["name"]
                )
            except InvalidInput as exc:
                form.add_error("file", str(exc))
            else:
                messages.success(request, f"Uploaded {dataset.name}: {dataset.row_count} rows.")
                return redirect("releases:dataset_detail", dataset_id=dataset.pk)
        status = 400
    return render(
        request,
        "releases/dataset_list.html",
        {"form": form, "datasets": datasets.datasets_for(request.user)},
        status=status,
    )


def dataset_context(dataset, request_form=None) -> dict:
    return {
        "dataset": dataset,
        "columns": list(dataset.columns.all()),
        "roles": Role.choices,
        "request_form": request_form or ReleaseRequestForm(),
        "requests": dataset.requests.select_related("requested_by")[:20],
    }


@require_GET
def dataset_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    return render(request, "releases/dataset_detail.html", dataset_context(dataset))


def _apply_column(request: HttpRequest, dataset, column) -> None:
    """Apply one column's fields from a tagging form post."""
    role = request.POST.get(f"role-{column.pk}")
    if role is not None:
        datasets.set_column_role(request.user, dataset, column.pk, role)
    uploaded = request.FILES.get(f"hierarchy-{column.pk}")
    if uploaded is not None:
        datasets.set_hierarchy_file(request.user, dataset, column.pk, uploaded)
    elif request.POST.get(f"automatic-{column.pk}"):
        datasets.use_automatic_hierarchy(request.user, dataset, column.pk)


@require_POST
def tagging(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """The plain-form path: every column's role and hierarchy in one post."""
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    errors = []
    for column in dataset.columns.all():
        try:
            _apply_column(request, dataset, column)
        except InvalidInput as exc:
            errors.append(str(exc))
    for error in errors:
        messages.error(request, error)
    if not errors:
        messages.success(request, "Tagging saved.")
    return redirect("releases:dataset_detail", dataset_id=dataset.pk)


@require_POST
def column_update(request: HttpRequest, dataset_id: int, column_id: int) -> HttpResponse:
    """The htmx path: one column changed in place; answers with its table row."""
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    column = dataset.columns.filter(pk=column_id).first()
    if column is None:
        return HttpResponse(status=404)
    error = ""
    try:
        _apply_column(request, dataset, column)
    except InvalidInput as exc:
        error = str(exc)
    if not _is_htmx(request):
        if error:
            messages.error(request, error)
        return redirect("releases:dataset_detail", dataset_id=dataset.pk)
    column.refresh_from_db()
    return render(
        request,
        "releases/dataset_detail.html#column-row",
        {"dataset": dataset, "column": column, "roles": Role.choices, "error": error},
    )
