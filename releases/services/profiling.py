"""Column profiles: inferred type, distinct and missing values, top values and a small chart.

``profile_dataset`` is the body of the Celery task that parses an uploaded file; it can also
be called directly (tests, ``tests/support/factories.make_dataset``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import numpy as np
import pandas as pd
from django.db import transaction
from django.utils import timezone

from ..engine.tabular import TableError, TableFormat, read_table
from ..models import AuditEvent, Dataset, DatasetColumn
from ..models.datasets import ColumnType, DateOrder
from . import InvalidInput, audit, column_store, storage, suggestions

logger = logging.getLogger(__name__)

PREVIEW_ROWS = 10
TOP_VALUES = 5
CHART_BARS = 8
HISTOGRAM_BINS = 12
#: Cells that mean "missing" in exports (besides the empty cell); counted, never changed.
MISSING_MARKERS = frozenset(
    {"", "?", "NA", "N/A", "n/a", "na", "NULL", "null", "None", "NaN", "nan", "-", "#N/A"}
)

INTEGER = re.compile(r"^[+-]?\d+$")
DECIMAL = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
ISO_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})([T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?$")
SLASH_DATE = re.compile(r"^(\d{1,2})[/.-](\d{1,2})[/.-](\d{4}|\d{2})$")


# --- Types --------------------------------------------------------------------------------


def missing_mask(series: pd.Series) -> pd.Series:
    return series.str.strip().isin(MISSING_MARKERS)


def date_order_of(values: pd.Series) -> tuple[str, bool] | None:
    """The date order if every value is a date: ("ymd" | "dmy" | "mdy", ambiguous)."""
    if values.empty:
        return None
    if values.str.fullmatch(ISO_DATE.pattern).all():
        return DateOrder.ISO, False
    parts = values.str.extract(SLASH_DATE.pattern)
    if parts.isna().any().any():
        return None
    first, second = parts[0].astype(int), parts[1].astype(int)
    if (
        (first < 1) | (second < 1) | ((first > 12) & (second > 12)) | (first > 31) | (second > 31)
    ).any():
        return None
    if (first > 12).any():
        return DateOrder.DMY, False
    if (second > 12).any():
        return DateOrder.MDY, False
    return DateOrder.DMY, True  # every day is 12 or less: the steward chooses


def parse_dates(values: pd.Series, order: str) -> pd.Series:
    if order == DateOrder.ISO:
        return pd.to_datetime(values, errors="coerce", format="ISO8601")
    parts = values.str.extract(SLASH_DATE.pattern)
    day, month = (parts[0], parts[1]) if order == DateOrder.DMY else (parts[1], parts[0])
    year = parts[2].where(parts[2].str.len() == 4, "20" + parts[2].fillna(""))
    return pd.to_datetime(
        pd.DataFrame(
            {
                "year": pd.to_numeric(year, errors="coerce"),
                "month": pd.to_numeric(month, errors="coerce"),
                "day": pd.to_numeric(day, errors="coerce"),
            }
        ),
        errors="coerce",
    )


def infer_type(present: pd.Series, distinct: int) -> tuple[str, str]:
    """(type, date order) of a column from its non-missing values."""
    if present.empty:
        return ColumnType.CATEGORICAL, ""
    sample = present.str.strip()
    # Leading zeros (ZIP codes, account numbers) make a code, not a number.
    coded = sample.str.fullmatch(r"[+-]?0\d+(\.\d*)?").any()
    if not coded and sample.str.fullmatch(INTEGER.pattern).all():
        return ColumnType.INTEGER, ""
    if not coded and sample.str.fullmatch(DECIMAL.pattern).all():
        return ColumnType.DECIMAL, ""
    order = date_order_of(sample)
    if order is not None:
        return ColumnType.DATE, order[0]
    if distinct <= 50 or distinct <= 0.2 * len(present):
        return ColumnType.CATEGORICAL, ""
    return ColumnType.TEXT, ""


# --- Profiles -----------------------------------------------------------------------------


def _histogram(numbers: np.ndarray, labels: Callable[[float, float], str]) -> list[dict]:
    numbers = numbers[np.isfinite(numbers)]
    if numbers.size == 0:
        return []
    lo, hi = float(numbers.min()), float(numbers.max())
    bins = 1 if lo == hi else min(HISTOGRAM_BINS, max(2, len(np.unique(numbers))))
    counts, edges = np.histogram(numbers, bins=bins, range=(lo, hi if hi > lo else lo + 1))
    return [
        {"label": labels(float(edges[i]), float(edges[i + 1])), "count": int(c)}
        for i, c in enumerate(counts)
    ]


def _number_label(lo: float, hi: float) -> str:
    def fmt(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:.4g}"

    return f"{fmt(lo)}–{fmt(hi)}"


def column_profile(series: pd.Series, column_type: str | None = None, date_order: str = "") -> dict:
    """Everything the page shows about one column (all JSON-serializable)."""
    total = len(series)
    missing = missing_mask(series)
    present = series[~missing]
    counts = series.value_counts(sort=True)
    distinct = int(counts.size)
    inferred, inferred_order = infer_type(present, int(present.nunique()))
    chosen = column_type or inferred
    order = date_order or inferred_order
    profile: dict = {
        "rows": total,
        "distinct": distinct,
        "unique_share": (distinct / total) if total else 0.0,
        "unique_rows": int((counts == 1).sum()),
        "missing": int(missing.sum()),
        "missing_markers": sorted(
            {m if m else "(empty)" for m in series[missing].str.strip().unique()}
        ),
        "top": [{"value": str(v), "count": int(c)} for v, c in counts.head(TOP_VALUES).items()],
        "inferred_type": inferred,
        "date_order": order,
        "date_ambiguous": False,
        "single_value": distinct == 1,
        "warnings": [],
    }
    if inferred == ColumnType.DATE:
        detected = date_order_of(present.str.strip())
        profile["date_ambiguous"] = bool(detected and detected[1])
    chart: dict = {"kind": "bars", "bins": []}
    if chosen in (ColumnType.INTEGER, ColumnType.DECIMAL):
        numbers = pd.to_numeric(present.str.strip(), errors="coerce").to_numpy(dtype=float)
        unparsed = int(np.isnan(numbers).sum())
        if unparsed:
            profile["warnings"].append(f"{unparsed} values are not numbers.")
        chart = {"kind": "histogram", "bins": _histogram(numbers, _number_label)}
        finite = numbers[np.isfinite(numbers)]
        if finite.size:
            profile["min"], profile["max"] = (
                int(x) if float(x).is_integer() and abs(x) < 1e15 else float(x)
                for x in (finite.min(), finite.max())
            )
    elif chosen == ColumnType.DATE:
        parsed = parse_dates(present.str.strip(), order or DateOrder.ISO)
        unparsed = int(parsed.isna().sum())
        if unparsed:
            profile["warnings"].append(f"{unparsed} values are not dates in this format.")
        valid = parsed.dropna()
        if not valid.empty:
            profile["min"], profile["max"] = (
                valid.min().date().isoformat(),
                valid.max().date().isoformat(),
            )
            seconds = valid.astype("int64").to_numpy() / 1e9

            def label(lo: float, hi: float) -> str:
                a = pd.Timestamp(lo, unit="s").date().isoformat()
                b = pd.Timestamp(hi, unit="s").date().isoformat()
                return f"{a} – {b}"

            chart = {"kind": "histogram", "bins": _histogram(seconds, label)}
    else:
        shown = counts.head(CHART_BARS)
        chart = {
            "kind": "bars",
            "bins": [
                {"label": str(v) if v != "" else "(empty)", "count": int(c)}
                for v, c in shown.items()
            ],
        }
        if distinct > CHART_BARS:
            chart["other"] = int(counts.iloc[CHART_BARS:].sum())
    profile["chart"] = chart
    if profile["single_value"]:
        profile["warnings"].append(
            "Every row has the same value: the column tells nothing apart and could be dropped."
        )
    return profile


# --- Charts -------------------------------------------------------------------------------


# --- The task's body ----------------------------------------------------------------------


def _progress(dataset: Dataset, progress: float, stage: str) -> None:
    Dataset.objects.filter(pk=dataset.pk).update(
        progress=progress, stage=stage, heartbeat_at=timezone.now()
    )


def read_dataset_file(dataset: Dataset) -> tuple[pd.DataFrame, TableFormat]:
    raw = storage.read_bytes(dataset.file_path)
    if storage.sha256_hex(raw) != dataset.sha256:
        raise InvalidInput("The stored dataset file does not match its recorded SHA-256.")
    fmt = None
    if dataset.file_format in ("xlsx", "parquet") or dataset.encoding:
        fmt = TableFormat(
            encoding=dataset.encoding,
            delimiter=dataset.delimiter or ",",
            file_format=dataset.file_format,
            sheet=dataset.sheet_name,
        )
    elif dataset.file_format == "tsv":
        fmt = TableFormat(file_format="tsv")
    try:
        return read_table(raw, fmt, dataset.original_filename)
    except TableError as exc:
        raise InvalidInput(str(exc)) from None


def profile_dataset(dataset_id: int) -> Dataset | None:
    """Parse the stored file, profile each column, suggest roles; or record why it was refused.

    Runs once per dataset: a dataset already profiled (or refused) is left as it is.
    """
    # A conditional update claims the dataset: of two runs (a redelivered task), one proceeds.
    claimed = Dataset.objects.filter(pk=dataset_id, status=Dataset.Status.PENDING).update(
        status=Dataset.Status.PROFILING,
        stage="Reading the file",
        progress=0.05,
        heartbeat_at=timezone.now(),
    )
    dataset = Dataset.objects.filter(pk=dataset_id).first()
    if not claimed or dataset is None:
        return dataset
    try:
        frame, fmt = read_dataset_file(dataset)
        _progress(dataset, 0.3, f"Profiling {len(frame.columns)} columns of {len(frame)} rows")
        columns = []
        n = len(frame.columns)
        for position, name in enumerate(frame.columns):
            series = frame[name]
            profile = column_profile(series)
            suggestion = suggestions.suggest(name, series, profile)
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
            if position % 5 == 4:
                _progress(
                    dataset,
                    0.3 + 0.6 * (position + 1) / n,
                    f"Profiled {position + 1} of {n} columns",
                )
    except InvalidInput as exc:
        refuse(dataset, str(exc))
        return dataset
    except Exception:  # an unexpected failure still ends in a readable state
        logger.exception("Profiling dataset %s failed", dataset_id)
        refuse(
            dataset,
            "The file could not be read because of an internal error. The administrators can "
            "find the details in the worker's log.",
        )
        return dataset
    column_store.write(dataset, frame)
    with transaction.atomic():
        for column in columns:
            column.dataset = dataset
        DatasetColumn.objects.bulk_create(columns)
        dataset.encoding = fmt.encoding
        dataset.delimiter = fmt.delimiter if fmt.file_format in ("csv", "tsv") else ""
        dataset.sheet_name = fmt.sheet
        dataset.row_count = len(frame)
        dataset.preview = frame.head(PREVIEW_ROWS).values.tolist()
        dataset.status = Dataset.Status.READY
        dataset.progress = 1.0
        dataset.stage = "Profiled"
        dataset.error = ""
        dataset.profiled_at = timezone.now()
        dataset.save()
        audit.record(
            AuditEvent.Action.PROFILED,
            None,
            dataset=dataset,
            dataset_name=dataset.name,
            rows=len(frame),
            columns=len(frame.columns),
            format=fmt.file_format,
            encoding=fmt.encoding,
            sheet=fmt.sheet,
        )
    return dataset


def refuse(dataset: Dataset, reason: str) -> None:
    """A refused file: the dataset keeps only the reason; its stored file is removed."""
    path = dataset.file_path
    with transaction.atomic():
        Dataset.objects.filter(pk=dataset.pk).update(
            status=Dataset.Status.FAILED, error=reason, stage="Refused", progress=1.0, file_path=""
        )
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
    storage.delete_quietly(path)
    dataset.refresh_from_db()
