"""The release in bounded memory: the search on the frequency table, the rows streamed.

The in-memory engine (:func:`.api.anonymize`) holds every row. This module releases a table that
is read in Arrow record batches, twice, and never held whole:

1. :func:`.frequency.frequency_table` counts the distinct combinations of the quasi-identifiers
   (and sensitive values) batch by batch; :func:`anonymize_frequencies` runs the same search on
   it (:meth:`.lattice.EncodedData.from_frequencies`) and gives the same result (levels,
   suppressed rows, classes, Loss, report) as the in-memory engine, without the extract.
2. :func:`plan_release` reduces the chosen transformation to a small :class:`ReleasePlan` (per
   quasi-identifier, each input value's released label; the suppressed classes; the seed);
   :func:`release_batch` turns a batch of input rows into its released rows, a pure function
   of (plan, row, row index) that Spark can call per partition, and :func:`write_released`
   writes them in the extract's order (the keyed hash of :mod:`.shuffle`) through temporary
   bucket files, so that the file has the same bytes the in-memory engine writes.

What needs the rows themselves is refused here (:data:`UNSUPPORTED`): Mondrian, a research
subset, microaggregation, earlier releases and SafePub's sampling; the command line then uses
the in-memory engine.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from . import safepub
from .api import Chosen, generalized_config, loss_weights, release, validate_shape
from .arrays import BoolArray, IntArray
from .criteria import DataContext, EarlierReleases
from .errors import EngineError
from .export import BATCH_ROWS, Written, csv_cells, csv_header, csv_lines
from .frequency import FrequencyTable
from .lattice import EncodedData
from .shuffle import KEYED, SCHEMES, order_keys
from .types import AnonymizationConfig, AnonymizationResult, ProgressCallback

__all__ = [
    "ORDER",
    "UNSUPPORTED",
    "ReleasePlan",
    "anonymize_frequencies",
    "bucket_name",
    "bucket_schema",
    "frequency_columns",
    "order_keys",
    "plan_release",
    "release_batch",
    "streaming_refusal",
    "write_buckets",
    "write_released",
]

#: The column of a released batch holding each row's order key.
ORDER = "__order"
#: What the streamed release does not do (the in-memory engine does).
UNSUPPORTED = (
    "Mondrian, a research subset, microaggregation, earlier releases and SafePub need the rows "
    "in memory"
)
#: Most bucket files :func:`write_released` spreads the rows over.
MAX_BUCKETS = 4096


def streaming_refusal(config: AnonymizationConfig) -> str | None:
    """Why ``config`` cannot be released from a frequency table (one sentence), or None."""
    if config.algorithm == "mondrian":
        return "Mondrian partitions the rows themselves: it needs them in memory."
    if config.research_subset is not None:
        return "A research subset is matched row by row: it needs the rows in memory."
    if config.microaggregate:
        return "Microaggregation computes each class's values from its rows: it needs them."
    if config.earlier_releases or any(
        isinstance(c, EarlierReleases) for c in config.model.criteria
    ):
        return "Earlier releases give each input row's class: they need the rows in memory."
    if safepub.find(config.model) is not None:
        return "SafePub samples the rows: it needs them in memory."
    return None


def frequency_columns(config: AnonymizationConfig) -> list[str]:
    """The columns the frequency table of ``config`` counts: the quasi-identifiers, then the
    sensitive attributes."""
    return [*config.quasi_identifiers, *config.sensitive]


def anonymize_frequencies(
    table: FrequencyTable,
    input_columns: Sequence[str],
    config: AnonymizationConfig,
    progress: ProgressCallback | None = None,
) -> tuple[AnonymizationResult, EncodedData, Chosen]:
    """:func:`.api.anonymize` on the input's frequency table: the same result (its ``data``
    empty, ``source_rows`` None), the encoded input and the transformation chosen, from which
    :func:`plan_release` makes the plan. Raises :class:`EngineError` for a configuration that
    needs the rows (:func:`streaming_refusal`) and for whatever the engine refuses."""
    started = time.perf_counter()
    refusal = streaming_refusal(config)
    if refusal is not None:
        raise EngineError(refusal)
    validate_shape(list(input_columns), table.rows, config)
    utility = config.utility()
    config = generalized_config(config)
    if progress is not None:
        progress(0.0, "encoding the frequency table")
    enc = EncodedData.from_frequencies(
        table,
        dict(config.quasi_identifiers),
        config.sensitive,
        config.sensitive_hierarchies,
        track_first=bool(config.model.dataset_criteria),
    )
    enc.weights = loss_weights(config)
    model = config.model
    population_size = model.population.size(enc.n) if model.population is not None else None
    context: DataContext = enc.data_context(config.sensitive_hierarchies, population_size)
    result, chosen = release(enc, context, config, utility, None, progress, started, None)
    return result, enc, chosen


@dataclass
class ReleasePlan:
    """Everything needed to turn an input row into its released row; small (it grows with the
    distinct values and the suppressed classes, not with the rows) and picklable.

    ``input_columns``: the input's columns; ``columns``: the released ones (identifiers
    dropped), in the input's order. Per quasi-identifier, ``values[q]`` its distinct input
    values, ``labels[q]`` the released label of each and ``codes[q]`` each one's class code at
    the chosen level (``cardinalities[q]`` codes); ``suppressed`` the class codes (one column
    per quasi-identifier) of the classes suppressed. ``seed`` and ``scheme`` give the order."""

    input_columns: list[str]
    columns: list[str]
    levels: dict[str, int]
    values: dict[str, list[str]]
    labels: dict[str, list[str]]
    codes: dict[str, list[int]]
    cardinalities: dict[str, int]
    suppressed: list[list[int]]
    seed: int
    rows_in: int
    rows_out: int
    delimiter: str = ","
    scheme: str = KEYED
    #: Microaggregated values per class (not released from a plan yet: always empty).
    aggregated: dict[str, list[str]] = field(default_factory=dict)
    #: The lookups :func:`release_batch` uses, built once per process (not pickled).
    _lookup: _Lookup | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def quasi_identifiers(self) -> list[str]:
        return list(self.values)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_lookup"] = None
        return state


@dataclass
class _Lookup:
    """A plan's lists as Arrow and numpy arrays: per quasi-identifier its values, labels and
    class codes; the suppressed classes' keys, sorted (or, when the classes' codes do not fit
    one int64, their code tuples)."""

    values: dict[str, pa.Array]
    labels: dict[str, pa.Array]
    codes: dict[str, IntArray]
    failing: IntArray | None
    failing_tuples: set[tuple[int, ...]]


def _lookup(plan: ReleasePlan) -> _Lookup:
    if plan._lookup is None:
        failing = np.asarray(plan.suppressed, dtype=np.int64).reshape(
            len(plan.suppressed), len(plan.quasi_identifiers)
        )
        key = _class_key(plan, [failing[:, i] for i in range(failing.shape[1])])
        plan._lookup = _Lookup(
            values={q: pa.array(v, type=pa.string()) for q, v in plan.values.items()},
            labels={q: pa.array(v, type=pa.string()) for q, v in plan.labels.items()},
            codes={q: np.asarray(c, dtype=np.int64) for q, c in plan.codes.items()},
            failing=None if key is None else np.unique(key),
            failing_tuples=set() if key is not None else {tuple(r) for r in failing.tolist()},
        )
    return plan._lookup


def plan_release(
    enc: EncodedData,
    chosen: Chosen,
    config: AnonymizationConfig,
    input_columns: Sequence[str],
    seed: int,
    delimiter: str = ",",
    scheme: str = KEYED,
) -> ReleasePlan:
    """The plan of the transformation ``chosen`` (:func:`anonymize_frequencies`)."""
    if seed < 0:
        raise EngineError(f"The seed must be a whole number of at least 0, not {seed}.")
    if scheme not in SCHEMES:
        raise EngineError(f"Unknown row order {scheme!r}; use {' or '.join(SCHEMES)}.")
    values: dict[str, list[str]] = {}
    labels: dict[str, list[str]] = {}
    codes: dict[str, list[int]] = {}
    cards: dict[str, int] = {}
    levels: dict[str, int] = {}
    for attribute, level in zip(enc.attributes, chosen.levels, strict=True):
        name = attribute.name
        at_level = attribute.gen[level]
        values[name] = [attribute.labels[0][c] for c in attribute.gen[0]]
        labels[name] = [attribute.labels[level][c] for c in at_level]
        codes[name] = [int(c) for c in at_level]
        cards[name] = attribute.cardinality(level)
        levels[name] = int(level)
    failing = chosen.table.codes[chosen.fails]
    suppressed = int(chosen.table.counts[chosen.fails].sum())
    return ReleasePlan(
        input_columns=[str(c) for c in input_columns],
        columns=[str(c) for c in input_columns if c not in config.identifiers],
        levels=levels,
        values=values,
        labels=labels,
        codes=codes,
        cardinalities=cards,
        suppressed=failing.astype(np.int64).tolist(),
        seed=int(seed),
        rows_in=int(enc.n),
        rows_out=int(enc.n) - suppressed,
        delimiter=delimiter,
        scheme=scheme,
    )


def _text(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if not pa.types.is_string(column.type):
        column = column.cast(pa.string())
    return pc.fill_null(column, "")


def _positions(column: pa.Array | pa.ChunkedArray, values: pa.Array) -> pa.Array:
    """Each cell's position in ``values`` (null: not there). A dictionary-encoded column (the
    column store's) is looked up through its dictionary, then taken per row: its strings are
    not decoded."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type) and not column.indices.null_count:
        at = pc.index_in(_text(column.dictionary), value_set=values)
        return at.take(column.indices)
    return pc.index_in(_text(column), value_set=values)


