"""Datasets: upload, profiling hand-off, deletion, and tagging of columns.

An upload is streamed to private storage (hashed while it is copied, never held in memory)
and checked cheaply (size, empty, binary or unknown format). Parsing and profiling run in a
Celery task (``profiling.profile_dataset``); a dataset is usable once ``READY`` and never
changes after that: a new file makes a new dataset. Who may see a dataset is the selectors'
(``get_dataset_for``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import pandas as pd
from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.http import Http404

from releases.background import outbox
from releases.core import audit, roles, storage
from releases.core.errors import InvalidInput
from releases.datasets import budget, column_store, hierarchies, risk, rules, versions
from releases.datasets.profiles import column_profile
from releases.datasets.selectors import (
    PROFILE_TASK,
    build_hierarchy,
    column_values,
    current_hierarchy,
    ensure_ready,
    get_dataset_for,
)
from releases.engine import Hierarchy, HierarchyError, tabular
from releases.engine.export import neutralise_formulas
from releases.models import (
    AttackerFile,
    AuditEvent,
    BudgetEntry,
    Dataset,
    DatasetColumn,
    ReleaseFile,
    ReleaseRequest,
    Role,
)
from releases.models.datasets import ColumnType, DateOrder
from releases.projects import selectors as project_selectors

SUFFIXES = {"csv": ".csv", "tsv": ".tsv", "xlsx": ".xlsx", "parquet": ".parquet"}


def limit_message() -> str:
    limit = settings.MAX_UPLOAD_BYTES
    if limit >= 1024**3 and limit % 1024**3 == 0:
        shown = f"{limit // 1024**3} GB"
    elif limit >= 1024**2:
        shown = f"{limit / 1024**2:.0f} MB"
    else:
        shown = f"{limit} bytes"
    return f"The file is larger than the {shown} limit (MAX_UPLOAD_BYTES)."


# --- Upload -------------------------------------------------------------------------------


def refuse_oversized_upload(user, content_length: int) -> str:
    """An upload whose request is larger than the limit, refused before its body is read:
    audited; returns the message for the page."""
    roles.require(user, roles.STEWARDS, "upload datasets")
    message = limit_message()
    audit.record(
        AuditEvent.Action.UPLOAD_REJECTED,
        user,
        filename="",
        reason=message,
        content_length=content_length,
    )
    return message


def store_stream(
    uploaded: File, suffix: str, folder: str = "datasets"
) -> tuple[str, str, int, bytes]:
    """Check and hash the upload chunk by chunk, then stream it into private storage under
    ``folder``; (storage name, sha256, size, first bytes). Nothing is held in memory."""
    digest = hashlib.sha256()
    size = 0
    head = b""
    uploaded.seek(0)
    for chunk in uploaded.chunks():
        size += len(chunk)
        if size > settings.MAX_UPLOAD_BYTES:
            raise InvalidInput(limit_message())
        if len(head) < tabular.SNIFF_BYTES:
            head += chunk[: tabular.SNIFF_BYTES - len(head)]
        digest.update(chunk)
    uploaded.seek(0)
    name = storage.private_storage().save(storage.new_name(folder, suffix), uploaded)
    return name, digest.hexdigest(), size, head


def create_version(user, dataset: Dataset, uploaded: File, sheet: str = "") -> Dataset:
    """Upload the next version of ``dataset``'s lineage (its owner's): a new dataset following
    the newest profiled version, named like it; its columns' decisions are carried over once
    it is profiled (``versions.carry_over``)."""
    fields = versions.version_fields(user, dataset)
    previous = fields["previous"]
    # A version stays in its lineage's project (the steward must still be a steward there).
    return create_dataset(
        user, uploaded, previous.name, sheet, project=previous.project.slug, version=fields
    )


def create_dataset(
    user,
    uploaded: File,
    name: str = "",
    sheet: str = "",
    project: str = "",
    version: dict | None = None,
) -> Dataset:
    """Store an upload and queue its profiling; a refused upload stores nothing.

    ``version``: the fields of a new version (``versions.version_fields``), for
    :func:`create_version`.

    Checked here: size, empty, binary or unknown format. Everything that needs the whole file
    (encoding, ragged rows, header, sheets, Parquet damage) is checked by the profiling task,
    which marks the dataset refused with the reason and removes its file.

    ``project``: the short name of the project it goes into; optional when the steward is a
    steward of one project only.
    """
    roles.require(user, roles.STEWARDS, "upload datasets")
    into = project_selectors.upload_project(user, (project or "").strip())
    filename = PurePath(uploaded.name or "upload.csv").name
    try:
        if uploaded.size is not None and uploaded.size > settings.MAX_UPLOAD_BYTES:
            raise InvalidInput(limit_message())
        uploaded.seek(0)
        head = uploaded.read(tabular.SNIFF_BYTES)
        file_format = tabular.sniff_format(head, filename)
        path, digest, size, _ = store_stream(uploaded, SUFFIXES[file_format])
    except (InvalidInput, tabular.TableError) as exc:
        audit.record(AuditEvent.Action.UPLOAD_REJECTED, user, filename=filename, reason=str(exc))
        raise InvalidInput(str(exc)) from None
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(
                owner=user,
                project=into,
                name=(name or "").strip() or filename,
                original_filename=filename,
                file_path=path,
                sha256=digest,
                size_bytes=size,
                file_format=file_format,
                sheet_name=(sheet or "").strip() if file_format == tabular.XLSX else "",
                status=rules.UPLOADED,
                stage="Waiting for a worker",
                **(version or {}),
            )
            lineage: dict[str, Any] = (
                {"version": dataset.version, "previous": dataset.previous_id} if version else {}
            )
            budget.apply_project_default(dataset)
            audit.record(
                AuditEvent.Action.UPLOAD,
                user,
                dataset=dataset,
                dataset_name=dataset.name,
                filename=filename,
                sha256=digest,
                size_bytes=size,
                format=file_format,
                **lineage,
            )
            enqueue_profiling(dataset.pk)
    except BaseException:
        # The record did not commit: do not leave its file behind.
        storage.delete_quietly(path)
        raise
    return dataset


def enqueue_profiling(dataset_id: int) -> None:
    """Queue the profiling task (sent once the caller's transaction commits)."""
    outbox.enqueue(PROFILE_TASK, dataset_id)


def load_frame(
    dataset: Dataset, columns: list[str] | None = None, categorical: bool = False
) -> pd.DataFrame:
    """The dataset's rows as strings ("" for missing): the named columns (all when None), read
    from its column store, which was read from the original whose SHA-256 it records.

    ``categorical``: repeating columns as Categoricals, a small integer per row (group them with
    ``observed=True``); else pandas' str dtype (Arrow strings).
    """
    if not dataset.file_path:
        raise InvalidInput("This dataset's file was refused and is not stored.")
    if not dataset.is_registered and not storage.exists(dataset.file_path):
        # The store records the original's SHA-256; an original gone from storage is a fault.
        raise FileNotFoundError(f"The original of dataset {dataset.pk} is missing from storage.")
    return column_store.read(dataset, columns, categorical=categorical)


# --- Deletion -----------------------------------------------------------------------------


def delete_dataset(user, dataset: Dataset) -> None:
    """Delete a dataset; its audit events stay, naming it.

    Refused while it has an approved release (its record and report stay), a result waiting
    for review, or differentially private releases in its budget ledger (a new upload must not
    start a fresh budget on the same data). A profiling under way, and runs queued or under
    way, are cancelled with it: their workers notice within a heartbeat (``background.leases``),
    and their conditional writes find nothing to write, so nothing deleted comes back.
    """
    dataset = get_dataset_for(user, dataset.pk)
    State = ReleaseRequest.State
    with transaction.atomic():
        # The row lock orders this deletion with a worker's final (conditional) write.
        dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
        requests = list(ReleaseRequest.objects.select_for_update().filter(dataset=dataset))
        states = {r.state for r in requests}
        if states & ReleaseRequest.RELEASED_STATES:
            # A release that went out (even revoked or expired since) keeps its record and report.
            raise InvalidInput("This dataset has an approved release and cannot be deleted.")
        if BudgetEntry.objects.filter(dataset=dataset, kind=BudgetEntry.Kind.DP_SPEND).exists():
            # The budget bounds what releases of these data may leak in total; a new upload
            # of the same file would start from a fresh budget.
            raise InvalidInput(
                "Differentially private releases of this dataset have spent its privacy "
                "budget; the dataset and its ledger stay, and it cannot be deleted."
            )
        if Dataset.objects.filter(previous=dataset).exists():
            raise InvalidInput(
                "A later version of this dataset follows it; delete the later versions first."
            )
        if State.READY in states:
            raise InvalidInput(
                "This dataset has a release request waiting for review; wait for its decision "
                "before deleting the dataset."
            )
        cancelled = [r for r in requests if r.state in (State.QUEUED, State.RUNNING)]
        for release_request in cancelled:
            audit.record(
                AuditEvent.Action.CANCEL,
                user,
                request=release_request,
                round=release_request.round,
                was=release_request.state,
                reason="The dataset was deleted.",
            )
        paths = [
            dataset.file_path,
            column_store.name_of(dataset) if dataset.file_path else "",
            *[r.extract_path for r in requests],
            *ReleaseFile.objects.filter(request__dataset=dataset).values_list("path", flat=True),
            # Attacker files are held like originals: they go with their requests.
            *AttackerFile.objects.filter(request__dataset=dataset).values_list("path", flat=True),
        ]
        audit.record(
            AuditEvent.Action.DELETE,
            user,
            dataset_name=dataset.name,
            dataset_id=dataset.pk,
            filename=dataset.original_filename,
            sha256=dataset.sha256,
            status=dataset.status,
            requests_deleted=len(requests),
            runs_cancelled=[r.pk for r in cancelled],
        )
        for release_request in requests:
            release_request.delete()
        dataset.delete()
    for path in paths:
        if path:
            storage.delete_quietly(path)
    for release_request in requests:
        # Files of unfinished attempts and uploads, which no row names.
        for folder in (f"extracts/{release_request.pk}", f"attackers/{release_request.pk}"):
            for name in storage.list_files(folder):
                storage.delete_quietly(name)


# --- Tagging ------------------------------------------------------------------------------


def _column(dataset: Dataset, column_id: int) -> DatasetColumn:
    try:
        return dataset.columns.get(pk=column_id)
    except DatasetColumn.DoesNotExist:
        raise Http404("No such column.") from None


def _tagging_event(user, dataset: Dataset, column: DatasetColumn | None, **detail) -> None:
    if column is not None:
        detail["column"] = column.name
    audit.record(
        AuditEvent.Action.TAGGING, user, dataset=dataset, dataset_name=dataset.name, **detail
    )


def set_column_role(user, dataset: Dataset, column_id: int, role: str) -> DatasetColumn:
    """Change one column's role; "" takes the decision back (the column is withheld and no
    release can be requested until it has a role)."""
    dataset = get_dataset_for(user, dataset.pk)
    ensure_ready(dataset)
    column = _column(dataset, column_id)
    if role not in Role.values and role != "":
        raise InvalidInput(f"Unknown role {role!r}.")
    rules.check_key_role(column.name, dataset.key_column, role)
    if column.role != role:
        previous = column.role
        with transaction.atomic():
            column.role = role
            column.save(update_fields=["role"])
            _tagging_event(user, dataset, column, role=role, previous_role=previous)
            if Role.QUASI_IDENTIFIER in (role, previous):
                risk.request_risk(dataset)  # a large dataset's panel needs a worker
    return column


#: At most this many declared values per column (the most categories a histogram may have).
MAX_DECLARED_VALUES = 1_000


def set_declared_domain(user, dataset: Dataset, column_id: int, text: str) -> DatasetColumn:
    """Declare the values a column can take (one per line): public knowledge, such as a code
    list, that statistics may publish as labels. An empty text takes the declaration back."""
    dataset = get_dataset_for(user, dataset.pk)
    ensure_ready(dataset)
    column = _column(dataset, column_id)
    values = list(dict.fromkeys(line.strip() for line in (text or "").splitlines() if line.strip()))
    if len(values) > MAX_DECLARED_VALUES:
        raise InvalidInput(f"Declare at most {MAX_DECLARED_VALUES:,} values of {column.name}.")
    if any(len(v) > 200 for v in values):
        raise InvalidInput(f"A declared value of {column.name} is longer than 200 characters.")
    if any(not v.isprintable() for v in values):
        raise InvalidInput(f"A declared value of {column.name} holds a control character.")
    if values != column.declared_domain:
        with transaction.atomic():
            column.declared_domain = values
            column.save(update_fields=["declared_domain"])
            _tagging_event(user, dataset, column, declared_values=len(values))
    return column


@dataclass(frozen=True)
class ColumnChange:
    """One column's fields from the tagging form: a role, a hierarchy file, the automatic
    hierarchy, or a builder with its parameters (each optional)."""

    column_id: int
    role: str | None = None
    hierarchy_file: File | None = None
    automatic: bool = False
    builder: str = ""
    builder_params: dict | None = None
    builder_error: str = ""
    #: The declared values' text (one per line), or None when the form did not send it.
    declared_domain: str | None = None


def save_tagging(user, dataset: Dataset, changes: list[ColumnChange]) -> list[str]:
    """Apply the whole tagging form in one transaction: every change, or none. Returns the
    warnings of uploaded hierarchies (a row listed twice).

    Raises ``InvalidInput`` naming each column that could not be changed; nothing is saved
    then (not even the columns that were fine)."""
    dataset = get_dataset_for(user, dataset.pk)
    ensure_ready(dataset)
    errors: list[str] = []
    warnings: list[str] = []
    with transaction.atomic():
        for change in changes:
            column = _column(dataset, change.column_id)
            try:
                if change.role is not None:
                    column = set_column_role(user, dataset, column.pk, change.role)
                if change.declared_domain is not None:
                    set_declared_domain(user, dataset, column.pk, change.declared_domain)
                if change.hierarchy_file is not None:
                    uploaded = set_hierarchy_file(user, dataset, column.pk, change.hierarchy_file)
                    warnings.extend(uploaded.hierarchy_warnings)
                elif change.automatic:
                    use_automatic_hierarchy(user, dataset, column.pk)
                elif change.builder_error:
                    raise InvalidInput(change.builder_error)
                elif (
                    column.role == Role.QUASI_IDENTIFIER
                    and change.builder
                    and change.builder != DatasetColumn.HierarchySource.UPLOADED
                ):
                    column.refresh_from_db()
                    params = change.builder_params or {}
                    if (change.builder, params) != (
                        column.hierarchy_source,
                        column.hierarchy_params or {},
                    ):
                        set_hierarchy_builder(user, dataset, column.pk, change.builder, params)
            except InvalidInput as exc:
                errors.append(f"{column.name}: {exc}")
        if errors:
            transaction.set_rollback(True)
    if errors:
        raise InvalidInput("Nothing was saved. " + " ".join(errors))
    return warnings


def accept_suggestions(user, dataset: Dataset) -> int:
    """Give every column its suggested role; returns how many columns changed."""
    dataset = get_dataset_for(user, dataset.pk)
    ensure_ready(dataset)
    changed = 0
    with transaction.atomic():
        for column in dataset.columns.all():
            if column.name == dataset.key_column:
                continue  # never released, whatever the suggestion
            if column.suggested_role and column.role != column.suggested_role:
                previous = column.role
                column.role = column.suggested_role
                column.save(update_fields=["role"])
                _tagging_event(
                    user,
                    dataset,
                    column,
                    role=column.role,
                    previous_role=previous,
                    suggestion=column.suggestion_reason,
                )
                changed += 1
        if changed:
            risk.request_risk(dataset)  # a large dataset's panel needs a worker
    return changed


def set_column_type(
    user, dataset: Dataset, column_id: int, column_type: str, date_order: str = ""
) -> DatasetColumn:
    """Override a column's inferred type (and date order); its profile and chart follow."""
    dataset = get_dataset_for(user, dataset.pk)
    ensure_ready(dataset)
    column = _column(dataset, column_id)
    if column_type not in ColumnType.values:
        raise InvalidInput(f"Unknown type {column_type!r}.")
    if date_order and date_order not in DateOrder.values:
        raise InvalidInput(f"Unknown date order {date_order!r}.")
    if column_type != ColumnType.DATE:
        date_order = ""
    override = "" if column_type == column.inferred_type else column_type
    if (override, date_order or column.date_order) == (column.type_override, column.date_order):
        return column
    series = column_store.read(dataset, [column.name], categorical=True)[column.name]
    order = date_order or (
        column.profile.get("date_order") if column_type == ColumnType.DATE else ""
    )
    profile = column_profile(series, column_type, order or "")
    profile["inferred_type"] = column.inferred_type
    with transaction.atomic():
        column.type_override = override
        column.date_order = order or ""
        column.profile = profile
        column.save(update_fields=["type_override", "date_order", "profile"])
        _tagging_event(user, dataset, column, type=column_type, date_order=column.date_order)
    return column


# --- Hierarchies --------------------------------------------------------------------------


def set_hierarchy_builder(
    user, dataset: Dataset, column_id: int, builder: str, params: dict
) -> DatasetColumn:
    """Build a hierarchy on the column's values and store it materialized in ARX format."""
    dataset = get_dataset_for(user, dataset.pk)
    ensure_ready(dataset)
    column = _column(dataset, column_id)
    if builder == DatasetColumn.HierarchySource.AUTOMATIC:
        return use_automatic_hierarchy(user, dataset, column_id)
    if builder not in {b for b, _ in hierarchies.BUILDERS}:
        raise InvalidInput(f"Unknown hierarchy builder {builder!r}.")
    if column.distinct_values > settings.MAX_HIERARCHY_ROWS:
        raise InvalidInput(hierarchy_rows_message())
    hierarchy = build_hierarchy(dataset, column, builder, params)
    with transaction.atomic():
        column.hierarchy_source = builder
        column.hierarchy_filename = ""
        column.hierarchy_text = hierarchy.to_arx_csv()
        column.hierarchy_height = hierarchy.height
        column.hierarchy_params = params
        column.save()
        _tagging_event(
            user, dataset, column, hierarchy=builder, params=params, levels=hierarchy.height
        )
    return column


def hierarchy_rows_message() -> str:
    return (
        f"A hierarchy may have at most {settings.MAX_HIERARCHY_ROWS:,} rows "
        "(MAX_HIERARCHY_ROWS). For a column with this many values, use the automatic "
        "hierarchy or generalize the values before uploading."
    )


def read_hierarchy_file(uploaded: File) -> bytes:
    """The bytes of an uploaded hierarchy, refused as soon as they pass the size or row
    limit (each refusal names its setting): checked chunk by chunk, before any parsing."""
    limit = settings.MAX_HIERARCHY_BYTES
    too_big = f"A hierarchy file may be at most {limit / 1024**2:.0f} MB (MAX_HIERARCHY_BYTES)."
    if uploaded.size is not None and uploaded.size > limit:
        raise InvalidInput(too_big)
    chunks: list[bytes] = []
    size = rows = 0
    uploaded.seek(0)
    for chunk in uploaded.chunks():
        size += len(chunk)
        if size > limit:
            raise InvalidInput(too_big)
        rows += chunk.count(b"\n")
        if rows > settings.MAX_HIERARCHY_ROWS:
            raise InvalidInput(hierarchy_rows_message())
        chunks.append(chunk)
    return b"".join(chunks)


def set_hierarchy_file(user, dataset: Dataset, column_id: int, uploaded: File) -> DatasetColumn:
    """Attach an ARX-format hierarchy to a column after checking it covers the column's values."""
    dataset = get_dataset_for(user, dataset.pk)
    ensure_ready(dataset)
    column = _column(dataset, column_id)
    raw = read_hierarchy_file(uploaded)
    try:
        hierarchy = Hierarchy.from_arx_csv(raw, attribute=column.name)
        hierarchy.validate_against(column_values(dataset, column))
    except HierarchyError as exc:
        raise InvalidInput(f"Hierarchy for {column.name}: {exc}") from None
    filename = PurePath(uploaded.name or "hierarchy.csv").name
    # A row listed twice identically is accepted (ARX's own files have some), with a word.
    warnings = {"warnings": list(hierarchy.warnings)} if hierarchy.warnings else {}
    with transaction.atomic():
        column.hierarchy_source = DatasetColumn.HierarchySource.UPLOADED
        column.hierarchy_filename = filename
        column.hierarchy_text = hierarchy.to_arx_csv()
        column.hierarchy_height = hierarchy.height
        column.hierarchy_params = {}
        column.save()
        _tagging_event(
            user, dataset, column, hierarchy=filename, levels=hierarchy.height, **warnings
        )
    column.hierarchy_warnings = list(hierarchy.warnings)
    return column


def use_automatic_hierarchy(user, dataset: Dataset, column_id: int) -> DatasetColumn:
    dataset = get_dataset_for(user, dataset.pk)
    ensure_ready(dataset)
    column = _column(dataset, column_id)
    if column.hierarchy_source != DatasetColumn.HierarchySource.AUTOMATIC or column.hierarchy_text:
        with transaction.atomic():
            column.hierarchy_source = DatasetColumn.HierarchySource.AUTOMATIC
            column.hierarchy_filename = ""
            column.hierarchy_text = ""
            column.hierarchy_height = None
            column.hierarchy_params = {}
            column.save()
            _tagging_event(user, dataset, column, hierarchy="automatic")
    return column


def hierarchy_download(user, dataset_id: int, column_id: int) -> tuple[str, bytes]:
    """(filename, ARX-format CSV bytes) of a column's hierarchy, for whoever sees the dataset;
    cells that a spreadsheet would run as formulas are neutralised."""
    dataset = get_dataset_for(user, dataset_id, to_change=False)
    ensure_ready(dataset)
    column = _column(dataset, column_id)
    hierarchy = current_hierarchy(dataset, column)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in column.name)
    table = neutralise_formulas(pd.DataFrame([list(row) for row in hierarchy.rows], dtype=object))
    text = table.to_csv(sep=";", header=False, index=False, lineterminator="\n")
    return f"hierarchy_{safe}.csv", text.encode("utf-8")
