"""The extract run in bounded memory: the column store read in batches, twice, never whole.

1. The frequency table of the quasi-identifiers and sensitive attributes (``engine.frequency``)
   is counted batch by batch; the engine searches on it (``engine.streaming``) and reduces the
   chosen transformation to a small plan.
2. The released columns are read again, batch by batch: the engine writes the CSV and Parquet
   in the extract's order (the keyed hash of each row's input position and the seed), and the
   same pass gives each input row's class (the membership later releases are judged with), the
   first released rows (the review's sample and examples) and, where the profile does not hold
   them, the value counts of the columns released as they are.

Everything else the review shows (distributions, sensitive values per class, class sizes) comes
from the frequency table and the result. Memory grows with the batch and the distinct
combinations, and with 4 bytes a row for the membership, not with the cells.

Used where the engine releases from a frequency table (``streaming.streaming_refusal``) and the
round is ordered by the keyed hash; otherwise the run holds the rows (``run.build_release``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from releases.core import figures, storage
from releases.datasets import column_store
from releases.engine import AnonymizationConfig, AnonymizationResult, streaming
from releases.engine.api import Chosen
from releases.engine.cross_release import NOT_IN
from releases.engine.errors import EngineError
from releases.engine.frequency import FIRST, ROWS, FrequencyTable, frequency_table
from releases.engine.shuffle import KEYED, order_keys
from releases.engine.types import ProgressCallback
from releases.models import Dataset, ReleaseFile
from releases.requests import package

Format = ReleaseFile.Format

#: Rows read from the column store at a time, and about the rows of each bucket the release
#: is sorted in (a batch's codes and, while it is released, its strings: about 50 MB for
#: Adult-like rows; a bucket is held a few times over while it is written).
CHUNK_ROWS = 500_000
#: Released rows kept for the review: the first ones of the file (sample and examples).
HEAD_ROWS = 2000
#: The head's column holding each row's input row.
ROW = "__row"


def streams(config: AnonymizationConfig, scheme: str) -> bool:
    """Whether a round is released batch by batch: the engine can release ``config`` from a
    frequency table and the round's order is the keyed hash (rounds ordered by numpy's
    permutation are written as they were, from the rows)."""
    return scheme == KEYED and streaming.streaming_refusal(config) is None


def batches(
    dataset: Dataset, columns: Sequence[str], chunk_rows: int = CHUNK_ROWS
) -> Iterator[pa.RecordBatch]:
    """The dataset's ``columns`` (dictionary-encoded strings, "" for a missing cell) from its
    column store, ``chunk_rows`` rows at a time."""
    names = list(dict.fromkeys(columns))
    if dataset.file_path and not storage.exists(dataset.file_path):
        # The store records the original's SHA-256; an original gone from storage is a fault.
        raise FileNotFoundError(f"The original of dataset {dataset.pk} is missing from storage.")
    yield from column_store.batches(dataset, names, chunk_rows)


def frequencies(dataset: Dataset, columns: Sequence[str]) -> FrequencyTable:
    """The frequency table of ``columns`` over the dataset's rows (read a batch at a time)."""
    return frequency_table(batches(dataset, columns), list(columns))


# --- Classes of rows and of combinations ---------------------------------------------------------