def _class_key(plan: ReleasePlan, codes: list[IntArray]) -> IntArray | None:
    """The classes' codes as one int64 key (mixed radix), or None when it would overflow."""
    space = math.prod(max(plan.cardinalities[q], 1) for q in plan.quasi_identifiers)
    if space >= 1 << 62:
        return None
    key = np.zeros(len(codes[0]) if codes else 0, dtype=np.int64)
    for q, column in zip(plan.quasi_identifiers, codes, strict=True):
        key = key * max(plan.cardinalities[q], 1) + column
    return key


def _suppressed_rows(plan: ReleasePlan, codes: list[IntArray]) -> BoolArray:
    """Which rows (given their class codes per quasi-identifier) are in a suppressed class."""
    rows = len(codes[0]) if codes else 0
    if not plan.suppressed:
        return np.zeros(rows, dtype=bool)
    lookup = _lookup(plan)
    key = _class_key(plan, codes)
    if key is not None and lookup.failing is not None:
        at = np.minimum(np.searchsorted(lookup.failing, key), len(lookup.failing) - 1)
        return np.asarray(lookup.failing[at] == key, dtype=bool)
    index = pd.MultiIndex.from_arrays(codes)
    return np.asarray(index.isin(list(lookup.failing_tuples)), dtype=bool)


