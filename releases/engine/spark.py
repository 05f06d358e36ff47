"""The same job on Apache Spark: what grows with the rows runs on the cluster, the search on
the driver, with the engine's own code at every step.

Spark reads the input (one CSV or Parquet file, every cell as text, a missing cell ""),
numbers its rows in input order, and computes the frequency table of the quasi-identifiers
and the sensitive columns (a group-by with each combination's count and first row). The
driver runs the search on that table (:meth:`.lattice.EncodedData.from_frequencies`, the same
search as in process) and builds the :class:`.streaming.ReleasePlan`, which Spark broadcasts:
each partition applies :func:`.streaming.release_batch` to its rows (``mapInArrow``), Spark
sorts the released rows by their place in the file (:func:`.streaming.order_keys` of the seed
and the input row), and each bucket of the sorted rows (a range of keys) is written as an Arrow
IPC file into a scratch folder beside the output. The driver reads the buckets in order, one at
a time, and writes the CSV (and the Parquet file) with the engine's own writer
(:func:`.streaming.write_buckets`): their bytes are those the in-process engine writes for the
same seed.

The scratch folder must be visible to the driver and to every executor (a local cluster, or a
shared file system on a real one; see docs/scaling.md). A run that fails (the master cannot be
reached, an executor is lost, the input is missing or malformed) raises :class:`SparkError`
with one sentence for the person who ran it, and leaves no output: the output files are
written under temporary names and renamed at the end, the scratch folder is removed.
Spark's own task retries are off (``spark.task.maxFailures`` 1): a task that was running on
an executor when it was lost fails the run, which is retried as a whole (by the person, or by
the worker's lease recovery), so that every part is written by exactly one attempt. Work the
lost executor had already finished (its shuffle output) Spark recomputes on its own; that
writes no part, so the run then ends with the same bytes.
"""

from __future__ import annotations

import contextlib
import csv
import os
import pickle
import re
import shutil
import socket
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc

from .classes import Classes, codes_of
from .cross_release import NOT_IN
from .errors import EngineError
from .frequency import FIRST, ROWS, FrequencyTable
from .shuffle import order_keys
from .streaming import (
    ORDER,
    ReleasePlan,
    anonymize_frequencies,
    bucket_name,
    bucket_schema,
    plan_release,
    release_batch,
    write_buckets,
)
from .tabular import TableError, check_header, detect_delimiter
from .types import AnonymizationConfig, AnonymizationResult, ProgressCallback

try:  # the optional extra `spark` (pip install -e '.[spark]'): needed only when a run asks
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention
    from pyspark.sql import types as T  # noqa: N812

    PYSPARK = True
except ImportError:  # pragma: no cover - without the extra
    PYSPARK = False

__all__ = [
    "ROW",
    "Job",
    "Observation",
    "SparkError",
    "SparkRelease",
    "bucket_bits",
    "check_master",
    "connect",
    "frequency_table",
    "job",
    "local_file",
    "observe",
    "read_input",
    "release_on_spark",
    "write_released",
]

#: The column of each row's 0-based index in the input, added by :func:`read_input`.
ROW = "__row"
#: The released rows' sort key: the order key as a signed 64-bit integer (Spark has no
#: unsigned type; flipping the top bit keeps the order).
_SIGN = np.uint64(1 << 63)
#: The released rows' bucket: the top bits of the order key (:func:`bucket_bits`).
_BUCKET = "__bucket"
#: Rows per bucket of the released rows (each sorted by Spark within its partition).
BUCKET_ROWS = 1_000_000
#: Spark's log: warnings and errors only (its startup notes would fill the command's output).
_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} spark %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


class SparkError(EngineError):
    """The Spark run failed: the message says why, in one sentence."""


# --------------------------------------------------------------------------- the cluster


