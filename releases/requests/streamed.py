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
from releases.engine.classes import Classes, codes_of, released_classes
from releases.engine.cross_release import NOT_IN
from releases.engine.errors import EngineError
from releases.engine.export import Written
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
        codes = [codes_of(plan, q, batch.column(names.index(q))) for q in qis]
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


def planned(
    table: FrequencyTable,
    config: AnonymizationConfig,
    released: list[str],
    seed: int,
    progress: ProgressCallback | None = None,
) -> tuple[AnonymizationResult, streaming.ReleasePlan, Classes]:
    """Search on ``table`` (the dataset's frequency table): the result, the release's plan of
    the ``released`` columns and its classes."""
    result, enc, chosen = streaming.anonymize_frequencies(table, released, config, progress)
    plan = streaming.plan_release(enc, chosen, config, released, seed, scheme=KEYED)
    return result, plan, released_classes(plan, chosen)


def extract_paths(folder: Path) -> tuple[Path, Path]:
    """Where the CSV and the Parquet file of a package are written in ``folder``."""
    return (
        folder / f"extract{package.SUFFIXES[Format.CSV]}",
        folder / f"extract{package.SUFFIXES[Format.PARQUET]}",
    )


def package_files(
    plan: streaming.ReleasePlan, folder: Path, csv: Written, observed: Observed
) -> dict[str, package.WrittenFile]:
    """The package written into ``folder`` (CSV and Parquet; Excel, when the extract is small
    enough for one, from the Parquet file), after checking that the membership counts the
    plan's released rows."""
    if observed.membership.size and int((observed.membership != NOT_IN).sum()) != plan.rows_out:
        raise EngineError("The dataset's rows changed between the two readings of the release.")
    csv_path, parquet_path = extract_paths(folder)
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
    return files


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
    result, plan, classes = planned(table, config, released, seed, progress)
    observed = Observed(np.full(table.rows, NOT_IN, dtype=np.int32))
    csv_path, parquet_path = extract_paths(folder)
    rows = _observing(plan, classes, batches(dataset, released), observed, counted)
    csv = streaming.write_released(
        plan, rows, csv_path, parquet_path, chunk_rows=CHUNK_ROWS, progress=written
    )
    files = package_files(plan, folder, csv, observed)
    result.data = pd.DataFrame(columns=plan.columns)  # the extract is in the files
    return StreamedRelease(result, config, plan, table, classes, files, observed)


# --- What the review shows, from the frequency table ---------------------------------------------


def kept_combinations(built: StreamedRelease) -> tuple[pd.DataFrame, np.ndarray]:
    """(the frequency table's combinations, each one's class number or NOT_IN): computed once
    per release (the distributions and each sensitive attribute's counts use it)."""
    frame = built.table.frame
    if built._kept is None or len(built._kept) != len(frame):
        codes = [
            codes_of(built.plan, q, _combination_values(frame[q]))
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
    "extract_paths",
    "frequencies",
    "head_rows",
    "package_files",
    "planned",
    "release",
    "streams",
    "value_counts_by_class",
]
