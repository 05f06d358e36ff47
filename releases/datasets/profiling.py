"""The profiling job: read an uploaded file and profile its columns.

``profile_dataset`` is the body of the Celery task that reads an uploaded file: in one
streaming pass it checks the file against the read limits and writes the column store
(``column_store``); it then profiles each column from the store (``profiles``), one column at
a time, on its value counts, and suggests each column's role (``suggestions``). It can also be
called directly (tests, ``tests/support/factories.make_dataset``).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pandas as pd
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from releases.background import leases
from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.datasets import column_store, suggestions
from releases.datasets.originals import scan_original
from releases.datasets.profiles import profile_from_counts
from releases.engine.tabular import TableError, TableFormat, TableScan
from releases.models import AuditEvent, Dataset, DatasetColumn

logger = logging.getLogger(__name__)

PREVIEW_ROWS = 10
#: Distinct values of each column handed to the role suggestions (they look at a sample).
SUGGESTION_VALUES = 2_000
#: Cells read from the column store at a time while profiling.
CELLS_PER_READ = 4_000_000


# --- The task's body ----------------------------------------------------------------------


class ProfilingCancelled(Exception):
    """The dataset left this process while it was profiled (deleted, or retried elsewhere)."""


def _progress(dataset: Dataset, progress: float, stage: str) -> None:
    """Report progress (and renew the lease); ``ProfilingCancelled`` when the dataset is no
    longer being profiled by this process."""
    ours = Dataset.objects.filter(
        pk=dataset.pk, status=Dataset.Status.PROFILING, worker=leases.worker_id()
    ).update(progress=progress, stage=stage[:200], heartbeat_at=timezone.now())
    if not ours:
        raise ProfilingCancelled()
    leases.pause_point(stage, f"dataset {dataset.pk}")


def _decimal_comma_allowed(fmt: TableFormat) -> bool:
    return fmt.file_format not in ("csv", "tsv") or fmt.delimiter != ","


def _read_into_store(dataset: Dataset, scan: TableScan, local: Path) -> list[list[str]]:
    """Write the scanned rows to a local column store; returns the first rows (the preview)."""
    writer = column_store.Writer(local, scan.schema, dataset.sha256)
    preview: list[list[str]] = []
    try:
        for batch in scan.batches():
            writer.write(batch)
            if len(preview) < PREVIEW_ROWS:
                rows = batch.slice(0, PREVIEW_ROWS - len(preview)).to_pylist()
                preview.extend([list(row.values()) for row in rows])
            _progress(
                dataset,
                0.05 + 0.55 * scan.fraction(),
                f"Read {scan.rows:,} rows of {len(scan.columns):,} columns",
            )
    finally:
        writer.close()
    return preview


def soft_limit_message() -> str:
    return (
        "Reading and profiling the file took longer than a worker may spend on one task "
        f"(TASK_SOFT_TIME_LIMIT, {settings.CELERY_TASK_SOFT_TIME_LIMIT} s). Upload a smaller "
        "file (fewer rows or columns), or ask the administrators to raise the limit."
    )


def memory_message() -> str:
    limit = getattr(settings, "WORKER_MEMORY_LIMIT_MB", 0)
    shown = f"WORKER_MEMORY_LIMIT_MB, {limit} MB" if limit else "the machine's memory"
    return (
        f"Reading the file needed more memory than a worker process may use ({shown}). "
        "Upload a smaller file (fewer columns, or shorter cells), or ask the administrators "
        "to raise the limit."
    )


def profile_dataset(dataset_id: int) -> Dataset | None:
    """Read the stored file into the column store, profile each column, suggest roles; or
    record why the file was refused.

    Runs once per dataset and attempt: a dataset already profiled (or refused) is left as it
    is. The profiling holds a lease (``services.leases``): a dataset deleted meanwhile stops
    it within a heartbeat, and nothing it wrote is kept (no row, no column store).
    """
    me = leases.worker_id()
    # A conditional update claims the dataset: of two runs (a redelivered task), one proceeds.
    claimed = Dataset.objects.filter(pk=dataset_id, status=Dataset.Status.PENDING).update(
        status=Dataset.Status.PROFILING,
        stage="Reading the file",
        progress=0.05,
        heartbeat_at=timezone.now(),
        attempts=F("attempts") + 1,
        worker=me,
    )
    dataset = Dataset.objects.filter(pk=dataset_id).first()
    if not claimed or dataset is None:
        return dataset
    lease = leases.Lease(
        Dataset,
        dataset.pk,
        interrupt=ProfilingCancelled,
        status=Dataset.Status.PROFILING,
        worker=me,
    )
    try:
        with lease:
            leases.pause_point(dataset.stage, f"dataset {dataset.pk}")
            _profile(dataset, lease)
    except ProfilingCancelled:
        _stopped(dataset)
    except TableError as exc:
        _refuse_own(dataset, str(exc))
    except InvalidInput as exc:
        _refuse_own(dataset, str(exc))
    except SoftTimeLimitExceeded:
        _refuse_own(dataset, soft_limit_message())
    except MemoryError:
        logger.warning("Profiling dataset %s ran out of memory", dataset_id)
        _refuse_own(dataset, memory_message())
    except Exception:  # an unexpected failure still ends in a readable state
        if Dataset.objects.filter(pk=dataset_id, worker=dataset.worker).exists():
            logger.exception("Profiling dataset %s failed", dataset_id)
        _refuse_own(
            dataset,
            "The file could not be read because of an internal error. The administrators can "
            "find the details in the worker's log.",
        )
    return Dataset.objects.filter(pk=dataset_id).first()


def _profile(dataset: Dataset, lease: leases.Lease) -> None:
    """The profiling's body: read into the column store, profile the columns, record them."""
    with tempfile.TemporaryDirectory(dir=settings.FILE_UPLOAD_TEMP_DIR) as folder:
        local = Path(folder) / "columns.parquet"
        with scan_original(dataset) as scan:
            preview = _read_into_store(dataset, scan, local)
        fmt, names, rows = scan.format, scan.columns, scan.rows
        columns = _profile_columns(dataset, local, names, rows, fmt)
        _progress(dataset, 0.97, "Storing the columns")
        column_store.save(dataset, local)
    lease.stop()  # from here the conditional write decides: nothing interrupts it
    with transaction.atomic():
        # Never dataset.save(): a row deleted meanwhile must not be inserted again.
        finished = Dataset.objects.filter(
            pk=dataset.pk, status=Dataset.Status.PROFILING, worker=dataset.worker
        ).update(
            encoding=fmt.encoding,
            delimiter=fmt.delimiter if fmt.file_format in ("csv", "tsv") else "",
            sheet_name=fmt.sheet,
            row_count=rows,
            preview=preview,
            status=Dataset.Status.READY,
            progress=1.0,
            stage="Profiled",
            error="",
            profiled_at=timezone.now(),
        )
        if not finished:
            raise ProfilingCancelled()
        for column in columns:
            column.dataset = dataset
        DatasetColumn.objects.bulk_create(columns, batch_size=500)
        audit.record(
            AuditEvent.Action.PROFILED,
            None,
            dataset=dataset,
            dataset_name=dataset.name,
            rows=rows,
            columns=len(names),
            format=fmt.file_format,
            encoding=fmt.encoding,
            sheet=fmt.sheet,
            attempt=dataset.attempts,
        )


