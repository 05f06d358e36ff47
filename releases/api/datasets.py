"""Datasets over the API: upload (streamed, with the page's bounds), list, detail with status
and profile, columns and their roles, hierarchies. Calls what the dataset pages call."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Query, Router, Status

from releases.api.common import ERRORS, page, refused_as, user_of
from releases.api.problems import ApiError, Problem, first_error, form_errors
from releases.api.schemas import (
    ColumnOut,
    ColumnPage,
    DatasetDetail,
    DatasetOut,
    DatasetPage,
    HierarchyOut,
    KeyColumnIn,
    PageParams,
    RegisterIn,
    RolesIn,
)
from releases.core import roles
from releases.core.errors import InvalidInput
from releases.datasets import registration, selectors, services, versions
from releases.datasets.forms import UploadForm
from releases.models import Dataset, DatasetColumn, Role
from releases.projects import selectors as project_selectors

router = Router(tags=["datasets"])

#: Multipart framing and the other fields around a file (as the upload page allows).
UPLOAD_OVERHEAD_BYTES = 64 * 1024

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "name": {"type": "string", "maxLength": 255},
                        "sheet": {"type": "string", "maxLength": 255},
                    },
                }
            }
        },
    }
}

HIERARCHY_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "automatic": {"type": "boolean"},
                    },
                }
            }
        },
    }
}


def dataset_out(dataset: Dataset) -> dict[str, Any]:
    return {
        "id": dataset.pk,
        "name": dataset.name,
        "filename": dataset.original_filename,
        "format": dataset.file_format,
        "status": dataset.status,
        "stage": dataset.stage,
        "progress": dataset.progress,
        "error": dataset.error,
        "rows": dataset.row_count,
        "size_bytes": dataset.size_bytes,
        "sha256": dataset.sha256,
        "created_at": dataset.created_at,
        "profiled_at": dataset.profiled_at,
        "version": dataset.version,
        "previous_id": dataset.previous_id,
        "lineage_id": dataset.lineage_id,
        "key_column": dataset.key_column,
    }


def column_out(column: DatasetColumn) -> dict[str, Any]:
    return {
        "id": column.pk,
        "position": column.position,
        "name": column.name,
        "role": column.role,
        "suggested_role": column.suggested_role,
        "suggestion_reason": column.suggestion_reason,
        "type": column.type_override or column.inferred_type,
        "distinct_values": column.distinct_values,
        "missing_count": column.missing_count,
        "hierarchy_source": column.hierarchy_source,
        "hierarchy_filename": column.hierarchy_filename,
        "hierarchy_levels": column.hierarchy_height,
        "profile": column.profile or {},
    }


def hierarchy_out(column: DatasetColumn) -> dict[str, Any]:
    return {
        "column_id": column.pk,
        "column": column.name,
        "role": column.role,
        "source": column.hierarchy_source,
        "filename": column.hierarchy_filename,
        "levels": column.hierarchy_height,
    }


@router.get("", response={200: DatasetPage, ERRORS: Problem})
def list_datasets(request: HttpRequest, params: Query[PageParams]):
    """The caller's datasets, newest first (data stewards)."""
    return page(selectors.datasets_for(user_of(request)), params, dataset_out)


@router.post("", response={201: DatasetOut, ERRORS | {413}: Problem}, openapi_extra=UPLOAD_BODY)
def upload_dataset(request: HttpRequest):
    """Upload a file (multipart field ``file``; ``name`` and ``sheet`` optional). It is read
    and profiled by a worker: poll the dataset until its status is ``ready``."""
    user = user_of(request)
    roles.require(user, roles.STEWARDS, "upload datasets")
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    if length > settings.MAX_UPLOAD_BYTES + UPLOAD_OVERHEAD_BYTES:
        # Refused before the body is read: the file never reaches the disk.
        raise ApiError(413, services.refuse_oversized_upload(user, length))
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        errors = form_errors(form)
        raise ApiError(400, first_error(errors), errors)
    with refused_as(400):
        dataset = services.create_dataset(
            user,
            form.cleaned_data["file"],
            form.cleaned_data["name"],
            form.cleaned_data["sheet"],
            form.cleaned_data["project"],
        )
    return Status(201, dataset_out(dataset))


@router.post("/register", response={201: DatasetOut, ERRORS: Problem})
def register_dataset(request: HttpRequest, body: RegisterIn):
    """Register a source that stays where it is, as the caller's dataset: an object in a bucket
    the administrators allow, a table or single SELECT of a database they named, or (site
    administrators only) a file in an allowed server folder. The same checks as an upload;
    a worker profiles it in place: poll the dataset until its status is ``ready``."""
    user = user_of(request)
    roles.require(user, roles.STEWARDS, "register datasets")
    with refused_as(400):
        project = project_selectors.upload_project(user, body.project.strip())
        dataset = registration.register_dataset(user, body.source, project.slug, user, body.name)
    return Status(201, dataset_out(dataset))


@router.get("/{dataset_id}", response={200: DatasetDetail, ERRORS: Problem})
def dataset_detail(request: HttpRequest, dataset_id: int):
    """A dataset's status (uploaded, profiling, ready or failed, with the reason) and size."""
    dataset = selectors.get_dataset_for(user_of(request), dataset_id, to_change=False)
    changes = dataset.schema_changes or {}
    try:
        versions.check_request(dataset)
        blocked = ""
    except InvalidInput as exc:
        blocked = str(exc)
    return {
        **dataset_out(dataset),
        "columns": dataset.columns.count(),
        "columns_without_role": dataset.columns.filter(role="").count(),
        "new_columns": changes.get("new", []),
        "missing_columns": changes.get("missing", []),
        "retyped_columns": [r["name"] for r in changes.get("retyped", [])],
        "schema_changes": versions.change_messages(dataset),
        "request_blocked": blocked,
    }


