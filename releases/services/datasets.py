"""Datasets: upload, access, and tagging of columns with roles and hierarchies."""

from __future__ import annotations

from pathlib import PurePath

import pandas as pd
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.http import Http404

from ..engine import Hierarchy, HierarchyError
from ..models import AuditEvent, Dataset, DatasetColumn, Role
from . import InvalidInput, audit, roles, storage
from .tabular import TableFormat, read_table

PREVIEW_ROWS = 10


def datasets_for(user) -> QuerySet[Dataset]:
    """The datasets a steward owns, newest first, with their request counts."""
    roles.require(user, roles.STEWARDS, "see datasets")
    return Dataset.objects.filter(owner=user).annotate(
        request_count=Count("requests"),
        quasi_count=Count("columns", filter=Q(columns__role=Role.QUASI_IDENTIFIER)),
    )


def get_dataset_for(user, dataset_id: int) -> Dataset:
    """A dataset its owner may see and change; anyone else's is out of reach (404)."""
    roles.require(user, roles.STEWARDS, "work with datasets")
    try:
        return Dataset.objects.get(pk=dataset_id, owner=user)
    except Dataset.DoesNotExist:
        raise Http404("No such dataset.") from None


def create_dataset(user, uploaded: UploadedFile, name: str = "") -> Dataset:
    """Validate and store an uploaded CSV; nothing is stored when it is rejected."""
    roles.require(user, roles.STEWARDS, "upload datasets")
    filename = PurePath(uploaded.name or "upload.csv").name
    try:
        if uploaded.size is not None and uploaded.size > settings.MAX_UPLOAD_BYTES:
            limit_mb = settings.MAX_UPLOAD_BYTES / 1024 / 1024
            raise InvalidInput(f"The file is larger than the {limit_mb:.0f} MB limit.")
        raw = uploaded.read()
        frame, fmt = read_table(raw)
    except InvalidInput as exc:
        audit.record(AuditEvent.Action.UPLOAD_REJECTED, user, filename=filename, reason=str(exc))
        raise
    digest = storage.sha256_hex(raw)
    path = storage.save_bytes("datasets", ".csv", raw)
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(
                owner=user,
                name=(name or "").strip() or filename,
                original_filename=filename,
                file_path=path,
                sha256=digest,
                size_bytes=len(raw),
                encoding=fmt.encoding,
                delimiter=fmt.delimiter,
                row_count=len(frame),
                preview=frame.head(PREVIEW_ROWS).values.tolist(),
            )
            distinct = frame.nunique(dropna=False)
            DatasetColumn.objects.bulk_create(
                DatasetColumn(
                    dataset=dataset,
                    position=position,
                    name=column,
                    distinct_values=int(distinct[column]),
                )
                for position, column in enumerate(frame.columns)
            )
            audit.record(
                AuditEvent.Action.UPLOAD,
                user,
                dataset=dataset,
                filename=filename,
                sha256=digest,
                rows=len(frame),
                columns=len(frame.columns),
            )
    except BaseException:
        # The record did not commit: do not leave its file behind.
        storage.delete_quietly(path)
        raise
    return dataset


def load_frame(dataset: Dataset) -> pd.DataFrame:
    """The dataset's rows as strings, read back from the stored original file."""
    raw = storage.read_bytes(dataset.file_path)
    if storage.sha256_hex(raw) != dataset.sha256:
        raise InvalidInput("The stored dataset file does not match its recorded SHA-256.")
    frame, _ = read_table(raw, TableFormat(encoding=dataset.encoding, delimiter=dataset.delimiter))
    return frame


def _column(dataset: Dataset, column_id: int) -> DatasetColumn:
    try:
        return dataset.columns.get(pk=column_id)
    except DatasetColumn.DoesNotExist:
        raise Http404("No such column.") from None


def set_column_role(user, dataset: Dataset, column_id: int, role: str) -> DatasetColumn:
    """Change one column's role (identifier, quasi-identifier, sensitive or insensitive)."""
    dataset = get_dataset_for(user, dataset.pk)
    column = _column(dataset, column_id)
    if role not in Role.values:
        raise InvalidInput(f"Unknown role {role!r}.")
    if column.role != role:
        previous = column.role
        with transaction.atomic():
            column.role = role
            column.save(update_fields=["role"])
            audit.record(
                AuditEvent.Action.TAGGING,
                user,
                dataset=dataset,
                column=column.name,
                role=role,
                previous_role=previous,
            )
    return column


def set_hierarchy_file(user, dataset: Dataset, column_id: int, uploaded: UploadedFile) -> DatasetColumn:
    """Attach an ARX-format hierarchy to a column after checking it covers the column's values."""
    dataset = get_dataset_for(user, dataset.pk)
    column = _column(dataset, column_id)
    raw = uploaded.read()
    if len(raw) > 20 * 1024 * 1024:
        raise InvalidInput("A hierarchy file may be at most 20 MB.")
    try:
        hierarchy = Hierarchy.from_arx_csv(raw, attribute=column.name)
        hierarchy.validate_against(load_frame(dataset)[column.name].unique())
    except HierarchyError as exc:
        raise InvalidInput(f"Hierarchy for {column.name}: {exc}") from None
    filename = PurePath(uploaded.name or "hierarchy.csv").name
    with transaction.atomic():
        column.hierarchy_source = DatasetColumn.HierarchySource.UPLOADED
        column.hierarchy_filename = filename
        column.hierarchy_text = hierarchy.to_arx_csv()
        column.hierarchy_height = hierarchy.height
        column.save()
        audit.record(
            AuditEvent.Action.TAGGING,
            user,
            dataset=dataset,
            column=column.name,
            hierarchy=filename,
            levels=hierarchy.height,
        )
    return column


def use_automatic_hierarchy(user, dataset: Dataset, column_id: int) -> DatasetColumn:
    dataset = get_dataset_for(user, dataset.pk)
    column = _column(dataset, column_id)
    if column.hierarchy_source != DatasetColumn.HierarchySource.AUTOMATIC:
        with transaction.atomic():
            column.hierarchy_source = DatasetColumn.HierarchySource.AUTOMATIC
            column.hierarchy_filename = ""
            column.hierarchy_text = ""
            column.hierarchy_height = None
            column.save()
            audit.record(
                AuditEvent.Action.TAGGING,
                user,
                dataset=dataset,
                column=column.name,
                hierarchy="automatic",
            )
    return column
