"""Dataset pages: upload, profiling progress, column profiles, tagging, hierarchies, deletion."""

from __future__ import annotations

import io

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import F
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import selectors, statistics_selectors
from ..engine import HierarchyError
from ..forms import ReleaseRequestForm, UploadForm
from ..models import DatasetColumn, Role
from ..models.datasets import ColumnType, DateOrder
from ..services import InvalidInput, datasets, hierarchies, recovery, roles
from ._common import is_htmx as _is_htmx

# Multipart framing and the other fields around the file.
UPLOAD_OVERHEAD_BYTES = 64 * 1024


def _list_context(form, upload_error: str = "") -> dict:
    return {
        "form": form,
        "upload_error": upload_error,
        "max_upload_bytes": settings.MAX_UPLOAD_BYTES,
        "limit_message": datasets.limit_message(),
    }


@require_http_methods(["GET", "POST"])
def dataset_list(request: HttpRequest) -> HttpResponse:
    form = UploadForm()
    status = 200
    upload_error = ""
    if request.method == "POST":
        roles.require(request.user, roles.STEWARDS, "upload datasets")
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > settings.MAX_UPLOAD_BYTES + UPLOAD_OVERHEAD_BYTES:
            # Refused before the body is read: the file never reaches the disk.
            upload_error = datasets.refuse_oversized_upload(request.user, length)
        else:
            form = UploadForm(request.POST, request.FILES)
        if form.is_bound and form.is_valid():
            try:
                dataset = datasets.create_dataset(
                    request.user,
                    form.cleaned_data["file"],
                    form.cleaned_data["name"],
                    form.cleaned_data["sheet"],
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


def _decorate(column: DatasetColumn) -> DatasetColumn:
    """Attach what the column's rows show besides the model's fields."""
    column.distinct_percent = round(100 * column.distinct_share, 1)
    share = column.unique_row_share
    column.unique_row_percent = None if share is None else round(100 * share, 1)
    params = column.hierarchy_params or {}
    column.widths_text = ", ".join(
        str(int(w)) if float(w).is_integer() else str(w) for w in params.get("widths") or []
    )
    column.dayfirst = params.get("dayfirst", hierarchies.dayfirst_default(column))
    return column


# The choices every column row offers.
COLUMN_CHOICES = {
    # No role is the default and withholds the column; every role is an explicit choice.
    "roles": [("", "— choose a role (withheld until then) —"), *Role.choices],
    "column_types": ColumnType.choices,
    "date_orders": DateOrder.choices,
    "builders": hierarchies.BUILDERS,
}


def _column_context(dataset, column, **extra) -> dict:
    return {"dataset": dataset, "column": _decorate(column), **COLUMN_CHOICES, **extra}


#: Columns shown on one page of a dataset (a file may have thousands).
COLUMNS_PER_PAGE = 50


#: Columns without a role named on the request form (the rest are counted).
UNROLED_SHOWN = 20


def unroled_columns(dataset) -> tuple[int, list]:
    """How many columns are still without a role (on any page), and the first of them, each
    with the page it is shown on."""
    unroled = dataset.columns.filter(role="").order_by("position")
    count = unroled.count()
    columns = list(unroled.only("pk", "name", "position")[:UNROLED_SHOWN])
    if columns:
        order = {
            pk: i
            for i, pk in enumerate(
                dataset.columns.order_by("position").values_list("pk", flat=True)
            )
        }
        for column in columns:
            column.page_number = order[column.pk] // COLUMNS_PER_PAGE + 1
    return count, columns


def suggestions_pending(dataset) -> int:
    """How many columns have a suggested role other than their role (or none yet)."""
    return dataset.columns.exclude(suggested_role="").exclude(suggested_role=F("role")).count()


def dataset_context(dataset, request_form=None, page_number=None) -> dict:
    """The dataset page: one page of its columns (and of the preview's cells), the rest
    behind a pager, so a file of thousands of columns renders as fast as one of ten."""
    page = Paginator(dataset.columns.order_by("position"), COLUMNS_PER_PAGE).get_page(page_number)
    for column in page:
        _decorate(column)
    first = (page.number - 1) * COLUMNS_PER_PAGE
    unroled_count, unroled = unroled_columns(dataset)
    return {
        "dataset": dataset,
        "columns": page,
        "page": page,
        "column_count": page.paginator.count,
        "preview": [row[first : first + COLUMNS_PER_PAGE] for row in dataset.preview or []],
        "unroled": unroled,
        "unroled_count": unroled_count,
        **COLUMN_CHOICES,
        "request_form": request_form or ReleaseRequestForm(dataset=dataset),
        "requests": dataset.requests.select_related("requested_by")[:20],
        "suggestions_pending": suggestions_pending(dataset),
        # The privacy budget and ledger (the steward sees them; officers set the budget).
        **statistics_selectors.budget_context(None, dataset),
    }


@require_GET
def dataset_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    context = dataset_context(dataset, page_number=request.GET.get("page"))
    context["waiting_for_queue"] = recovery.dataset_waiting_for_queue(dataset)
    return render(request, "releases/dataset_detail.html", context)


@require_GET
def dataset_status(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """Polled while the file is read and profiled; reloads the page once it is final."""
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    # The page polling a dataset resolves its lost worker or message (not only beat).
    if recovery.check_dataset(dataset):
        dataset.refresh_from_db()
    if dataset.is_final and _is_htmx(request):
        return HttpResponse(status=200, headers={"HX-Refresh": "true"})
    return render(
        request,
        "releases/partials/dataset_status.html",
        {"dataset": dataset, "waiting_for_queue": recovery.dataset_waiting_for_queue(dataset)},
    )


@require_GET
def dataset_risk(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    error = ""
    try:
        risk = datasets.reidentification_risk(dataset)
    except InvalidInput as exc:
        risk, error = {}, str(exc)
    return render(
        request,
        "releases/partials/dataset_risk.html",
        {"dataset": dataset, "risk": risk, "error": error},
    )


@require_POST
def dataset_delete(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    name = dataset.name
    try:
        datasets.delete_dataset(request.user, dataset)
    except InvalidInput as exc:
        messages.error(request, str(exc))
        return redirect("releases:dataset_detail", dataset_id=dataset.pk)
    messages.success(request, f"Deleted {name}.")
    return redirect("releases:dataset_list")


@require_POST
def accept_suggestions(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    try:
        changed = datasets.accept_suggestions(request.user, dataset)
    except InvalidInput as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Accepted the suggested roles ({changed} columns changed).")
    return redirect(reverse("releases:dataset_detail", args=[dataset.pk]) + "#tagging")


@require_GET
def suggestions(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """The note on the suggested roles, fetched again after each role change (htmx)."""
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    if not _is_htmx(request):
        return redirect(reverse("releases:dataset_detail", args=[dataset.pk]) + "#tagging")
    return render(
        request,
        "releases/dataset_detail.html#suggestions",
        {"dataset": dataset, "suggestions_pending": suggestions_pending(dataset)},
    )


def _apply_column(request: HttpRequest, dataset, column) -> list[str]:
    """Apply one column's fields from an htmx post (one change at a time); the warnings of
    an uploaded hierarchy."""
    role = request.POST.get(f"role-{column.pk}")
    if role is not None:
        datasets.set_column_role(request.user, dataset, column.pk, role)
    uploaded = request.FILES.get(f"hierarchy-{column.pk}")
    if uploaded is not None:
        return datasets.set_hierarchy_file(
            request.user, dataset, column.pk, uploaded
        ).hierarchy_warnings
    if request.POST.get(f"automatic-{column.pk}"):
        datasets.use_automatic_hierarchy(request.user, dataset, column.pk)
    return []


def _builder_params(request: HttpRequest, column) -> tuple[str, dict]:
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
    try:
        params = hierarchies.params_from(data, builder)
    except HierarchyError as exc:
        raise InvalidInput(str(exc)) from None
    return builder, params


@require_POST
def tagging(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """The plain-form path: every column's role and hierarchy in one post, saved all or none."""
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    changes = []
    for column in dataset.columns.all():
        builder, params, error = request.POST.get(f"builder-{column.pk}", ""), None, ""
        if builder and builder != DatasetColumn.HierarchySource.UPLOADED:
            try:
                builder, params = _builder_params(request, column)
            except InvalidInput as exc:
                error = str(exc)
        changes.append(
            datasets.ColumnChange(
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
        warnings = datasets.save_tagging(request.user, dataset, changes)
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


def _owned_column(request, dataset_id: int, column_id: int):
    dataset = datasets.get_dataset_for(request.user, dataset_id)
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
        datasets.set_column_type(
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
        datasets.set_declared_domain(
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
        datasets.set_hierarchy_builder(request.user, dataset, column.pk, builder, params)
    except InvalidInput as exc:
        error = str(exc)
    return _column_response(request, dataset, column, error)


@require_GET
def hierarchy_preview(request: HttpRequest, dataset_id: int, column_id: int) -> HttpResponse:
    """The levels the chosen builder makes on the column's actual values (htmx, live)."""
    dataset, column = _owned_column(request, dataset_id, column_id)
    if column is None:
        return HttpResponse(status=404)
    context = {"column": column, "error": "", "rows": [], "levels": []}
    try:
        datasets.ensure_ready(dataset)
        builder, params = _builder_params(request, column)
        if builder in ("", DatasetColumn.HierarchySource.UPLOADED):
            hierarchy = datasets.current_hierarchy(dataset, column)
        else:
            hierarchy = datasets.build_hierarchy(dataset, column, builder, params)
    except (InvalidInput, HierarchyError) as exc:
        context["error"] = str(exc)
    else:
        context["rows"] = hierarchies.preview_rows(hierarchy)
        context["levels"] = hierarchies.level_counts(hierarchy)
        context["height"] = hierarchy.height
        context["values"] = len(hierarchy.rows)
    return render(request, "releases/partials/column_hierarchy_preview.html", context)


@require_GET
def hierarchy_download(request: HttpRequest, dataset_id: int, column_id: int) -> HttpResponse:
    try:
        filename, content = datasets.hierarchy_download(request.user, dataset_id, column_id)
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
