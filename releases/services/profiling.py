"""Column profiles: inferred type, distinct and missing values, top values and a small chart.

``profile_dataset`` is the body of the Celery task that reads an uploaded file: in one
streaming pass it checks the file against the read limits and writes the column store
(``column_store``); it then profiles each column from the store, one column at a time, on its
value counts (distinct values and how often each occurs) rather than on every row, so memory
stays bounded by a column's distinct values whatever the number of rows. It can also be called
directly (tests, ``tests/support/factories.make_dataset``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from ..engine import tabular
from ..engine.tabular import ReadLimits, TableError, TableFormat, TableScan
from ..models import AuditEvent, Dataset, DatasetColumn
from ..models.datasets import ColumnType, DateOrder
from . import InvalidInput, audit, column_store, leases, storage, suggestions

logger = logging.getLogger(__name__)

PREVIEW_ROWS = 10
TOP_VALUES = 5
CHART_BARS = 8
HISTOGRAM_BINS = 12
#: Distinct values of each column handed to the role suggestions (they look at a sample).
SUGGESTION_VALUES = 2_000
#: Cells read from the column store at a time while profiling.
CELLS_PER_READ = 4_000_000
#: Cells that mean "missing" in exports (besides the empty cell); counted, never changed.
MISSING_MARKERS = frozenset(
    {"", "?", "NA", "N/A", "n/a", "na", "NULL", "null", "None", "NaN", "nan", "-", "#N/A"}
)

INTEGER = re.compile(r"^[+-]?\d+$")
DECIMAL = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
#: A decimal comma (72,5), as files from much of Europe hold them.
DECIMAL_COMMA = re.compile(r"^[+-]?(\d+,\d*|,\d+)([eE][+-]?\d+)?$")
LEADING_ZERO = re.compile(r"^[+-]?0\d+([.,]\d*)?$")
ISO_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})([T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?$")
SLASH_DATE = re.compile(r"^(\d{1,2})[/.-](\d{1,2})[/.-](\d{4}|\d{2})$")


def read_limits() -> ReadLimits:
    """The bounds every uploaded file is read within (settings MAX_*)."""
    return ReadLimits(
        max_bytes=settings.MAX_UNCOMPRESSED_BYTES,
        max_rows=settings.MAX_ROWS,
        max_columns=settings.MAX_COLUMNS,
        max_cell_bytes=settings.MAX_CELL_BYTES,
        max_compression_ratio=settings.MAX_COMPRESSION_RATIO,
    )


# --- Types --------------------------------------------------------------------------------


def missing_mask(series: pd.Series) -> pd.Series:
    return series.str.strip().isin(MISSING_MARKERS)


def _matches(values: pa.Array, pattern: re.Pattern) -> pa.Array:
    return pc.match_substring_regex(values, pattern.pattern)


def _all(mask: pa.Array) -> bool:
    return len(mask) > 0 and bool(pc.all(mask).as_py())


def _any(mask: pa.Array) -> bool:
    return bool(pc.any(mask).as_py())


def date_order_of(values: pd.Series | pa.Array) -> tuple[str, bool] | None:
    """The date order if every value is a date: ("ymd" | "dmy" | "mdy", ambiguous)."""
    values = _arrow(values)
    if len(values) == 0:
        return None
    if _all(_matches(values, ISO_DATE)):
        return DateOrder.ISO, False
    if not _all(_matches(values, SLASH_DATE)):
        return None
    first, second, _ = _slash_parts(values)
    if (
        (first < 1) | (second < 1) | ((first > 12) & (second > 12)) | (first > 31) | (second > 31)
    ).any():
        return None
    if (first > 12).any():
        return DateOrder.DMY, False
    if (second > 12).any():
        return DateOrder.MDY, False
    return DateOrder.DMY, True  # every day is 12 or less: the steward chooses


def _slash_parts(values: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, second, year) of d/m/y-like strings; NaN where a value is not one."""
    pattern = r"^(?P<a>\d{1,2})[/.-](?P<b>\d{1,2})[/.-](?P<y>\d{4}|\d{2})$"
    parts = pc.extract_regex(values, pattern)

    def number(field: str) -> np.ndarray:
        return pc.cast(parts.field(field), pa.float64()).to_numpy(zero_copy_only=False)

    year = number("y")
    year = np.where(year < 100, year + 2000, year)
    return number("a"), number("b"), year


def parse_dates(values: pd.Series | pa.Array, order: str) -> pd.Series:
    """Datetimes of the values in the given order; NaT where a value is not such a date."""
    values = _arrow(values)
    if order == DateOrder.ISO:
        text = pd.Series(values.to_numpy(zero_copy_only=False), dtype=object)
        parsed = pd.to_datetime(text, errors="coerce", format="ISO8601")
    else:
        first, second, year = _slash_parts(values)
        day, month = (first, second) if order == DateOrder.DMY else (second, first)
        frame = pd.DataFrame({"year": year, "month": month, "day": day})
        parsed = pd.to_datetime(frame, errors="coerce")
    # pandas 3 parses years 1 to 9999 (at microsecond resolution); a profile has always taken a
    # date outside datetime64[ns]'s range (1677-09-21 to 2262-04-11) for a value that is not one.
    instants = parsed.dt.tz_convert(None) if parsed.dt.tz is not None else parsed
    inside = instants.between(pd.Timestamp.min, pd.Timestamp.max)
    return parsed.where(inside).dt.as_unit("ns")