def check_master(master: str, timeout: float) -> None:
    """Refuse a master URL that is malformed or does not answer within ``timeout`` seconds
    (``local[N]`` is always there)."""
    if re.fullmatch(r"local(\[(\d+|\*)(,\d+)?\])?", master):
        return
    parsed = urlparse(master)
    try:
        port = parsed.port or 7077
    except ValueError:
        port = -1
    if parsed.scheme != "spark" or not parsed.hostname or port < 0:
        raise SparkError(f"The Spark master {master!r} is neither spark://HOST:PORT nor local[N].")
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise SparkError(
            f"The Spark master at {master} cannot be reached ({reason}, waited up to "
            f"{timeout:g} s): is the cluster running?"
        ) from None


def connect(master: str, timeout: float = 10.0, app_name: str = "anonymizer") -> Any:
    """A SparkSession on ``master`` (after :func:`check_master`); the caller stops it."""
    if not PYSPARK:
        raise SparkError(
            "Spark was asked for, but pyspark is not installed: pip install -e '.[spark]'."
        )
    check_master(master, timeout)
    # Spark's driver reads log4j2.properties from SPARK_CONF_DIR (unless one is set already).
    conf_dir = Path(tempfile.gettempdir()) / "anonymizer-spark-conf"
    conf_dir.mkdir(exist_ok=True)
    log_config = conf_dir / "log4j2.properties"
    if not log_config.exists() or log_config.read_text(encoding="utf-8") != _LOG4J:
        log_config.write_text(_LOG4J, encoding="utf-8")
    os.environ.setdefault("SPARK_CONF_DIR", str(conf_dir))
    # The executors run the engine (release_batch) in this Python unless told otherwise: on a
    # real cluster the same interpreter path, with the app installed, on every node.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    java_options = f"-Dlog4j2.configurationFile=file:{log_config}"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        # A lost executor fails the run (retried as a whole): every part is written once.
        .config("spark.task.maxFailures", "1")
        .config("spark.driver.host", _driver_host(master))
        .config("spark.driver.bindAddress", _driver_host(master))
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", java_options)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Adaptive execution merges small shuffle partitions (the frequency table is small).
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.executor.memory", os.environ.get("SPARK_EXECUTOR_MEMORY", "512m"))
    )
    try:
        with warnings.catch_warnings():
            # pyspark warns about pandas 3 for pandas-on-Spark; only its Arrow path is used.
            warnings.simplefilter("ignore", FutureWarning)
            session = builder.getOrCreate()
    except Exception as exc:  # the JVM's errors: one sentence, never a stack trace
        raise SparkError(f"Spark could not start on {master}: {_first_line(exc)}") from None
    # A few shuffle partitions per core, not Spark's fixed 200 (each is a task).
    cores = max(1, int(session.sparkContext.defaultParallelism))
    session.conf.set("spark.sql.shuffle.partitions", str(2 * cores))
    return session


def _driver_host(master: str) -> str:
    """The address executors reach the driver on: loopback for a cluster on this machine."""
    host = urlparse(master).hostname if master.startswith("spark://") else None
    if host in (None, "127.0.0.1", "localhost"):
        return "127.0.0.1"
    return socket.gethostbyname(socket.gethostname())


_PYTHON_ERROR = re.compile(r"^\s*(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


def _first_line(exc: BaseException) -> str:
    """The reason a Spark or Java exception gives, without Java's stack trace (for an error
    in the executors' Python, that error's own line)."""
    text = str(getattr(exc, "desc", None) or exc)
    if "thrown from the Python worker" in text or "PythonException" in text:
        found = _PYTHON_ERROR.findall(text)
        if found:
            name, message = found[-1]
            return f"the engine's code on an executor failed ({name}: {message.strip()})."
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "Traceback", "JVM stacktrace", "File ")):
            for prefix in ("org.apache.spark.SparkException: ", "java.io.IOException: "):
                line = line.replace(prefix, "")
            return line.rstrip(".") + "."
    return type(exc).__name__