def release_batch(plan: ReleasePlan, batch: pa.RecordBatch, row_index: pa.Array) -> pa.RecordBatch:
    """The released rows of ``batch`` (input rows whose 0-based input row indexes are
    ``row_index``): identifiers dropped, rows of suppressed classes left out, quasi-identifiers
    generalized, other cells unchanged (strings, a missing cell ""), then :data:`ORDER` (uint64),
    each row's order key (:func:`.shuffle.order_keys`): sorting by it gives the file's order."""
    if plan.scheme != KEYED:
        raise EngineError(
            "A release in the earlier row order (a permutation of all released rows) is "
            "written in memory, not batch by batch."
        )
    names = batch.schema.names
    missing = [c for c in plan.columns if c not in names]
    if missing:
        raise EngineError(f"Column {missing[0]!r} is not in the batch.")
    index = np.asarray(
        row_index.to_numpy(zero_copy_only=False)
        if isinstance(row_index, pa.Array | pa.ChunkedArray)
        else row_index
    )
    if len(index) != batch.num_rows:
        raise EngineError(f"The batch has {batch.num_rows:,} rows and {len(index):,} row indexes.")
    lookup = _lookup(plan)
    positions: dict[str, pa.Array] = {}
    class_codes: list[IntArray] = []
    for q in plan.quasi_identifiers:
        column = batch.column(names.index(q))
        found = _positions(column, lookup.values[q])
        if found.null_count:
            column = _text(column)
            at = pc.index(pc.is_null(found), True).as_py()
            raise EngineError(
                f"Row {int(index[at]) + 1:,} holds {column[at].as_py()!r} in {q!r}, a value the "
                "frequency table did not count: the input changed between its two readings."
            )
        positions[q] = found
        class_codes.append(lookup.codes[q][found.to_numpy(zero_copy_only=False)])
    keep = ~_suppressed_rows(plan, class_codes)
    kept = pa.array(keep)
    arrays: list[pa.Array] = []
    for name in plan.columns:
        if name in positions:
            arrays.append(pc.take(lookup.labels[name], positions[name].filter(kept)))
        else:
            arrays.append(_text(batch.column(names.index(name))).filter(kept))
    arrays.append(pa.array(order_keys(plan.seed, index[keep]), type=pa.uint64()))
    return pa.RecordBatch.from_arrays(arrays, names=[*plan.columns, ORDER])