def _numbers(values: pa.Array) -> np.ndarray:
    """The stripped values as numbers (a decimal point or a decimal comma); NaN if not one."""
    point = _matches(values, DECIMAL)
    comma = pc.and_(_matches(values, DECIMAL_COMMA), pc.invert(point))
    text = pc.if_else(comma, pc.replace_substring(values, ",", "."), values)
    text = pc.replace_substring_regex(text, r"^\+", "")
    usable = pc.or_(point, comma)
    out = np.full(len(values), np.nan)
    if _any(usable):
        positions = np.flatnonzero(usable.to_numpy(zero_copy_only=False))
        out[positions] = pc.cast(pc.filter(text, usable), pa.float64()).to_numpy(
            zero_copy_only=False
        )
    return out


def infer_type(
    present: pd.Series | pa.Array,
    distinct: int,
    rows: int | None = None,
    decimal_comma: bool = False,
) -> tuple[str, str]:
    """(type, date order) of a column from its non-missing values (all rows, or the distinct
    values with ``rows`` the number of rows they stand for). ``decimal_comma``: values such as
    ``72,5`` make a decimal column (files whose delimiter is not a comma)."""
    values = _arrow(present)
    if len(values) == 0:
        return ColumnType.CATEGORICAL, ""
    rows = len(values) if rows is None else rows
    sample = pc.utf8_trim_whitespace(values)
    # Leading zeros (ZIP codes, account numbers) make a code, not a number.
    coded = _any(_matches(sample, LEADING_ZERO))
    if not coded and _all(_matches(sample, INTEGER)):
        return ColumnType.INTEGER, ""
    if not coded:
        point = _matches(sample, DECIMAL)
        if _all(point):
            return ColumnType.DECIMAL, ""
        if decimal_comma and _all(pc.or_(point, _matches(sample, DECIMAL_COMMA))):
            return ColumnType.DECIMAL, ""
    order = date_order_of(sample)
    if order is not None:
        return ColumnType.DATE, order[0]
    if distinct <= 50 or distinct <= 0.2 * rows:
        return ColumnType.CATEGORICAL, ""
    return ColumnType.TEXT, ""