@router.post(
    "/{dataset_id}/versions",
    response={201: DatasetOut, ERRORS | {413}: Problem},
    openapi_extra=UPLOAD_BODY,
)
def upload_version(request: HttpRequest, dataset_id: int):
    """Upload the next version of a dataset (multipart field ``file``; ``sheet`` optional),
    with the upload's bounds. Once profiled, it keeps the previous version's roles,
    hierarchies, types and declared values; poll it, then read its schema changes."""
    user = user_of(request)
    dataset = selectors.get_dataset_for(user, dataset_id)
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    if length > settings.MAX_UPLOAD_BYTES + UPLOAD_OVERHEAD_BYTES:
        raise ApiError(413, services.refuse_oversized_upload(user, length))
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        errors = form_errors(form)
        raise ApiError(400, first_error(errors), errors)
    with refused_as(400):
        version = services.create_version(
            user, dataset, form.cleaned_data["file"], form.cleaned_data["sheet"]
        )
    return Status(201, dataset_out(version))


@router.get("/{dataset_id}/versions", response={200: DatasetPage, ERRORS: Problem})
def list_versions(request: HttpRequest, dataset_id: int, params: Query[PageParams]):
    """Every version of the dataset's lineage, newest first."""
    dataset = selectors.get_dataset_for(user_of(request), dataset_id, to_change=False)
    return page(versions.lineage(dataset), params, dataset_out)


@router.put("/{dataset_id}/key-column", response={200: DatasetOut, ERRORS: Problem})
def set_key_column(request: HttpRequest, dataset_id: int, body: KeyColumnIn):
    """Pick the lineage's key column (a column of every version; "" for none). It is never
    released; the cross-release check links the versions' rows by it."""
    user = user_of(request)
    dataset = selectors.get_dataset_for(user, dataset_id)
    with refused_as(400):
        dataset = versions.set_key_column(user, dataset, body.column)
    return dataset_out(dataset)


@router.get("/{dataset_id}/columns", response={200: ColumnPage, ERRORS: Problem})
def list_columns(request: HttpRequest, dataset_id: int, params: Query[PageParams]):
    """The columns in file order, each with its role, suggested role and profile."""
    dataset = selectors.get_dataset_for(user_of(request), dataset_id, to_change=False)
    return page(dataset.columns.order_by("position"), params, column_out)


@router.patch("/{dataset_id}/columns", response={200: list[ColumnOut], ERRORS: Problem})
def set_roles(request: HttpRequest, dataset_id: int, body: RolesIn):
    """Give columns (by name) their roles, all or none (as the tagging form saves them)."""
    user = user_of(request)
    dataset = selectors.get_dataset_for(user, dataset_id)
    by_name = {c.name: c for c in dataset.columns.all()}
    unknown = [name for name in body.roles if name not in by_name]
    if unknown:
        raise ApiError(400, f"No column named {', '.join(map(repr, unknown))} in this dataset.")
    changes = [
        services.ColumnChange(column_id=by_name[name].pk, role=role)
        for name, role in body.roles.items()
    ]
    with refused_as(400):
        services.save_tagging(user, dataset, changes)
    changed = dataset.columns.filter(name__in=list(body.roles)).order_by("position")
    return [column_out(c) for c in changed]


@router.get("/{dataset_id}/hierarchies", response={200: list[HierarchyOut], ERRORS: Problem})
def list_hierarchies(request: HttpRequest, dataset_id: int):
    """Each quasi-identifier's hierarchy: automatic, uploaded (its file name) or built."""
    dataset = selectors.get_dataset_for(user_of(request), dataset_id, to_change=False)
    return [
        hierarchy_out(c)
        for c in dataset.columns.order_by("position")
        if c.role == Role.QUASI_IDENTIFIER
    ]


@router.post(
    "/{dataset_id}/columns/{column_id}/hierarchy",
    response={200: HierarchyOut, ERRORS | {413}: Problem},
    openapi_extra=HIERARCHY_BODY,
)
def attach_hierarchy(request: HttpRequest, dataset_id: int, column_id: int):
    """Attach an ARX-format hierarchy (multipart field ``file``), or go back to the automatic
    one (``automatic=true``). The file is checked against the column's values."""
    user = user_of(request)
    dataset = selectors.get_dataset_for(user, dataset_id)
    column = dataset.columns.filter(pk=column_id).first()
    if column is None:
        raise ApiError(404, "No such column.")
    if int(request.META.get("CONTENT_LENGTH") or 0) > (
        settings.MAX_HIERARCHY_BYTES + UPLOAD_OVERHEAD_BYTES
    ):
        raise ApiError(
            413,
            f"A hierarchy file may be at most {settings.MAX_HIERARCHY_BYTES / 1024**2:.0f} MB "
            "(MAX_HIERARCHY_BYTES).",
        )
    uploaded = request.FILES.get("file")
    with refused_as(400):
        if uploaded is not None:
            column = services.set_hierarchy_file(user, dataset, column.pk, uploaded)
        elif request.POST.get("automatic", "").lower() in ("1", "true", "on", "yes"):
            column = services.use_automatic_hierarchy(user, dataset, column.pk)
        else:
            raise ApiError(400, "Send the hierarchy as the file field, or automatic=true.")
    return hierarchy_out(column)