def _codes_of(plan: streaming.ReleasePlan, name: str, values: pa.Array) -> np.ndarray:
    """Each value's class code at the plan's level (-1: a value the plan does not know)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    codes = np.asarray(plan.codes[name], dtype=np.int64)
    if pa.types.is_dictionary(values.type):
        # The dictionary is looked up (a few thousand values), then taken per row.
        at = _codes_of(plan, name, values.dictionary)
        indices = values.indices.fill_null(len(at)).to_numpy(zero_copy_only=False)
        return np.append(at, -1)[indices]
    if not pa.types.is_string(values.type):
        values = values.cast(pa.string())
    found = pc.index_in(values.fill_null(""), value_set=pa.array(plan.values[name], pa.string()))
    positions = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where(positions >= 0, codes[positions], -1)


@dataclass
class Classes:
    """The released classes of a plan, each numbered (its row in ``codes``), and a lookup from
    class codes (one per quasi-identifier) to that number."""

    plan: streaming.ReleasePlan
    codes: np.ndarray  # (classes, quasi-identifiers): each kept class's codes
    _keys: np.ndarray | None = field(init=False, default=None)
    _sorted: np.ndarray | None = field(init=False, default=None)
    _index: pd.MultiIndex | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        cards = [max(self.plan.cardinalities[q], 1) for q in self.plan.quasi_identifiers]
        if math.prod(cards) < 1 << 62:
            keys = self._key([self.codes[:, i] for i in range(self.codes.shape[1])])
            self._sorted = np.argsort(keys, kind="stable")
            self._keys = keys[self._sorted]
        else:  # no integer holds a class: look the codes up as tuples
            self._index = pd.MultiIndex.from_arrays(
                [self.codes[:, i] for i in range(self.codes.shape[1])]
            )

    def _key(self, codes: list[np.ndarray]) -> np.ndarray:
        key = np.zeros(len(codes[0]) if codes else 0, dtype=np.int64)
        for q, column in zip(self.plan.quasi_identifiers, codes, strict=True):
            key = key * max(self.plan.cardinalities[q], 1) + column
        return key

    def of(self, codes: list[np.ndarray]) -> np.ndarray:
        """Each row's class number (given its codes per quasi-identifier), :data:`NOT_IN`
        for a row of a suppressed class."""
        rows = len(codes[0]) if codes else 0
        if not len(self.codes):
            return np.full(rows, NOT_IN, dtype=np.int64)
        if self._index is not None:
            found = self._index.get_indexer(pd.MultiIndex.from_arrays(codes))
            return np.where(found >= 0, found, NOT_IN).astype(np.int64)
        assert self._keys is not None and self._sorted is not None
        key = self._key(codes)
        at = np.clip(np.searchsorted(self._keys, key), 0, len(self._keys) - 1)
        hit = self._keys[at] == key
        known = np.all([c >= 0 for c in codes], axis=0) if codes else np.ones(rows, bool)
        return np.where(hit & known, self._sorted[at], NOT_IN).astype(np.int64)


def released_classes(plan: streaming.ReleasePlan, chosen: Chosen) -> Classes:
    """The classes a release holds (neither suppressed nor empty)."""
    table = chosen.table
    kept = ~chosen.fails & (table.counts > 0)
    return Classes(plan, np.asarray(table.codes[kept], dtype=np.int64))


# --- The second pass -----------------------------------------------------------------------------


@dataclass
class Observed:
    """What the second pass gathers beside the files: each input row's class, the first
    released rows (their input cells, in the file's order) and value counts of columns."""

    membership: np.ndarray
    head: pa.Table | None = None
    counts: dict[str, Counter] = field(default_factory=dict)


def _observing(
    plan: streaming.ReleasePlan,
    classes: Classes,
    source: Iterator[pa.RecordBatch],
    observed: Observed,
    counted: Sequence[str],
) -> Iterator[pa.RecordBatch]:
    """The input batches, passed on as they are, observed on the way (:class:`Observed`)."""
    start = 0
    qis = plan.quasi_identifiers
    for batch in source:
        rows = batch.num_rows
        names = batch.schema.names
        codes = [_codes_of(plan, q, batch.column(names.index(q))) for q in qis]
        member = classes.of(codes)
        observed.membership[start : start + rows] = member
        kept = np.flatnonzero(member != NOT_IN)
        keys = order_keys(plan.seed, kept + start)
        head = observed.head
        if head is not None and head.num_rows >= HEAD_ROWS:
            # Only rows before the head's last can enter it.
            last = head.column(streaming.ORDER)[HEAD_ROWS - 1].as_py()
            wanted = keys < np.uint64(last)
            kept, keys = kept[wanted], keys[wanted]
        if len(kept) > HEAD_ROWS:
            first = np.argpartition(keys, HEAD_ROWS)[:HEAD_ROWS]
            kept, keys = kept[first], keys[first]
        if len(kept):
            taken = batch.select(plan.columns).take(pa.array(kept))
            part = pa.Table.from_batches([_decoded(taken)]).append_column(
                streaming.ORDER, pa.array(keys, pa.uint64())
            )
            part = part.append_column(ROW, pa.array(kept + start, pa.int64()))
            joined = part if head is None else pa.concat_tables([head, part])
            observed.head = joined.sort_by(streaming.ORDER).slice(0, HEAD_ROWS)
        for name in counted:
            counted_values = pc.value_counts(_decoded_column(batch.column(names.index(name))))
            observed.counts.setdefault(name, Counter()).update(
                dict(
                    zip(
                        counted_values.field("values").to_pylist(),
                        counted_values.field("counts").to_pylist(),
                        strict=True,
                    )
                )
            )
        start += rows
        yield batch


def _decoded_column(column: pa.Array) -> pa.Array:
    """A column as plain strings ("" for a missing cell)."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if not pa.types.is_string(column.type):
        column = column.cast(pa.string())
    return column.fill_null("")


def _decoded(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch's columns as plain strings ("" for a missing cell)."""
    arrays = [_decoded_column(column) for column in batch.columns]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


@dataclass
class StreamedRelease:
    """A round released batch by batch: the engine's result (no rows), its configuration and
    plan, the frequency table, the files written and what the second pass observed."""

    result: AnonymizationResult
    config: AnonymizationConfig
    plan: streaming.ReleasePlan
    table: FrequencyTable
    classes: Classes
    files: dict[str, package.WrittenFile]
    observed: Observed
    #: Profiles of columns released as they are (their distinct values and unique rows).
    profiles: dict[str, dict] = field(default_factory=dict)
    #: Each combination's class number (:func:`kept_combinations`), once computed.
    _kept: np.ndarray | None = field(default=None, init=False, repr=False)


def release(
    dataset: Dataset,
    table: FrequencyTable,
    config: AnonymizationConfig,
    released: list[str],
    seed: int,
    folder: Path,
    progress: ProgressCallback | None = None,
    written: Callable[[int], None] | None = None,
    counted: Sequence[str] = (),
) -> StreamedRelease:
    """Search on ``table`` (the dataset's frequency table), then write the package of the
    ``released`` columns into ``folder`` (CSV and Parquet batch by batch; Excel, when the
    extract is small enough for one, from the Parquet file). ``written(rows)``: rows written
    so far; ``counted``: columns whose value counts the second pass gathers."""
    result, enc, chosen = streaming.anonymize_frequencies(table, released, config, progress)
    plan = streaming.plan_release(enc, chosen, config, released, seed, scheme=KEYED)
    classes = released_classes(plan, chosen)
    observed = Observed(np.full(table.rows, NOT_IN, dtype=np.int32))
    csv_path = folder / f"extract{package.SUFFIXES[Format.CSV]}"
    parquet_path = folder / f"extract{package.SUFFIXES[Format.PARQUET]}"
    rows = _observing(plan, classes, batches(dataset, released), observed, counted)
    csv = streaming.write_released(
        plan, rows, csv_path, parquet_path, chunk_rows=CHUNK_ROWS, progress=written
    )
    if observed.membership.size and int((observed.membership != NOT_IN).sum()) != plan.rows_out:
        raise EngineError("The dataset's rows changed between the two readings of the release.")
    files: dict[str, package.WrittenFile] = {
        Format.CSV: package.WrittenFile(csv_path, csv.sha256, csv.size),
        Format.PARQUET: package.WrittenFile(
            parquet_path, package.sha256_file(parquet_path), parquet_path.stat().st_size
        ),
    }
    if not package.xlsx_refusal(plan.rows_out, len(plan.columns)):
        # Small enough for a worksheet: the Parquet file's cells, as the in-memory run writes.
        frame = pq.read_table(parquet_path).to_pandas()
        xlsx = folder / f"extract{package.SUFFIXES[Format.XLSX]}"
        package.WRITERS[Format.XLSX](frame, xlsx)
        files[Format.XLSX] = package.WrittenFile(
            xlsx, package.sha256_file(xlsx), xlsx.stat().st_size
        )
    result.data = pd.DataFrame(columns=plan.columns)  # the extract is in the files
    return StreamedRelease(result, config, plan, table, classes, files, observed)


# --- What the review shows, from the frequency table ---------------------------------------------


def kept_combinations(built: StreamedRelease) -> tuple[pd.DataFrame, np.ndarray]:
    """(the frequency table's combinations, each one's class number or NOT_IN): computed once
    per release (the distributions and each sensitive attribute's counts use it)."""
    frame = built.table.frame
    if built._kept is None or len(built._kept) != len(frame):
        codes = [
            _codes_of(built.plan, q, _combination_values(frame[q]))
            for q in built.plan.quasi_identifiers
        ]
        built._kept = built.classes.of(codes)
    return frame, built._kept


def _combination_values(column: pd.Series) -> pa.Array:
    """A frequency table's column as Arrow strings: a Categorical as a dictionary array (its
    categories looked up once, not a string per combination)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = pa.array(
            np.asarray(column.cat.categories.astype(str), dtype=object), pa.string()
        )
        return pa.DictionaryArray.from_arrays(
            pa.array(column.cat.codes.to_numpy(), pa.int32(), mask=column.cat.codes.to_numpy() < 0),
            categories,
        )
    return pa.array(column.astype(str).to_numpy(dtype=object), pa.string())


def mapping(plan: streaming.ReleasePlan, name: str) -> dict[str, str]:
    """Each input value of a quasi-identifier and its released label."""
    return dict(zip(plan.values[name], plan.labels[name], strict=True))


def distributions(
    built: StreamedRelease, names: Sequence[str], ranks: dict, mappings: dict
) -> dict[str, dict]:
    """Per column (quasi-identifiers and sensitive attributes), its original distribution and
    the released one, as :func:`figures.distribution` gives them from the rows."""
    frame, member = kept_combinations(built)
    kept = member != NOT_IN
    out = {}
    for name in names:
        original = frame.groupby(name, sort=False, observed=True)[ROWS].sum()
        rows = frame.loc[kept, [name, ROWS]]
        if name in built.plan.values:
            labels = mapping(built.plan, name)
            rows = rows.assign(**{name: rows[name].astype(str).map(labels)})
        released = rows.groupby(name, sort=False, observed=True)[ROWS].sum()
        out[name] = figures.distribution_of_counts(
            {str(k): int(v) for k, v in original.items()},
            {str(k): int(v) for k, v in released.items()},
            rank=ranks.get(name),
            mapping=mappings.get(name),
        )
    return out


def value_counts_by_class(
    built: StreamedRelease, qis: list[str], name: str
) -> dict[tuple[str, ...], dict[str, int]]:
    """{class's quasi-identifier values: {value of ``name``: rows}} over the released rows,
    from the frequency table."""
    frame, member = kept_combinations(built)
    kept = frame.loc[member != NOT_IN, [*qis, name, ROWS]]
    labelled = kept.assign(
        **{q: kept[q].astype(str).map(mapping(built.plan, q)) for q in qis},
        **{name: kept[name].astype(str)},
    )
    grouped = labelled.groupby([*qis, name], sort=False, observed=True)[ROWS].sum()
    out: dict[tuple[str, ...], dict[str, int]] = {}
    for group, count in grouped.items():
        *key, value = group if isinstance(group, tuple) else (group,)
        out.setdefault(tuple(str(k) for k in key), {})[str(value)] = int(count)
    return out


def head_rows(built: StreamedRelease) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """(columns, input cells, released cells) of the file's first rows, in its order."""
    head = built.observed.head
    columns = list(built.plan.columns)
    if head is None:
        return columns, [], []
    original = [head.column(c).to_pylist() for c in columns]
    released = [
        [mapping(built.plan, c).get(v, v) for v in values] if c in built.plan.values else values
        for c, values in zip(columns, original, strict=True)
    ]
    return (
        columns,
        [list(r) for r in zip(*original, strict=True)],
        [list(r) for r in zip(*released, strict=True)],
    )


def examples(built: StreamedRelease, per_attribute: int = 4) -> dict[str, list[list[str]]]:
    """Per quasi-identifier, a few original values of the file's first rows and what they
    became."""
    columns, original, released = head_rows(built)
    out: dict[str, list[list[str]]] = {}
    for name in built.config.quasi_identifiers:
        i = columns.index(name)
        pairs = [(o[i], r[i]) for o, r in zip(original, released, strict=True)]
        out[name] = [list(pair) for pair in dict.fromkeys(pairs)][:per_attribute]
    return out


__all__ = [
    "CHUNK_ROWS",
    "FIRST",
    "StreamedRelease",
    "batches",
    "distributions",
    "examples",
    "frequencies",
    "head_rows",
    "release",
    "streams",
    "value_counts_by_class",
]