def _arrow(values: pd.Series | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        return values
    return pa.array(values.astype(object).to_numpy(), type=pa.string(), from_pandas=True)


# --- Profiles -----------------------------------------------------------------------------


def _histogram(
    numbers: np.ndarray, labels: Callable[[float, float], str], weights: np.ndarray | None = None
) -> list[dict]:
    finite = np.isfinite(numbers)
    numbers = numbers[finite]
    if weights is not None:
        weights = weights[finite]
    if numbers.size == 0:
        return []
    lo, hi = float(numbers.min()), float(numbers.max())
    bins = 1 if lo == hi else min(HISTOGRAM_BINS, max(2, len(np.unique(numbers))))
    counts, edges = np.histogram(
        numbers, bins=bins, range=(lo, hi if hi > lo else lo + 1), weights=weights
    )
    return [
        {"label": labels(float(edges[i]), float(edges[i + 1])), "count": int(c)}
        for i, c in enumerate(counts)
    ]


def _number_label(lo: float, hi: float) -> str:
    def fmt(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:.4g}"

    return f"{fmt(lo)}–{fmt(hi)}"


def column_profile(
    series: pd.Series,
    column_type: str | None = None,
    date_order: str = "",
    decimal_comma: bool = False,
) -> dict:
    """Everything the page shows about one column (all JSON-serializable)."""
    counts = series.value_counts(sort=False, dropna=False)
    values = pa.array([str(v) for v in counts.index], type=pa.string())
    return profile_from_counts(
        values, counts.to_numpy(dtype=np.int64), column_type, date_order, decimal_comma
    )


def profile_from_counts(
    values: pa.Array,
    counts: np.ndarray | pa.Array,
    column_type: str | None = None,
    date_order: str = "",
    decimal_comma: bool = False,
) -> dict:
    """The profile of a column given as its distinct values and how often each occurs (in
    order of first appearance); the same as :func:`column_profile` on the rows themselves."""
    values = _arrow(values)
    counts = np.asarray(counts, dtype=np.int64)
    order = np.argsort(-counts, kind="stable")  # most frequent first, ties by first appearance
    values = values.take(pa.array(order))
    counts = counts[order]
    total = int(counts.sum())
    distinct = len(values)
    stripped = pc.utf8_trim_whitespace(values)
    missing = pc.is_in(stripped, value_set=pa.array(sorted(MISSING_MARKERS))).to_numpy(
        zero_copy_only=False
    )
    present_at = np.flatnonzero(~missing)
    present = values.take(pa.array(present_at))
    present_counts = counts[present_at]
    inferred, inferred_order = infer_type(
        present, len(present), int(present_counts.sum()), decimal_comma
    )
    chosen = column_type or inferred
    order_used = date_order or inferred_order
    markers = stripped.filter(pa.array(missing)).to_pylist() if missing.any() else []
    top = [
        {"value": v, "count": int(c)}
        for v, c in zip(values.slice(0, TOP_VALUES).to_pylist(), counts[:TOP_VALUES], strict=True)
    ]
    profile: dict = {
        "rows": total,
        "distinct": distinct,
        "unique_share": (distinct / total) if total else 0.0,
        "unique_rows": int((counts == 1).sum()),
        "missing": int(counts[missing].sum()),
        "missing_markers": sorted({m if m else "(empty)" for m in markers}),
        "top": top,
        "inferred_type": inferred,
        "date_order": order_used,
        "date_ambiguous": False,
        "single_value": distinct == 1,
        "warnings": [],
    }
    present_stripped = pc.utf8_trim_whitespace(present)
    if inferred == ColumnType.DATE:
        detected = date_order_of(present_stripped)
        profile["date_ambiguous"] = bool(detected and detected[1])
    chart: dict = {"kind": "bars", "bins": []}
    if chosen in (ColumnType.INTEGER, ColumnType.DECIMAL):
        numbers = _numbers(present_stripped)
        unparsed = int(present_counts[np.isnan(numbers)].sum())
        if unparsed:
            profile["warnings"].append(f"{unparsed} values are not numbers.")
        if _any(_matches(present_stripped, DECIMAL_COMMA)):
            profile["decimal_comma"] = True
        chart = {
            "kind": "histogram",
            "bins": _histogram(numbers, _number_label, present_counts),
        }
        finite = numbers[np.isfinite(numbers)]
        if finite.size:
            profile["min"], profile["max"] = (
                int(x) if float(x).is_integer() and abs(x) < 1e15 else float(x)
                for x in (finite.min(), finite.max())
            )
    elif chosen == ColumnType.DATE:
        parsed = parse_dates(present_stripped, order_used or DateOrder.ISO)
        valid = parsed.notna().to_numpy()
        unparsed = int(present_counts[~valid].sum())
        if unparsed:
            profile["warnings"].append(f"{unparsed} values are not dates in this format.")
        if valid.any():
            dates = parsed[valid]
            profile["min"], profile["max"] = (
                dates.min().date().isoformat(),
                dates.max().date().isoformat(),
            )
            seconds = dates.astype("datetime64[ns]").astype("int64").to_numpy() / 1e9

            def label(lo: float, hi: float) -> str:
                a = pd.Timestamp(lo, unit="s").date().isoformat()
                b = pd.Timestamp(hi, unit="s").date().isoformat()
                return f"{a} – {b}"

            chart = {
                "kind": "histogram",
                "bins": _histogram(seconds, label, present_counts[valid]),
            }
    else:
        shown = values.slice(0, CHART_BARS).to_pylist()
        chart = {
            "kind": "bars",
            "bins": [
                {"label": v if v != "" else "(empty)", "count": int(c)}
                for v, c in zip(shown, counts[:CHART_BARS], strict=True)
            ],
        }
        if distinct > CHART_BARS:
            chart["other"] = int(counts[CHART_BARS:].sum())
    profile["chart"] = chart
    if profile["single_value"]:
        profile["warnings"].append(
            "Every row has the same value: the column tells nothing apart and could be dropped."
        )
    return profile


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


def _stored_format(dataset: Dataset) -> TableFormat | None:
    if dataset.file_format in ("xlsx", "parquet") or dataset.encoding:
        return TableFormat(
            encoding=dataset.encoding,
            delimiter=dataset.delimiter or ",",
            file_format=dataset.file_format,
            sheet=dataset.sheet_name,
        )
    if dataset.file_format == "tsv":
        return TableFormat(file_format="tsv")
    return None


def _check_sha256(path: Path, expected: str) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(storage.CHUNK_BYTES * 8):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise InvalidInput("The stored dataset file does not match its recorded SHA-256.")


@contextlib.contextmanager
def scan_original(dataset: Dataset, limits: ReadLimits | None = None) -> Iterator[TableScan]:
    """The stored original, checked against its SHA-256 and opened for reading in batches.

    ``TableError`` (raised while opening or while iterating) says what is wrong with the file.
    """
    if not dataset.file_path:
        raise InvalidInput("This dataset's file was refused and is not stored.")
    with storage.local_path(dataset.file_path) as path:
        _check_sha256(path, dataset.sha256)
        scan = tabular.open_table(
            path, _stored_format(dataset), dataset.original_filename, limits or read_limits()
        )
        yield scan


def read_dataset_file(dataset: Dataset) -> tuple[pd.DataFrame, TableFormat]:
    """The whole original as a DataFrame of strings (small files and tests)."""
    try:
        with scan_original(dataset) as scan:
            table = pa.Table.from_batches(list(scan.batches()), schema=scan.schema)
            return table.to_pandas(), scan.format
    except TableError as exc:
        raise InvalidInput(str(exc)) from None


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