_LOST = re.compile(
    r"ExecutorLost|executor \S+ exited|Remote RPC client disassociated|Executor heartbeat timed out"
    r"|Python worker exited unexpectedly|Connection reset|crashed",
    re.IGNORECASE,
)


@contextlib.contextmanager
def spark_errors(what: str) -> Iterator[None]:
    """Turn Spark's and Java's exceptions in the block into one :class:`SparkError`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    except EngineError:
        raise
    except Exception as exc:
        text = str(getattr(exc, "desc", None) or exc)
        if _LOST.search(text):
            message = (
                "a Spark executor was lost in the middle of the run (its process ended); "
                "nothing was written: run it again."
            )
        elif "PATH_NOT_FOUND" in text or "Path does not exist" in text:
            message = f"the input does not exist ({_first_line(exc)})"
        elif "Malformed" in text or "MALFORMED" in text:
            message = "a row does not have the header's number of fields (or a cell is malformed)."
        else:
            message = _first_line(exc)
        raise SparkError(f"Spark failed while {what}: {message}") from None


# --------------------------------------------------------------------------- reading


@dataclass
class Input:
    """The input as Spark reads it: every column text (a missing cell ""), plus :data:`ROW`."""

    frame: Any  # pyspark.sql.DataFrame
    columns: list[str]
    delimiter: str  # the extract's delimiter: the input's for text, "," for Parquet
    rows: int


def local_file(path: str) -> Path | None:
    """The local file ``path`` names (a plain path or a file: URI), or None for another URI."""
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme == "":
        return Path(path)
    return None


def _is_parquet(path: str) -> bool:
    return path.lower().endswith((".parquet", ".parq", ".pq"))


def read_input(spark: Any, path: str, delimiter: str | None = None) -> Input:
    """Read ``path`` (one CSV/TSV or Parquet file; a local path or a URI Spark reads, e.g.
    ``s3a://``) with Spark: every cell as text, "" for a missing cell, and each row's input
    index in :data:`ROW`."""
    local = local_file(path)
    if local is not None:
        if not local.exists():
            raise SparkError(f"The input {path} does not exist.")
        if local.is_dir():
            raise SparkError(f"The input {path} is a folder: give one CSV or Parquet file.")
        path = local.resolve().as_uri()
    with spark_errors(f"reading {path}"):
        if _is_parquet(path):
            raw = spark.read.parquet(path)
            columns = _check_header(list(raw.columns))
            sep = ","
        else:
            first = spark.read.text(path).first()
            if first is None:
                raise SparkError(f"The input {path} is empty.")
            header_line = str(first[0]).lstrip("\ufeff")
            sep = delimiter or detect_delimiter(header_line)
            columns = _check_header(next(csv.reader([header_line], delimiter=sep)))
            raw = spark.read.csv(
                path,
                header=True,
                sep=sep,
                quote='"',
                escape='"',
                encoding="UTF-8",
                inferSchema=False,
                mode="FAILFAST",
                enforceSchema=True,
            )
            if len(raw.columns) != len(columns):
                raise SparkError(
                    f"The header of {path} could not be read as {len(columns)} columns."
                )
        return _indexed(raw, columns, sep)


def _check_header(names: list[str]) -> list[str]:
    try:
        return check_header(names)
    except TableError as exc:
        raise SparkError(str(exc)) from None


def _indexed(raw: Any, columns: list[str], sep: str) -> Input:
    """Every column as text ("" for missing), named as the header says, plus :data:`ROW`:
    the rows of the partitions before the row's, plus its place in its partition (a single
    file's partitions are its consecutive splits, in order)."""
    text = raw.select(
        *[
            F.coalesce(F.col(f"`{old}`").cast("string"), F.lit("")).alias(new)
            for old, new in zip(raw.columns, columns, strict=True)
        ]
    )
    # monotonically_increasing_id is (partition << 33) + the row's place in its partition.
    ided = text.withColumn("__pid", F.spark_partition_id()).withColumn(
        "__mid", F.monotonically_increasing_id()
    )
    counts = {int(r[0]): int(r[1]) for r in ided.groupBy("__pid").count().collect()}
    offsets = []
    total = 0
    for pid in range(max(counts, default=-1) + 1):
        offsets.append(total)
        total += counts.get(pid, 0)
    offset = F.element_at(
        F.array(*[F.lit(o).cast("long") for o in offsets or [0]]), F.col("__pid") + 1
    )
    frame = ided.withColumn(
        ROW, offset + F.col("__mid") - F.shiftleft(F.col("__pid").cast("long"), 33)
    ).drop("__pid", "__mid")
    return Input(frame, columns, sep, total)


# --------------------------------------------------------------------------- frequency table


def frequency_table(data: Input, columns: Sequence[str]) -> FrequencyTable:
    """The frequency table of ``columns`` computed by Spark: one row per distinct combination
    with its rows and first row, ordered by first row (as :func:`.frequency.frequency_table`)."""
    names = list(columns)
    for name in names:
        if name not in data.columns:
            raise SparkError(f"Column {name!r} is not in the input.")
    with spark_errors("counting the combinations of the quasi-identifiers"):
        grouped = data.frame.groupBy(*[F.col(f"`{c}`") for c in names]).agg(
            F.count(F.lit(1)).alias(ROWS), F.min(ROW).alias(FIRST)
        )
        table = grouped.toArrow()
    table = table.sort_by([(FIRST, "ascending")])
    frame = pd.DataFrame(
        {
            **{c: table.column(c).to_numpy(zero_copy_only=False).astype(object) for c in names},
            ROWS: table.column(ROWS).to_numpy().astype("int64"),
            FIRST: table.column(FIRST).to_numpy().astype("int64"),
        },
        columns=[*names, ROWS, FIRST],
    )
    return FrequencyTable(frame, names, data.rows)


# --------------------------------------------------------------------------- the release


@dataclass(frozen=True)
class SparkWritten:
    """What :func:`write_released` wrote: the CSV's SHA-256 and size, its rows, and the
    buckets it was written in."""

    sha256: str
    size: int
    rows: int
    buckets: int


def _release_partition(
    payload: bytes, bits: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each partition runs: the released rows of its input rows, with their
    order key (made signed) and their bucket (the key's top ``bits`` bits)."""

    def apply(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        plan = pickle.loads(payload)
        for batch in batches:
            row_index = batch.column(batch.schema.get_field_index(ROW))
            released = release_batch(plan, batch.drop_columns([ROW]), row_index)
            keys = released.column(released.schema.get_field_index(ORDER))
            unsigned = keys.to_numpy(zero_copy_only=False).astype(np.uint64)
            bucket = (
                (unsigned >> np.uint64(64 - bits)).astype(np.int32)
                if bits
                else np.zeros(len(unsigned), dtype=np.int32)
            )
            yield pa.RecordBatch.from_arrays(
                [
                    *released.drop_columns([ORDER]).columns,
                    pa.array((unsigned ^ _SIGN).view(np.int64), type=pa.int64()),
                    pa.array(bucket, type=pa.int32()),
                ],
                names=[*plan.columns, ORDER, _BUCKET],
            )

    return apply


def _write_partition(
    folder: str, payload: bytes
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each partition runs on its rows, sorted by (bucket, key): each bucket's
    rows as an Arrow IPC stream of :func:`.streaming.bucket_schema` (the key unsigned again)
    into ``folder``/:func:`.streaming.bucket_name`, written under a temporary name and renamed
    once complete; yields (bucket, rows) per bucket."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        plan: ReleasePlan = pickle.loads(payload)
        schema = bucket_schema(plan)
        current: int | None = None
        out: IO[bytes] | None = None
        writer: ipc.RecordBatchStreamWriter | None = None
        rows = 0

        def close() -> pa.RecordBatch:
            assert out is not None and writer is not None and current is not None
            writer.close()
            out.close()
            os.replace(Path(out.name), Path(folder) / bucket_name(current))
            return pa.RecordBatch.from_arrays(
                [pa.array([current], type=pa.int32()), pa.array([rows], type=pa.int64())],
                names=[_BUCKET, "rows"],
            )

        try:
            for batch in batches:
                if not batch.num_rows:
                    continue
                buckets = batch.column(batch.schema.get_field_index(_BUCKET)).to_numpy()
                # Where the bucket changes within the batch (the rows are sorted by bucket).
                starts = [0, *(np.flatnonzero(np.diff(buckets)) + 1).tolist()]
                for start, stop in zip(starts, [*starts[1:], len(buckets)], strict=True):
                    bucket = int(buckets[start])
                    if bucket != current:
                        if out is not None:
                            yield close()
                        current, rows = bucket, 0
                        out = open(  # noqa: SIM115 - closed by close()
                            Path(folder) / f".{bucket:05d}.{os.getpid()}.tmp", "wb"
                        )
                        writer = ipc.new_stream(out, schema)
                    assert writer is not None
                    piece = batch.slice(start, stop - start)
                    signed = piece.column(piece.schema.get_field_index(ORDER)).to_numpy(
                        zero_copy_only=False
                    )
                    arrays = [
                        piece.column(piece.schema.get_field_index(name)).cast(pa.string())
                        for name in plan.columns
                    ]
                    arrays.append(pa.array(signed.view(np.uint64) ^ _SIGN, type=pa.uint64()))
                    writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
                    rows += piece.num_rows
            if out is not None:
                yield close()
                out = None
        finally:
            if writer is not None and out is not None and not out.closed:
                writer.close()
            if out is not None and not out.closed:
                out.close()

    return write


def bucket_bits(rows: int, bucket_rows: int) -> int:
    """Bits of the order key that pick a row's bucket: about ``bucket_rows`` rows per bucket
    (the keys are uniform), at most 4,096 buckets; the same as the in-process writer's
    (:func:`.streaming.write_released` with ``chunk_rows`` = ``bucket_rows``), so that the
    Parquet file's row groups (a bucket's rows, in slices) are the same too."""
    buckets = max(1, -(-rows // max(bucket_rows, 1)))
    return min((buckets - 1).bit_length(), 12)


def write_released(
    data: Input,
    plan: ReleasePlan,
    csv_path: Path,
    scratch: Path,
    bucket_rows: int | None = None,
    parquet_path: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> SparkWritten:
    """Apply ``plan`` to every row on the cluster and write the released rows as CSV to
    ``csv_path`` (and as Parquet to ``parquet_path``) in the order of their keys: each bucket
    of keys (a range of their top bits, sorted by Spark within it) is written by an executor
    into ``scratch`` as an Arrow IPC file; the driver then reads them in order, one at a time,
    and writes them with the engine's own writer (:func:`.streaming.write_buckets`): the bytes
    the in-process engine writes. ``scratch``: an empty folder the executors and the driver
    all see; ``progress(rows)``: rows written so far."""
    names = list(plan.columns)
    schema = T.StructType(
        [T.StructField(c, T.StringType(), False) for c in names]
        + [
            T.StructField(ORDER, T.LongType(), False),
            T.StructField(_BUCKET, T.IntegerType(), False),
        ]
    )
    bits = bucket_bits(plan.rows_out, BUCKET_ROWS if bucket_rows is None else bucket_rows)
    payload = pickle.dumps(plan)
    with spark_errors("applying the transformation and writing the extract"):
        released = data.frame.mapInArrow(_release_partition(payload, bits), schema)
        ordered = released.repartition(1 << bits, _BUCKET).sortWithinPartitions(_BUCKET, ORDER)
        written = ordered.mapInArrow(
            _write_partition(str(scratch), payload), f"{_BUCKET} int, rows long"
        ).toArrow()
    counts = dict(
        zip(written.column(_BUCKET).to_pylist(), written.column("rows").to_pylist(), strict=True)
    )
    rows = sum(int(n) for n in counts.values())
    if rows != plan.rows_out:
        raise SparkError(
            f"Spark released {rows:,} rows, the plan expected {plan.rows_out:,}: the input "
            "changed between its readings."
        )
    done = write_buckets(plan, sorted(counts), scratch, csv_path, parquet_path, progress)
    return SparkWritten(done.sha256, done.size, done.rows, len(counts))


# --------------------------------------------------------------------------- the entry point


@dataclass
class SparkRelease:
    """A release made on Spark: the engine's result (its ``data`` empty: the rows are in the
    file), the plan, what was written, the input's columns and the extract's delimiter."""

    result: AnonymizationResult
    plan: ReleasePlan
    written: SparkWritten
    columns: list[str]
    delimiter: str


def release_on_spark(
    master: str,
    path: str,
    frequency_columns: Sequence[str],
    configure: Callable[[FrequencyTable, list[str]], AnonymizationConfig],
    csv_path: str | os.PathLike[str],
    seed: int,
    delimiter: str | None = None,
    connect_seconds: float = 10.0,
    progress: ProgressCallback | None = None,
    bucket_rows: int | None = None,
    stage_done: Callable[[str, int], None] | None = None,
    parquet_path: str | os.PathLike[str] | None = None,
) -> SparkRelease:
    """The whole job on Spark: read ``path``, count the combinations of
    ``frequency_columns`` (the quasi-identifiers, then the sensitive columns), let
    ``configure(table, input_columns)`` give the configuration (e.g. hierarchies built on the
    table's distinct values), search on the driver, release and write the extract to
    ``csv_path`` (and to ``parquet_path``) in the order of ``seed``.

    The outputs are written only when everything succeeded (temporary files beside them are
    renamed); on any failure nothing is left there and :class:`SparkError` (or the engine's
    :class:`.errors.EngineError`) says why. ``stage_done(name, rows)`` is told as each stage
    ends."""

    def done(name: str, rows: int) -> None:
        if stage_done is not None:
            stage_done(name, rows)

    target = Path(csv_path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise SparkError(f"The folder of {target} does not exist.")
    local = local_file(path)
    if local is not None and not local.is_file():
        raise SparkError(
            f"The input {path} {'is a folder' if local.is_dir() else 'does not exist'}: give "
            "one CSV or Parquet file."
        )
    spark = connect(master, connect_seconds)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.spark-", dir=folder))
    temp = scratch / "extract.csv.tmp"
    parquet_temp = scratch / "extract.parquet.tmp"
    try:
        if progress is not None:
            progress(0.0, "reading the input on Spark")
        data = read_input(spark, path, delimiter)
        done("Spark: start + read + row index", data.rows)
        if progress is not None:
            progress(0.1, "counting the combinations on Spark")
        table = frequency_table(data, frequency_columns)
        done("Spark: frequency table", data.rows)
        config = configure(table, data.columns)
        result, enc, chosen = anonymize_frequencies(table, data.columns, config, progress)
        plan = plan_release(enc, chosen, config, data.columns, seed, data.delimiter)
        done("search (driver)", data.rows)
        if progress is not None:
            progress(0.9, "releasing the rows on Spark")
        parts = scratch / "parts"
        parts.mkdir()
        written = write_released(
            data,
            plan,
            temp,
            parts,
            bucket_rows,
            parquet_temp if parquet_path is not None else None,
        )
        if parquet_path is not None:
            os.replace(parquet_temp, parquet_path)
        os.replace(temp, target)
        done("Spark: release + order + write", written.rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        with contextlib.suppress(Exception):
            spark.stop()
    return SparkRelease(result, plan, written, data.columns, data.delimiter)


# --------------------------------------------------------------------------- a run's observations


@dataclass
class Observation:
    """What a release's run needs beside its files, gathered on the cluster: each input row's
    class number (:data:`.cross_release.NOT_IN` for a suppressed row), the first ``head_rows``
    released rows in the file's order (their input cells, :data:`.streaming.ORDER` and the
    input row in :data:`ROW`) and, per counted column, how many rows hold each value."""

    membership: np.ndarray
    head: pa.Table | None
    counts: dict[str, Counter[str]]


def _observe_partition(
    folder: str, payload: bytes, head_rows: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each partition runs: its rows' class numbers into ``folder`` (an Arrow IPC
    stream of (row, class) named after the partition's first row, renamed once complete), and
    yields its first ``head_rows`` released rows in the file's order (the key made signed)."""

    def observe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        plan, classes = pickle.loads(payload)
        schema = pa.schema([(ROW, pa.int64()), ("class", pa.int32())])
        head: pa.Table | None = None
        out: IO[bytes] | None = None
        writer: ipc.RecordBatchStreamWriter | None = None
        first: int | None = None
        try:
            for batch in batches:
                if not batch.num_rows:
                    continue
                rows = batch.column(batch.schema.get_field_index(ROW)).to_numpy().astype(np.int64)
                if writer is None:
                    first = int(rows[0])
                    out = open(  # noqa: SIM115 - closed below
                        Path(folder) / f".m{first:012d}.{os.getpid()}.tmp", "wb"
                    )
                    writer = ipc.new_stream(out, schema)
                names = batch.schema.names
                codes = [
                    codes_of(plan, q, batch.column(names.index(q))) for q in plan.quasi_identifiers
                ]
                member = classes.of(codes).astype(np.int32)
                writer.write_batch(
                    pa.RecordBatch.from_arrays(
                        [pa.array(rows), pa.array(member, type=pa.int32())], schema=schema
                    )
                )
                kept = np.flatnonzero(member != NOT_IN)
                keys = order_keys(plan.seed, rows[kept])
                if len(kept) > head_rows:
                    picked = np.argpartition(keys, head_rows)[:head_rows]
                    kept, keys = kept[picked], keys[picked]
                if len(kept):
                    taken = pa.Table.from_batches([batch.select(plan.columns).take(kept)])
                    part = taken.append_column(
                        ORDER, pa.array((keys ^ _SIGN).view(np.int64), pa.int64())
                    ).append_column(ROW, pa.array(rows[kept], pa.int64()))
                    joined = part if head is None else pa.concat_tables([head, part])
                    head = joined.sort_by(ORDER).slice(0, head_rows)
            if writer is not None and out is not None:
                writer.close()
                out.close()
                os.replace(Path(out.name), Path(folder) / f"m{first:012d}.arrow")
        finally:
            if out is not None and not out.closed:
                out.close()
        if head is not None:
            yield from head.combine_chunks().to_batches()

    return observe


def observe(
    data: Input,
    plan: ReleasePlan,
    classes: Classes,
    counted: Sequence[str],
    scratch: Path,
    head_rows: int,
) -> Observation:
    """The :class:`Observation` of the release ``plan`` of ``data`` (its classes numbered by
    ``classes``), computed by Spark: the class numbers are written by the executors into
    ``scratch`` (a folder they and the driver see) and gathered here one partition at a time."""
    schema = T.StructType(
        [T.StructField(c, T.StringType(), False) for c in plan.columns]
        + [T.StructField(ORDER, T.LongType(), False), T.StructField(ROW, T.LongType(), False)]
    )
    payload = pickle.dumps((plan, classes))
    with spark_errors("finding each row's class"):
        frame = data.frame.select(*[F.col(f"`{c}`") for c in plan.columns], ROW)
        heads = frame.mapInArrow(
            _observe_partition(str(scratch), payload, head_rows), schema
        ).toArrow()
    membership = np.full(data.rows, NOT_IN, dtype=np.int32)
    seen = 0
    for piece in sorted(scratch.glob("m*.arrow")):
        with ipc.open_stream(pa.memory_map(str(piece))) as reader:
            for batch in reader:
                rows = batch.column(0).to_numpy()
                membership[rows] = batch.column(1).to_numpy()
                seen += len(rows)
    if seen != data.rows:
        raise SparkError(
            f"Spark gave the class of {seen:,} rows, the input has {data.rows:,}: the input "
            "changed between its readings."
        )
    head: pa.Table | None = None
    if heads.num_rows:
        ordered = heads.sort_by(ORDER).slice(0, head_rows)
        signed = ordered.column(ORDER).to_numpy()
        head = pa.table(
            {
                **{c: ordered.column(c).cast(pa.string()) for c in plan.columns},
                ORDER: pa.array(signed.view(np.uint64) ^ _SIGN, pa.uint64()),
                ROW: ordered.column(ROW).cast(pa.int64()),
            }
        )
    counts: dict[str, Counter[str]] = {}
    for name in counted:
        with spark_errors(f"counting the values of {name!r}"):
            table = data.frame.groupBy(F.col(f"`{name}`")).count().toArrow()
        counts[name] = Counter(
            dict(
                zip(
                    [str(v) for v in table.column(0).to_pylist()],
                    [int(v) for v in table.column(1).to_pylist()],
                    strict=True,
                )
            )
        )
    return Observation(membership, head, counts)


# --------------------------------------------------------------------------- a session for a run


@dataclass
class Job:
    """One input read by Spark for a run: its :class:`Input`, and a scratch folder (beside the
    run's files) the executors write into."""

    spark: Any
    data: Input
    scratch: Path

    def frequency_table(self, columns: Sequence[str]) -> FrequencyTable:
        return frequency_table(self.data, columns)

    def restricted(self, columns: Sequence[str]) -> Input:
        """The input with only ``columns`` (and :data:`ROW`)."""
        for name in columns:
            if name not in self.data.columns:
                raise SparkError(f"Column {name!r} is not in the input.")
        frame = self.data.frame.select(*[F.col(f"`{c}`") for c in columns], ROW)
        return Input(frame, list(columns), self.data.delimiter, self.data.rows)

    def release(
        self,
        plan: ReleasePlan,
        csv_path: Path,
        parquet_path: Path | None,
        progress: Callable[[int], None] | None = None,
        bucket_rows: int | None = None,
    ) -> SparkWritten:
        """Write the released rows of ``plan`` (see :func:`write_released`)."""
        parts = Path(tempfile.mkdtemp(prefix="parts-", dir=self.scratch))
        try:
            return write_released(
                self.restricted(plan.input_columns),
                plan,
                csv_path,
                parts,
                bucket_rows,
                parquet_path,
                progress,
            )
        finally:
            shutil.rmtree(parts, ignore_errors=True)

    def observe(
        self, plan: ReleasePlan, classes: Classes, counted: Sequence[str], head_rows: int
    ) -> Observation:
        folder = Path(tempfile.mkdtemp(prefix="classes-", dir=self.scratch))
        try:
            return observe(
                self.restricted(list(dict.fromkeys([*plan.input_columns, *counted]))),
                plan,
                classes,
                counted,
                folder,
                head_rows,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def job(
    master: str,
    path: str,
    folder: Path,
    connect_seconds: float = 10.0,
    app_name: str = "anonymizer",
) -> Iterator[Job]:
    """A :class:`Job` on ``master`` reading ``path`` (one CSV or Parquet file), its scratch
    folder inside ``folder``; the session is stopped and the scratch folder removed at the
    end, whatever happens."""
    local = local_file(path)
    if local is not None and not local.is_file():
        raise SparkError(f"The input {path} does not exist or is not a file.")
    spark = connect(master, connect_seconds, app_name)
    scratch = Path(tempfile.mkdtemp(prefix=".spark-", dir=folder))
    try:
        yield Job(spark, read_input(spark, path), scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        with contextlib.suppress(Exception):
            spark.stop()
