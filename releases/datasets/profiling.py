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
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from releases.background import jobs
from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.datasets import column_store, rules, suggestions, versions
from releases.datasets.originals import recorded_version, scan_original
from releases.datasets.profiles import profile_from_counts
from releases.engine.tabular import TableError, TableFormat, TableScan
from releases.models import AuditEvent, Dataset, DatasetColumn

logger = logging.getLogger(__name__)

PREVIEW_ROWS = 10
#: Distinct values of each column handed to the role suggestions (they look at a sample).
SUGGESTION_VALUES = 2_000
#: Cells read from the column store at a time while profiling (a batch's codes: 16 MB).
CELLS_PER_READ = 4_000_000
#: Rows read at a time while profiling: the columns' counts are merged batch by batch.
ROWS_PER_READ = 1_000_000


# --- The task's body ----------------------------------------------------------------------


def _decimal_comma_allowed(fmt: TableFormat) -> bool:
    return fmt.file_format not in ("csv", "tsv") or fmt.delimiter != ","


def _read_into_store(job: Profiling, scan: TableScan, local: Path) -> list[list[str]]:
    """Write the scanned rows to a local column store; returns the first rows (the preview)."""
    writer = column_store.Writer(local, scan.schema, job.row.sha256)
    preview: list[list[str]] = []
    try:
        for batch in scan.batches():
            writer.write(batch)
            if len(preview) < PREVIEW_ROWS:
                rows = batch.slice(0, PREVIEW_ROWS - len(preview)).to_pylist()
                preview.extend([list(row.values()) for row in rows])
            job.progress(
                f"Read {scan.rows:,} rows of {len(scan.columns):,} columns",
                progress=0.05 + 0.55 * scan.fraction(),
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


class Profiling(jobs.Job):
    """Read the stored file into the column store, profile each column, suggest roles; or
    record why the file was refused.

    Runs once per dataset and attempt: a dataset already profiled (or refused) is left as it
    is. The profiling holds a lease (``background.leases``): a dataset deleted meanwhile stops
    it within a heartbeat, and nothing it wrote is kept (no row, no column store).
    """

    model = Dataset
    state_field = "status"
    running = rules.TABLE.target_of("start_profiling")
    refusals = (TableError, InvalidInput)

    def claimable(self):
        return {"status__in": rules.sources("start_profiling")}

    def claiming(self, now):
        return {
            "status": rules.TABLE.target_of("start_profiling"),
            "stage": "Reading the file",
            "progress": 0.05,
        }

    def work_name(self) -> str:
        return f"dataset {self.pk}"

    def start_stage(self) -> str:
        return self.row.stage

    def soft_limit_message(self) -> str:
        return soft_limit_message()

    def memory_message(self) -> str:
        return memory_message()

    def internal_error_message(self) -> str:
        return (
            "The file could not be read because of an internal error. The administrators can "
            "find the details in the worker's log."
        )

    def log_failure(self) -> None:
        # A deleted or handed-on dataset's failure is no failure of this worker.
        if Dataset.objects.filter(pk=self.pk, worker=self.row.worker).exists():
            logger.exception("Profiling dataset %s failed", self.pk)

    def fail(self, reason: str) -> None:
        """Refuse the file if the dataset is still this process's; else it was deleted or
        handed on, and only what this profiling wrote is removed."""
        if not refuse(self.row, reason, worker=self.row.worker):
            self.stopped()

    def stopped(self) -> None:
        """The dataset left this process. Deleted: remove the column store this profiling may
        have written after the deletion removed the files. Handed to another attempt: that
        one owns the store now."""
        dataset = self.row
        if not Dataset.objects.filter(pk=dataset.pk).exists() and dataset.file_path:
            storage.delete_quietly(column_store.name_of(dataset))
            storage.delete_quietly(dataset.file_path)
        logger.info("Profiling of dataset %s stopped: it is no longer this worker's", dataset.pk)

    def body(self) -> None:
        """Read into the column store, profile the columns, record them."""
        dataset = self.row
        with tempfile.TemporaryDirectory(dir=settings.FILE_UPLOAD_TEMP_DIR) as folder:
            local = Path(folder) / "columns.parquet"
            with scan_original(dataset) as scan:
                preview = _read_into_store(self, scan, local)
            fmt, names, rows = scan.format, scan.columns, scan.rows
            pinned = recorded_version(dataset, scan)
            self.columns = _profile_columns(self, local, names, rows, fmt)
            self.progress("Storing the columns", progress=0.97)
            column_store.save(dataset, local)
        self.read = (fmt, names, rows)
        # Never dataset.save(): a row deleted meanwhile must not be inserted again.
        self.finish(
            encoding=fmt.encoding,
            delimiter=fmt.delimiter if fmt.file_format in ("csv", "tsv") else "",
            sheet_name=fmt.sheet,
            row_count=rows,
            preview=preview,
            status=rules.TABLE.target_of("finish_profiling"),
            progress=1.0,
            stage="Profiled",
            error="",
            profiled_at=timezone.now(),
            **pinned,
        )

    def finished(self) -> None:
        dataset = self.row
        fmt, names, rows = self.read
        for column in self.columns:
            column.dataset = dataset
        # A version keeps the previous version's decisions (in this same transaction).
        versions.carry_over(dataset, self.columns)
        DatasetColumn.objects.bulk_create(self.columns, batch_size=500)
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


def profile_dataset(dataset_id: int) -> Dataset | None:
    """The Celery task's body (also called directly: tests, ``tests/support/factories``): see
    :class:`Profiling`; the dataset as it ends (None once deleted)."""
    Profiling(dataset_id).run()
    return Dataset.objects.filter(pk=dataset_id).first()


def _profile_columns(
    job: Profiling, local: Path, names: list[str], rows: int, fmt: TableFormat
) -> list[DatasetColumn]:
    """Each column's profile and suggested role, from the value counts of the store's columns
    (read a group of columns at a time: a few on tall files, many on wide ones; and a batch of
    rows at a time, the counts merged: memory does not grow with the rows)."""
    columns = []
    n = len(names)
    decimal_comma = _decimal_comma_allowed(fmt)
    step = max(1, n // 50)
    parquet = column_store.open_local(local)
    batch_rows = max(1, min(rows, ROWS_PER_READ))
    group = max(1, min(n, CELLS_PER_READ // batch_rows))
    for start in range(0, n, group):
        counted = column_store.value_counts_of(parquet, names[start : start + group], batch_rows)
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
                job.progress(
                    f"Profiled {position + 1:,} of {n:,} columns",
                    progress=0.6 + 0.35 * (position + 1) / n,
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
            pk=dataset.pk, status__in=rules.sources("refuse"), **still
        ).update(
            status=rules.TABLE.target_of("refuse"),
            error=reason,
            stage="Refused",
            progress=1.0,
            file_path="",
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
    dataset.status, dataset.error, dataset.file_path = rules.TABLE.target_of("refuse"), reason, ""
    dataset.stage, dataset.progress = "Refused", 1.0
    return True
