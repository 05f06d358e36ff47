"""The re-identification risk of a dataset before release, on the quasi-identifiers tagged now:
rows unique on them and the prosecutor risk of the data as they are. Small datasets are measured
in the page's request; larger ones by a worker (``store_risk``), whose figures the panel reads.

The panel only reads: a worker is asked (:func:`request_risk`) when the roles change, in the
transaction that changes them, and by the sweeper for a large dataset whose figures are
missing (the limit was lowered, or the worker asked died).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from django.db import transaction
from django.utils import timezone

from releases.background import outbox, recovery
from releases.datasets import column_store
from releases.engine.attribute_risk import attribute_risks
from releases.engine.frequency import ROWS, frequency_table
from releases.engine.risk import risk_summary
from releases.models import Dataset, Role

#: The task that measures a large dataset's risk.
RISK_TASK = "releases.dataset_risk"


#: Datasets up to this many rows have their risk computed in the page's request (tens of
#: milliseconds); larger ones by a worker, the panel polling until it is stored.
INLINE_RISK_ROWS = 200_000
#: A computation asked for this long ago and not stored is asked for again (its worker died).
RISK_RETRY_SECONDS = 120
#: In a page, the combinations of quasi-identifiers measured are bounded by this many distinct
#: rows times combinations (about a third of a second); a worker measures more.
INLINE_COMBINATION_WORK = 3_000_000
#: A worker's bound (tens of seconds at most on millions of distinct rows).
WORKER_COMBINATION_WORK = 100_000_000
#: Combinations listed on the panel, those that tell the most rows apart first.
COMBINATIONS_SHOWN = 12


def _quasi_identifiers(dataset: Dataset) -> list[str]:
    return list(
        dataset.columns.filter(role=Role.QUASI_IDENTIFIER)
        .order_by("position")
        .values_list("name", flat=True)
    )


def reidentification_risk(dataset: Dataset) -> dict:
    """Rows unique on the chosen quasi-identifiers, and the prosecutor risk of the data as is.

    Small datasets are measured here; for large ones the figures a worker stored for these
    quasi-identifiers, or ``{"pending": True}`` while a worker computes them (asked for when
    the roles changed, or by the sweeper): a web request never reads millions of rows, and
    writes nothing."""
    quasi = _quasi_identifiers(dataset)
    if not quasi or not dataset.is_ready:
        return {"quasi_identifiers": quasi, "rows": dataset.row_count}
    stored = dataset.risk or {}
    if stored.get("quasi_identifiers") == quasi and "classes" in stored:
        return stored
    if dataset.row_count <= INLINE_RISK_ROWS:
        return measure_risk(dataset, quasi)
    return {"quasi_identifiers": quasi, "rows": dataset.row_count, "pending": True}


def request_risk(dataset: Dataset) -> bool:
    """Ask a worker for the risk on the quasi-identifiers tagged now, when the dataset is too
    large to measure in a page and its figures for them are neither stored nor asked for
    within ``RISK_RETRY_SECONDS``; returns whether it asked. Sent once the caller's
    transaction commits (it is rolled back with it)."""
    current = Dataset.objects.filter(pk=dataset.pk).values("status", "row_count", "risk").first()
    if current is None or current["status"] != Dataset.Status.READY:
        return False
    if (current["row_count"] or 0) <= INLINE_RISK_ROWS:
        return False
    quasi = _quasi_identifiers(dataset)
    stored = current["risk"] or {}
    if not quasi or (stored.get("quasi_identifiers") == quasi and "classes" in stored):
        return False
    now = timezone.now().timestamp()
    if stored.get("pending") == quasi and now - stored.get("asked_at", 0) <= RISK_RETRY_SECONDS:
        return False
    with transaction.atomic():
        Dataset.objects.filter(pk=dataset.pk).update(risk={"pending": quasi, "asked_at": now})
        outbox.enqueue(RISK_TASK, dataset.pk)
    return True


def ask_missing_risks() -> int:
    """The sweeper's part: large datasets whose figures for their quasi-identifiers are
    missing get a worker asked; returns how many."""
    large = Dataset.objects.filter(
        status=Dataset.Status.READY, row_count__gt=INLINE_RISK_ROWS
    ).order_by("pk")
    return sum(request_risk(dataset) for dataset in large[: recovery.SWEEP_BATCH])


def store_risk(dataset_id: int) -> None:
    """The worker's part: measure the risk on the quasi-identifiers tagged now and store it."""
    dataset = Dataset.objects.filter(pk=dataset_id).first()
    if dataset is None or not dataset.is_ready:
        return
    quasi = _quasi_identifiers(dataset)
    stored = dataset.risk or {}
    if not quasi or (stored.get("quasi_identifiers") == quasi and "classes" in stored):
        return  # asked again while a slow worker measured them: measured already
    figures = measure_risk(dataset, quasi, max_work=WORKER_COMBINATION_WORK)
    Dataset.objects.filter(pk=dataset_id).update(risk=figures)


def measure_risk(
    dataset: Dataset, quasi: list[str], max_work: int | None = INLINE_COMBINATION_WORK
) -> dict:
    """The figures, from the quasi-identifiers' columns read as codes from the column store,
    with the combinations of quasi-identifiers that single people out (α-distinction and
    α-separation; ``max_work`` bounds how many are measured)."""
    # The frequency table of the quasi-identifiers, read a batch at a time: memory grows with
    # their distinct combinations, not with the rows.
    table = frequency_table(column_store.batches(dataset, quasi), quasi)
    # Building it leaves Arrow's pool holding freed buffers (hundreds of MB at 12M rows) that
    # the measures below, in numpy's memory, would come on top of: give them back first.
    pa.default_memory_pool().release_unused()
    frame = table.frame
    sizes = frame[ROWS].to_numpy(dtype=np.int64)
    summary = risk_summary(sizes)
    unique_rows = int((sizes == 1).sum())
    measured = (
        attribute_risks(frame, quasi, max_work=max_work, rows=sizes) if len(quasi) > 1 else []
    )
    # Proper subsets only (the whole set is the figures above), most rows told apart first.
    singling = sorted(
        (r for r in measured if len(r.columns) < len(quasi)),
        key=lambda r: (-r.unique_rows, -r.distinction, len(r.columns)),
    )
    return {
        "quasi_identifiers": quasi,
        "rows": table.rows,
        "unique_rows": unique_rows,
        "unique_percent": 100.0 * unique_rows / table.rows if table.rows else 0.0,
        "classes": int(sizes.size),
        "smallest_class": int(sizes.min()) if sizes.size else 0,
        "highest_percent": 100 * summary.highest,
        "average_percent": 100 * summary.average,
        "at_risk_percent": 100 * summary.records_at_risk,
        "combinations": [r.as_dict() for r in singling[:COMBINATIONS_SHOWN]],
        "combinations_measured": len(measured),
        "largest_combination": max((len(r.columns) for r in measured), default=0),
    }