def _released(plan: ReleasePlan, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Released batches: those that hold :data:`ORDER` as they are, input batches released
    with running row indexes."""
    start = 0
    for batch in batches:
        if ORDER in batch.schema.names:
            yield batch
            continue
        count = batch.num_rows
        index = pa.array(np.arange(start, start + count, dtype=np.int64))
        start += count
        yield release_batch(plan, batch, index)


def _bucket_bits(rows: int, chunk_rows: int) -> int:
    buckets = max(1, math.ceil(rows / max(chunk_rows, 1)))
    return min(max(buckets - 1, 0).bit_length(), int(math.log2(MAX_BUCKETS)))


def write_released(
    plan: ReleasePlan,
    batches: Iterable[pa.RecordBatch],
    csv_path: str | os.PathLike[str],
    parquet_path: str | os.PathLike[str] | None = None,
    chunk_rows: int = 1_000_000,
    progress: Callable[[int], None] | None = None,
) -> Written:
    """Write the released rows of ``batches`` to ``csv_path`` (and to ``parquet_path``): the
    bytes the in-memory engine writes for the same input, configuration and seed (header,
    delimiter, formulas neutralised, quoting). ``batches``: input batches (released here with
    running row indexes) or batches :func:`release_batch` gave (with :data:`ORDER`).

    Bounded memory: the rows go to temporary bucket files by the top bits of their order key
    (about ``chunk_rows`` rows each: the keys are uniform), in the CSV's folder; each bucket is
    then read, sorted and appended. ``progress(rows)`` is told the rows written so far. The
    bucket folders of dead processes of this machine in that folder are removed first
    (:func:`remove_dead_buckets`)."""
    if plan.scheme != KEYED:
        raise EngineError("Only the keyed hash order is written batch by batch.")
    bits = _bucket_bits(plan.rows_out, chunk_rows)
    schema = bucket_schema(plan)
    folder = Path(csv_path).parent
    remove_dead_buckets(folder)
    with tempfile.TemporaryDirectory(prefix=_buckets_prefix(), dir=folder) as scratch:
        writers: dict[int, ipc.RecordBatchStreamWriter] = {}
        sinks: dict[int, IO[bytes]] = {}
        try:
            for batch in _released(plan, batches):
                if not batch.num_rows:
                    continue
                batch = pa.RecordBatch.from_arrays(
                    [batch.column(f.name).cast(f.type) for f in schema], schema=schema
                )
                keys = batch.column(ORDER).to_numpy()
                bucket = (
                    (keys >> np.uint64(64 - bits)).astype(np.int64)
                    if bits
                    else np.zeros(len(keys), dtype=np.int64)
                )
                by_bucket = np.argsort(bucket, kind="stable")
                ordered = batch.take(pa.array(by_bucket))
                counts = np.bincount(bucket, minlength=1 << bits)
                start = 0
                for b in (int(v) for v in np.flatnonzero(counts)):
                    size = int(counts[b])
                    if b not in writers:
                        sinks[b] = open(Path(scratch) / bucket_name(b), "wb")  # noqa: SIM115
                        writers[b] = ipc.new_stream(sinks[b], schema)
                    writers[b].write_batch(ordered.slice(start, size))
                    start += size
                del batch, ordered
                pa.default_memory_pool().release_unused()
        finally:
            for writer in writers.values():
                writer.close()
            for sink in sinks.values():
                sink.close()
        return write_buckets(plan, sorted(writers), Path(scratch), csv_path, parquet_path, progress)


def bucket_schema(plan: ReleasePlan) -> pa.Schema:
    """The schema of a bucket file :func:`write_buckets` reads (an Arrow IPC stream): the
    released columns as strings, then :data:`ORDER`."""
    return pa.schema([*[(c, pa.string()) for c in plan.columns], (ORDER, pa.uint64())])


def bucket_name(bucket: int) -> str:
    """The file name of bucket ``bucket`` in the scratch folder."""
    return f"{bucket:05d}.arrow"


#: The bucket folders' names: ``.buckets-<host>-<pid>-<random>``, beside the output.
BUCKETS = ".buckets-"


def _buckets_prefix() -> str:
    host = "".join(c if c.isalnum() else "_" for c in socket.gethostname())
    return f"{BUCKETS}{host}-{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_buckets(folder: str | os.PathLike[str]) -> int:
    """Remove the bucket folders in ``folder`` of processes of this machine that died (a
    process killed with -9 while it wrote leaves them; a live one's are its own). Returns how
    many were removed."""
    prefix = _buckets_prefix().rsplit("-", 2)[0] + "-"  # this machine's
    removed = 0
    for entry in Path(folder).glob(f"{BUCKETS}*"):
        pid = entry.name[len(prefix) :].split("-", 1)[0]
        if entry.name.startswith(prefix) and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def write_buckets(
    plan: ReleasePlan,
    buckets: list[int],
    scratch: Path,
    csv_path: str | os.PathLike[str],
    parquet_path: str | os.PathLike[str] | None,
    progress: Callable[[int], None] | None,
) -> Written:
    """Write the ``buckets`` (Arrow IPC streams :func:`bucket_name` in ``scratch``, of
    :func:`bucket_schema`; each bucket's keys above the previous one's) in order, each read
    whole and sorted by its keys, as the CSV ``csv_path`` (and the Parquet ``parquet_path``):
    memory is one bucket. Raises :class:`EngineError` when the rows are not the plan's."""
    digest = hashlib.sha256()
    size = 0
    rows = 0
    parquet: pq.ParquetWriter | None = None
    out_schema = pa.schema([(c, pa.string()) for c in plan.columns])
    with open(csv_path, "wb") as out:

        def emit(data: bytes | memoryview) -> None:
            nonlocal size
            digest.update(data)
            out.write(data)
            size += len(data)

        emit(csv_header(plan.columns, plan.delimiter))
        try:
            if parquet_path is not None:
                parquet = pq.ParquetWriter(str(parquet_path), out_schema)
            for b in buckets:
                with ipc.open_stream(pa.memory_map(str(scratch / bucket_name(b)))) as reader:
                    table = reader.read_all().combine_chunks()
                rows += _write_bucket(plan, table, emit, parquet)
                del table
                pa.default_memory_pool().release_unused()
                if progress is not None:
                    progress(rows)
        finally:
            if parquet is not None:
                parquet.close()
    if rows != plan.rows_out:
        raise EngineError(
            f"{rows:,} rows were released, the plan expected {plan.rows_out:,}: the input "
            "changed between its two readings."
        )
    return Written(sha256=digest.hexdigest(), size=size, rows=rows)


def _write_bucket(
    plan: ReleasePlan,
    table: pa.Table,
    emit: Callable[[bytes | memoryview], None],
    parquet: pq.ParquetWriter | None,
) -> int:
    """One bucket's rows, sorted by their order keys, as CSV lines (and Parquet rows). Each
    column is quoted through its distinct values once and only their codes are permuted."""
    count = int(table.num_rows)
    by_key = np.argsort(table.column(ORDER).to_numpy(), kind="stable")
    single = len(plan.columns) == 1
    parts: list[tuple[pa.Array, NDArray[np.int32] | None]] = []
    for name in plan.columns:
        values, codes = csv_cells(table.column(name).chunk(0), plan.delimiter, single)
        parts.append((values, codes[by_key]) if codes is not None else (values.take(by_key), None))
    for start in range(0, count, BATCH_ROWS):
        stop = min(count, start + BATCH_ROWS)
        cells = [
            values.take(pa.array(codes[start:stop]))
            if codes is not None
            else values.slice(start, stop - start)
            for values, codes in parts
        ]
        emit(csv_lines(cells, stop - start, plan.delimiter))
        if parquet is not None:
            taken = table.select(plan.columns).take(pa.array(by_key[start:stop]))
            parquet.write_table(taken)
    return count