def _refuse_own(dataset: Dataset, reason: str) -> None:
    """Refuse the file if the dataset is still this process's; else it was deleted or handed
    on, and only what this profiling wrote is removed."""
    if not refuse(dataset, reason, worker=dataset.worker):
        _stopped(dataset)


def _stopped(dataset: Dataset) -> None:
    """The dataset left this process. Deleted: remove the column store this profiling may
    have written after the deletion removed the files. Handed to another attempt: that one
    owns the store now."""
    if not Dataset.objects.filter(pk=dataset.pk).exists() and dataset.file_path:
        storage.delete_quietly(column_store.name_of(dataset))
        storage.delete_quietly(dataset.file_path)
    logger.info("Profiling of dataset %s stopped: it is no longer this worker's", dataset.pk)


def _profile_columns(
    dataset: Dataset, local: Path, names: list[str], rows: int, fmt: TableFormat
) -> list[DatasetColumn]:
    """Each column's profile and suggested role, from the value counts of the store's columns
    (read a group of columns at a time: a few on tall files, many on wide ones)."""
    columns = []
    n = len(names)
    decimal_comma = _decimal_comma_allowed(fmt)
    step = max(1, n // 50)
    parquet = column_store.open_local(local)
    group = max(1, min(n, CELLS_PER_READ // max(rows, 1)))
    for start in range(0, n, group):
        counted = column_store.value_counts_of(parquet, names[start : start + group])
        for offset, (values, counts) in enumerate(counted):
            position = start + offset
            name = names[position]
            profile = profile_from_counts(values, counts, decimal_comma=decimal_comma)
            # The suggestions look at a sample: the first distinct values stand for the rows.
            sample = pd.Series(
                values.slice(0, SUGGESTION_VALUES).to_pylist(), dtype=object, name=name
            )
            suggestion = suggestions.suggest(name, sample, profile)
            columns.append(
                DatasetColumn(
                    position=position,
                    name=name,
                    distinct_values=profile["distinct"],
                    inferred_type=profile["inferred_type"],
                    date_order=profile["date_order"],
                    missing_count=profile["missing"],
                    profile=profile,
                    suggested_role=suggestion.role,
                    suggestion_reason=suggestion.reason,
                )
            )
            if position % step == step - 1 or position == n - 1:
                _progress(
                    dataset,
                    0.6 + 0.35 * (position + 1) / n,
                    f"Profiled {position + 1:,} of {n:,} columns",
                )
    return columns


def refuse(dataset: Dataset, reason: str, **still: object) -> bool:
    """A refused file: the dataset keeps only the reason; its stored file is removed.

    ``still``: fields the row must still have (e.g. ``worker=`` this process, or an expired
    ``heartbeat_at__lt=``), so a refusal never overrides what happened meanwhile (a deletion,
    another attempt). Returns whether the dataset was refused."""
    path = dataset.file_path
    with transaction.atomic():
        refused = Dataset.objects.filter(
            pk=dataset.pk, status__in=[Dataset.Status.PENDING, Dataset.Status.PROFILING], **still
        ).update(
            status=Dataset.Status.FAILED, error=reason, stage="Refused", progress=1.0, file_path=""
        )
        if not refused:
            return False
        DatasetColumn.objects.filter(dataset=dataset).delete()
        audit.record(
            AuditEvent.Action.UPLOAD_REJECTED,
            dataset.owner,
            dataset=dataset,
            dataset_name=dataset.name,
            filename=dataset.original_filename,
            sha256=dataset.sha256,
            reason=reason,
        )
    if path:
        storage.delete_quietly(f"{path}{column_store.SUFFIX}")
    storage.delete_quietly(path)
    dataset.status, dataset.error, dataset.file_path = Dataset.Status.FAILED, reason, ""
    dataset.stage, dataset.progress = "Refused", 1.0
    return True
