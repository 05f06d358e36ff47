"""The extract run on Apache Spark, when the ``SPARK_MASTER`` setting names a cluster.

A round the worker would release batch by batch (:func:`.streamed.streams`) runs on Spark
instead: Spark reads the dataset's column store (the Parquet file of its cells beside the
original in private storage; on object storage, the worker's local copy) in place, counts the
frequency table, applies the transformation, orders the released rows and writes them into
buckets; the worker's process (Spark's driver) searches on the table with the engine's own
code and writes the package's CSV and Parquet files from the buckets (``engine.spark``). A
second job gives each input row's class (the membership later releases are judged with), the
file's first rows (the review's sample and examples) and the value counts of the columns
released as they are. Everything comes out as the in-process streamed run gives it: the
summary, the classes, the membership and the files' bytes.

Other rounds (the earlier row order, a configuration that needs the rows, a round protecting
earlier releases) run in the worker's process, as without Spark. A cluster that cannot be
reached or an executor lost in the middle of a run ends the attempt with one sentence
(``engine.spark.SparkError``, an engine refusal): nothing of it is kept, and it can be retried.

The cluster's executors must see the column store and the worker's temporary folder
(``FILE_UPLOAD_TEMP_DIR``) at the same paths: a cluster on the worker's machine, or a shared file
system (docs/scaling.md).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import cast

import pandas as pd
from django.conf import settings

from releases.core import storage
from releases.datasets import column_store
from releases.engine import AnonymizationConfig, spark
from releases.engine.export import Written
from releases.engine.frequency import FrequencyTable
from releases.engine.types import Algorithm, ProgressCallback
from releases.models import Dataset
from releases.requests import streamed
from releases.requests.parameters import ReleaseParameters

__all__ = ["ran_in_process", "ran_on_spark", "release", "session", "wanted"]


def wanted(scheme: str, params: ReleaseParameters, snapshot: dict) -> bool:
    """Whether a round goes to Spark: a master is set, and the round would be released batch
    by batch (:func:`.streamed.streams`: ordered by the keyed hash, and a configuration the
    engine releases from a frequency table). Decided before Spark is asked for anything, from
    what the configuration's hierarchies do not change (the model, the algorithm, which
    quasi-identifiers are microaggregated), so that a round that stays in process never
    depends on the cluster."""
    if not settings.SPARK_MASTER:
        return False
    qis = {qi["name"] for qi in snapshot["quasi_identifiers"]}
    probe = AnonymizationConfig(
        quasi_identifiers={},
        model=params.model,
        algorithm=cast(Algorithm, params.algorithm),
        microaggregate={k: v for k, v in (params.microaggregate or {}).items() if k in qis},
    )
    return streamed.streams(probe, scheme)


def ran_on_spark() -> str:
    """What the request page says of a round run on Spark."""
    return f"Apache Spark ({settings.SPARK_MASTER}); the search in the worker's process"


def ran_in_process() -> str:
    """What the request page says of a round the worker ran itself while a master is set."""
    return "the worker's process (this round needs the rows in memory, not on Spark)"


@contextlib.contextmanager
def session(dataset: Dataset) -> Iterator[spark.Job]:
    """A Spark job reading ``dataset``'s column store in place; stopped at the end."""
    if dataset.file_path and not storage.exists(dataset.file_path):
        # The store records the original's SHA-256; an original gone from storage is a fault.
        raise FileNotFoundError(f"The original of dataset {dataset.pk} is missing from storage.")
    with (
        column_store.opened(dataset) as path,
        spark.job(
            settings.SPARK_MASTER,
            str(path),
            Path(settings.FILE_UPLOAD_TEMP_DIR or tempfile.gettempdir()),
            settings.SPARK_CONNECT_SECONDS,
            app_name=f"anonymizer dataset {dataset.pk}",
        ) as job,
    ):
        yield job


def frequencies(job: spark.Job) -> Callable[[Dataset, Sequence[str]], FrequencyTable]:
    """:func:`.streamed.frequencies`, counted by Spark."""
    return lambda dataset, columns: job.frequency_table(list(columns))


def release(
    job: spark.Job,
    table: FrequencyTable,
    config: AnonymizationConfig,
    released: list[str],
    seed: int,
    folder: Path,
    progress: ProgressCallback | None = None,
    written: Callable[[int], None] | None = None,
    counted: Sequence[str] = (),
) -> streamed.StreamedRelease:
    """:func:`.streamed.release` on Spark: the same search, files and observations."""
    result, plan, classes = streamed.planned(table, config, released, seed, progress)
    csv_path, parquet_path = streamed.extract_paths(folder)
    made = job.release(
        plan, csv_path, parquet_path, progress=written, bucket_rows=streamed.CHUNK_ROWS
    )
    seen = job.observe(plan, classes, counted, streamed.HEAD_ROWS)
    observed = streamed.Observed(seen.membership, seen.head, dict(seen.counts))
    files = streamed.package_files(
        plan, folder, Written(sha256=made.sha256, size=made.size, rows=made.rows), observed
    )
    result.data = pd.DataFrame(columns=plan.columns)  # the extract is in the files
    return streamed.StreamedRelease(result, config, plan, table, classes, files, observed)
