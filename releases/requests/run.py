"""The extract run, the worker's body: read the released columns, anonymize with the round's
parameters, write the package (CSV, Excel, Parquet, rows in a seeded random order), measure the
result for the review and store its equivalence classes.

The run holds a lease (``background.leases``) while it works: cancelled, deleted or handed to
another attempt, it stops within a heartbeat and leaves nothing behind. Every change of state
goes through the lifecycle (``requests.rules``).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, cast

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone

from releases.background import jobs, leases
from releases.core import audit, figures, storage
from releases.core.errors import InvalidInput
from releases.datasets import services as datasets
from releases.engine import (
    AnonymizationConfig,
    AnonymizationResult,
    EngineError,
    Hierarchy,
    anonymize,
    spark,
)
from releases.engine.frequency import FrequencyTable
from releases.engine.memory import resident_mb
from releases.engine.risk import class_sizes_of
from releases.engine.types import Algorithm
from releases.events import emit
from releases.models import (
    UNCHANGED_ROLES,
    AuditEvent,
    Dataset,
    EquivalenceClass,
    ReleaseFile,
    ReleaseRequest,
    Role,
    ShuffleScheme,
)
from releases.requests import (
    attacker,
    cross_release,
    dp_budget,
    on_spark,
    package,
    rules,
    streamed,
)
from releases.requests.parameters import ReleaseParameters

logger = logging.getLogger(__name__)

State = ReleaseRequest.State


PROGRESS_INTERVAL_SECONDS = 0.5


SAMPLE_ROWS = 12


def released_columns(snapshot: dict, frame: pd.DataFrame | list[str]) -> list[str]:
    """The extract's columns, in the dataset's order (``frame``: its frame, or its names).

    Snapshots made before every column had an explicit role list no ``released`` columns:
    for those, every column but the identifiers (what was released then)."""
    names = list(frame.columns) if isinstance(frame, pd.DataFrame) else list(frame)
    if "released" in snapshot:
        return [c for c in names if c in set(snapshot["released"])]
    return [c for c in names if c not in set(snapshot["identifiers"])]


def load_released(dataset: Dataset, snapshot: dict) -> tuple[pd.DataFrame, list[str]]:
    """(the released columns of ``dataset``, every column's name in the dataset's order).

    Only the columns that leave are read from the column store, as Categoricals (a small code
    per row; IDs and free text as Arrow strings): identifiers and withheld columns never reach
    the worker's memory. The run and a reproduction read the same way, so they write the same
    bytes."""
    names = list(dataset.columns.order_by("position").values_list("name", flat=True))
    if not names:  # datasets profiled before columns were recorded
        names = list(datasets.load_frame(dataset, categorical=True).columns)
    released = released_columns(snapshot, names)
    return datasets.load_frame(dataset, released, categorical=True), names


def engine_config(
    snapshot: dict, params: ReleaseParameters, frame: pd.DataFrame
) -> AnonymizationConfig:
    """The engine's configuration for a round: stored hierarchies, or automatic ones.

    ``frame`` holds the released columns only: identifiers and withheld columns never reach
    the engine, so nothing the steward did not decide on can leave."""
    return engine_config_of(
        snapshot, params, list(frame.columns), lambda name: frame[name].unique()
    )


def engine_config_of(
    snapshot: dict,
    params: ReleaseParameters,
    columns: list[str],
    distinct: Callable[[str], Iterable[str]],
) -> AnonymizationConfig:
    """:func:`engine_config` for the released ``columns``, ``distinct(name)`` giving a
    column's values in order of first appearance (an automatic hierarchy's input)."""
    hierarchies: dict[str, Hierarchy] = {}
    for qi in snapshot["quasi_identifiers"]:
        name = qi["name"]
        # A hierarchy uploaded or built for the column is stored materialized, in ARX format.
        if qi.get("hierarchy_text"):
            hierarchies[name] = Hierarchy.from_arx_csv(qi["hierarchy_text"], attribute=name)
        else:
            hierarchies[name] = Hierarchy.automatic(distinct(name), attribute=name)
    sensitive_hierarchies = {
        name: Hierarchy.from_arx_csv(text, attribute=name)
        for name, text in snapshot.get("sensitive_hierarchies", {}).items()
    }
    return AnonymizationConfig(
        quasi_identifiers=hierarchies,
        model=params.model,
        sensitive=list(snapshot["sensitive"]),
        identifiers=[c for c in snapshot["identifiers"] if c in columns],
        sensitive_hierarchies=sensitive_hierarchies,
        algorithm=cast(Algorithm, params.algorithm),
        levels=params.levels,
        # Only the snapshot's quasi-identifiers (a column retagged since is not one).
        weights={k: v for k, v in (params.weights or {}).items() if k in hierarchies},
        min_levels={k: v for k, v in params.min_levels().items() if k in hierarchies},
        max_levels={k: v for k, v in params.max_levels().items() if k in hierarchies},
        microaggregate={k: v for k, v in (params.microaggregate or {}).items() if k in hierarchies},
        time_limit=params.time_limit,
    )


@dataclass
class BuiltRelease:
    """A round's result: the engine's, with the released rows in their shuffled order."""

    result: AnonymizationResult
    config: AnonymizationConfig
    data: pd.DataFrame
    #: Per released row, its row in the input (an integer array).
    source_rows: np.ndarray


def build_release(
    frame: pd.DataFrame,
    snapshot: dict,
    params: ReleaseParameters,
    seed: int | None,
    progress=None,
    earlier_releases: dict[str, np.ndarray] | None = None,
    scheme: str = ShuffleScheme.KEYED,
) -> BuiltRelease:
    """Anonymize the released columns of ``frame`` and shuffle the rows with ``seed`` by
    ``scheme`` (the round's recorded one); ``earlier_releases``: the memberships of the earlier
    releases a protecting model keeps safe (``protected_releases``)."""
    released = frame[released_columns(snapshot, frame)]
    config = engine_config(snapshot, params, released)
    if earlier_releases:
        config = cross_release.with_earlier(config, earlier_releases)
    result = anonymize(released, config, progress=progress)
    order = package.shuffle(result.data, seed, scheme, np.asarray(result.source_rows))
    # Taking rows permutes each column's codes (Categoricals, Arrow strings): no Python objects.
    data = result.data.iloc[order].reset_index(drop=True)
    source = np.asarray(result.source_rows)[order]
    return BuiltRelease(result, config, data, source)


def prepare_streamed(
    release_request: ReleaseRequest,
    params: ReleaseParameters,
    frequencies: Callable[[Dataset, Sequence[str]], FrequencyTable] | None = None,
) -> tuple[FrequencyTable, AnonymizationConfig, list[str]] | None:
    """(the frequency table, the configuration, every column's name) of a round released
    batch by batch (:mod:`.streamed`), or None when it needs the rows in memory: a round
    ordered by numpy's permutation, or a configuration the engine releases only from rows
    (``streaming.streaming_refusal``: Mondrian, microaggregation, SafePub, earlier releases).
    ``frequencies(dataset, columns)`` counts the table (on Spark; by default in process)."""
    if release_request.shuffle_scheme != ShuffleScheme.KEYED:
        return None
    dataset, snapshot = release_request.dataset, release_request.config
    names = list(dataset.columns.order_by("position").values_list("name", flat=True))
    if not names:  # datasets profiled before columns were recorded
        return None
    released = released_columns(snapshot, names)
    # The path is decided before any column is read: what makes the engine need the rows (the
    # algorithm, microaggregation, SafePub, a research subset) is in the configuration, never
    # in the column values that automatic hierarchies are built from (none here), so a round
    # released from its rows reads them once.
    unread = engine_config_of(snapshot, params, released, lambda name: ())
    if not streamed.streams(unread, release_request.shuffle_scheme):
        return None
    counted = [
        *(qi["name"] for qi in snapshot["quasi_identifiers"]),
        *(s for s in snapshot["sensitive"]),
    ]
    table = (frequencies or streamed.frequencies)(dataset, counted)
    return table, engine_config_of(snapshot, params, released, table.distinct), names


def build_streamed(
    release_request: ReleaseRequest,
    prepared: tuple[FrequencyTable, AnonymizationConfig, list[str]],
    folder: Path,
    progress=None,
    written=None,
    job: spark.Job | None = None,
) -> streamed.StreamedRelease:
    """Release a round batch by batch into ``folder`` (see :func:`prepare_streamed`), in
    process or, given a Spark ``job``, on Spark (:mod:`.on_spark`)."""
    table, config, names = prepared
    dataset, snapshot = release_request.dataset, release_request.config
    released = released_columns(snapshot, names)
    unchanged = unchanged_names(snapshot, released)
    profiles = _profiles(dataset, unchanged, table.rows)
    seed = (
        package.new_seed() if release_request.shuffle_seed is None else release_request.shuffle_seed
    )
    counted = [n for n in unchanged if n not in profiles]
    if job is not None:
        built = on_spark.release(
            job, table, config, released, seed, folder, progress, written, counted
        )
    else:
        built = streamed.release(
            dataset, table, config, released, seed, folder, progress, written, counted
        )
    built.profiles = profiles
    return built


def _judged_streamed(release_request: ReleaseRequest, built: streamed.StreamedRelease) -> dict:
    """:func:`_judged_together` of a round released batch by batch: its membership stored;
    judged with earlier released extracts, if any, on the released columns read then."""
    new = built.observed.membership
    out: dict = {
        cross_release.MEMBERSHIP: cross_release.store_membership(
            extract_folder(release_request), new
        )
    }
    entries: list[dict] = []
    if cross_release.has_earlier(release_request):
        frame, _ = load_released(release_request.dataset, release_request.config)
        entries = cross_release.judge(
            release_request,
            built.result,
            built.config,
            frame,
            new.astype(np.int64),
            reapplied_inputs,
        )
    out.update(cross_release.summary_part(entries, release_request.dataset))
    return out


def protected_releases(
    release_request: ReleaseRequest, params: ReleaseParameters
) -> dict[str, np.ndarray] | None:
    """The memberships of the earlier releases the round's model protects (None when it
    protects none)."""
    if not cross_release.protecting(params.model):
        return None
    return cross_release.earlier_for_protection(params, release_request, reapplied_inputs)


def reapplied_inputs(release_request: ReleaseRequest) -> tuple[pd.DataFrame, AnonymizationConfig]:
    """The released columns of a stored round and the configuration that re-applies it (its
    levels fixed): for a round stored before runs kept their membership."""
    frame, _ = load_released(release_request.dataset, release_request.config)
    released = frame[released_columns(release_request.config, frame)]
    params = cross_release.reapplying(release_request)
    return released, engine_config(release_request.config, params, released)


def extract_folder(release_request: ReleaseRequest) -> str:
    """Where one attempt of a round writes its files: what a dead or cancelled attempt left
    there and no row names is removed (``discard_attempt``)."""
    return f"extracts/{release_request.pk}/r{release_request.round}a{release_request.attempts}"


def discard_attempt(request_id: int, round_number: int, attempt: int) -> int:
    """Remove the files an attempt wrote that no ReleaseFile row names (it did not finish);
    returns how many."""
    folder = f"extracts/{request_id}/r{round_number}a{attempt}"
    kept = set(
        ReleaseFile.objects.filter(path__startswith=folder + "/").values_list("path", flat=True)
    )
    removed = 0
    for name in storage.list_files(folder):
        if name not in kept:
            storage.delete_quietly(name)
            removed += 1
    return removed


def _store_package(release_request: ReleaseRequest, data: pd.DataFrame) -> list[ReleaseFile]:
    """Write every format to a local temporary folder, then into private storage."""
    with tempfile.TemporaryDirectory(dir=settings.FILE_UPLOAD_TEMP_DIR) as folder:
        return _store_written(release_request, package.write_package(data, Path(folder)))


def _store_written(
    release_request: ReleaseRequest, written_files: dict[str, package.WrittenFile]
) -> list[ReleaseFile]:
    """Move the files written locally into private storage (all of them, or none)."""
    files = []
    try:
        for fmt, written in written_files.items():
            files.append(
                ReleaseFile(
                    request=release_request,
                    round=release_request.round,
                    format=fmt,
                    sha256=written.sha256,
                    size_bytes=written.size,
                    path=storage.save_file(
                        extract_folder(release_request),
                        package.SUFFIXES[fmt],
                        written.path,
                        move=True,
                    ),
                )
            )
    except BaseException:
        for stored in files:
            storage.delete_quietly(stored.path)
        raise
    return files


def soft_limit_message() -> str:
    return (
        "The run took longer than a worker may spend on one task "
        f"(TASK_SOFT_TIME_LIMIT, {settings.CELERY_TASK_SOFT_TIME_LIMIT} s) and was stopped. "
        "Resubmit with fewer quasi-identifiers, shorter hierarchies or the Mondrian algorithm, "
        "or ask the administrators to raise the limit."
    )


def memory_message() -> str:
    limit = getattr(settings, "WORKER_MEMORY_LIMIT_MB", 0)
    shown = f"WORKER_MEMORY_LIMIT_MB, {limit} MB" if limit else "the machine's memory"
    return (
        f"The run needed more memory than a worker process may use ({shown}) and was "
        "stopped. Resubmit with fewer quasi-identifiers or shorter hierarchies, or ask the "
        "administrators to raise the limit."
    )


class _StageTimer:
    """Seconds each stage of a run took, for the worker's log ("read 3.1 s, anonymized ..."),
    then the process's resident memory at the end of each ("memory at each stage's end: ...").
    """

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.stages: list[tuple[str, float, int | None]] = []

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.stages.append((stage, now - self.last, resident_mb()))
        self.last = now

    def __str__(self) -> str:
        text = ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds, _ in self.stages)
        memory = [f"{mb} MB" for _, _, mb in self.stages if mb is not None]
        return text + (f" (resident at each stage's end: {', '.join(memory)})" if memory else "")


#: Classes inserted per statement (Django lowers it to what the database accepts).
CLASS_BATCH = 2000


def _store_classes(classes: Iterable[dict]) -> int:
    """Insert a round's classes (:func:`class_rows`: each class's field values) in batches of
    :data:`CLASS_BATCH`, as plain values (JSON already text): the model's field-by-field
    preparation, and a model object per class, cost more than the insert at 100,000 classes.
    Returns how many were inserted."""
    fields = [f for f in EquivalenceClass._meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    statement = "INSERT INTO {} ({}) VALUES ({})".format(
        quote(EquivalenceClass._meta.db_table),
        ", ".join(quote(str(f.column)) for f in fields),
        ", ".join(["%s"] * len(fields)),
    )
    json_fields = {f.attname for f in fields if isinstance(f, models.JSONField)}
    stored = 0
    rows = iter(classes)
    with connection.cursor() as cursor:
        while batch := list(itertools.islice(rows, CLASS_BATCH)):
            cursor.executemany(
                statement,
                [
                    [
                        json.dumps(c[f.attname], ensure_ascii=False)
                        if f.attname in json_fields
                        else c[f.attname]
                        for f in fields
                    ]
                    for c in batch
                ],
            )
            stored += len(batch)
    return stored


def _finite(value):
    """JSON has no infinity: an unbounded l (a class of one value in entropy l) is None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _finite_deep(value):
    """``_finite`` through lists and dicts (the models' achieved values)."""
    if isinstance(value, dict):
        return {k: _finite_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_deep(v) for v in value]
    return _finite(value)


def _occurrences(values: pd.Series) -> np.ndarray:
    """How many rows hold each distinct value of a column (in no order): counted on codes,
    tens of microseconds a column (a wide file has thousands released as they are)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()
    else:
        codes, _ = pd.factorize(values, use_na_sentinel=False)
    counts = np.bincount(codes[codes >= 0]) if len(codes) else np.zeros(0, dtype=np.int64)
    missing = int((codes < 0).sum())  # a Categorical's missing cells are one value more
    counts = counts[counts > 0]
    return np.append(counts, missing) if missing else counts


def unchanged_names(snapshot: dict, released: list[str]) -> list[str]:
    """The released columns whose values leave unchanged (sensitive and "released as is")."""
    roles = snapshot.get("roles", {})
    return [n for n in released if roles.get(n, Role.INSENSITIVE) in UNCHANGED_ROLES]


def unchanged_columns(frame: pd.DataFrame, snapshot: dict, released: list[str]) -> list[dict]:
    """Columns released with their values unchanged (sensitive and "released as is"), measured
    on the input: share of distinct values, and share of rows unique on the column alone."""
    return unchanged_columns_of(snapshot, released, len(frame), lambda n: _occurrences(frame[n]))


def unchanged_columns_of(
    snapshot: dict, released: list[str], rows: int, occurrences: Callable[[str], np.ndarray]
) -> list[dict]:
    """:func:`unchanged_columns` of an input of ``rows`` rows, ``occurrences(name)`` giving how
    many rows hold each distinct value of a column."""
    out = []
    for name in unchanged_names(snapshot, released):
        role = snapshot.get("roles", {}).get(name, Role.INSENSITIVE)
        counts = occurrences(name)
        suggested = snapshot.get("suggested", {}).get(name, {})
        out.append(
            {
                "name": name,
                "role": role,
                "type": snapshot.get("types", {}).get(name, ""),
                "distinct": int(counts.size),
                "distinct_share": counts.size / rows if rows else 0.0,
                "unique_row_share": float((counts == 1).sum()) / rows if rows else 0.0,
                "suggested_role": suggested.get("role", ""),
                "suggestion_reason": suggested.get("reason", ""),
                "justification": snapshot.get("justifications", {}).get(name, ""),
            }
        )
    return out


def _cells(frame: pd.DataFrame) -> list[list[str]]:
    """A few rows as lists of strings (for the page's sample)."""
    return [[str(v) for v in row] for row in frame.itertuples(index=False, name=None)]


def _summary(
    built: BuiltRelease | streamed.StreamedRelease,
    release_request: ReleaseRequest,
    frame: pd.DataFrame | None,
    all_columns: list[str] | None = None,
) -> dict:
    """The figures the review pages show, computed once here from the run's columns (counts on
    codes, a few sampled rows): pages read them, never the file. A round released batch by
    batch (no ``frame``): from its frequency table (:func:`_summary_streamed`)."""
    if isinstance(built, streamed.StreamedRelease):
        return _summary_streamed(built, release_request, list(all_columns or []))
    assert frame is not None
    result, config = built.result, built.config
    snapshot = release_request.config
    all_columns = list(frame.columns) if all_columns is None else all_columns
    released = released_columns(snapshot, all_columns)
    data = built.data
    report = _report(
        result,
        config,
        release_request,
        [c for c in all_columns if c not in released],
        (len(data), list(data.columns)),
        unchanged_columns(frame, snapshot, released),
    )
    # Per column, the original and the released distribution, side by side on the page, in
    # their natural order (the hierarchy's, or numbers'), numbers on shared bins.
    ranks, mappings = _orders(built)
    report["distributions"] = {
        name: figures.distribution(
            frame[name],
            data.get(name),
            built.source_rows,
            rank=ranks.get(name),
            mapping=mappings.get(name),
        )
        for name in [*config.quasi_identifiers, *config.sensitive]
    }
    # A sample of released rows next to the same rows before release.
    shown = list(data.columns)
    positions = built.source_rows[:SAMPLE_ROWS]
    report["sample"] = {
        "columns": shown,
        "original": _cells(frame[shown].iloc[positions]),
        "released": _cells(data[shown].head(SAMPLE_ROWS)),
    }
    report["examples"] = _examples(built, frame)
    before = result.class_sizes_before
    if before is None:
        before = class_sizes_of(frame, list(config.quasi_identifiers))
    return _with_classes(report, result, config, before, ranks)


def _report(
    result: AnonymizationResult,
    config: AnonymizationConfig,
    release_request: ReleaseRequest,
    withheld: list[str],
    extract: tuple[int, list[str]],
    unchanged: list[dict],
) -> dict:
    """The engine's report with what the pages add: the columns released (``extract``: the
    extract's rows and columns), withheld and released as they are, the seed, why there is no
    Excel file."""
    rows, released = extract
    report = result.report()
    report["achieved"]["l"] = {k: _finite(v) for k, v in report["achieved"]["l"].items()}
    report["models"] = _finite_deep(report["models"])
    report["quasi_identifiers"] = list(config.quasi_identifiers)
    report["sensitive"] = list(config.sensitive)
    report["released_columns"] = released
    report["withheld"] = withheld
    report["unchanged"] = unchanged
    # What the risk figures cover: the quasi-identifiers, and not the columns released as is.
    report["risk_covers"] = {
        "quasi_identifiers": list(config.quasi_identifiers),
        "not_covered": [u["name"] for u in report["unchanged"]],
    }
    report["shuffle_seed"] = release_request.shuffle_seed
    report["shuffle_scheme"] = release_request.shuffle_scheme
    report["xlsx_refusal"] = package.xlsx_refusal(rows, len(released))
    return report


def _with_classes(
    report: dict,
    result: AnonymizationResult,
    config: AnonymizationConfig,
    before: np.ndarray,
    ranks: dict,
) -> dict:
    """``report`` with the class sizes before and after (the chart bins them, with the
    request's k), the released values the classes table's filter offers and the number of
    classes that fail a model."""
    report["class_sizes"] = {
        "after": figures.size_counts(result.classes["size"].to_numpy()),
        "before": figures.size_counts(before),
    }
    report["class_values"] = figures.class_value_choices(
        result.classes, list(config.quasi_identifiers), ranks
    )
    # The classes that fail a model (stored with them; the review's check reads this count).
    fails = result.classes["fails"] if "fails" in result.classes else pd.Series(dtype=object)
    report["failing_classes"] = int((fails.fillna("").astype(str).str.strip(",") != "").sum())
    return report


def _summary_streamed(
    built: streamed.StreamedRelease, release_request: ReleaseRequest, all_columns: list[str]
) -> dict:
    """:func:`_summary` of a round released batch by batch: the same figures, from the
    frequency table, the files' first rows and the columns' profiles."""
    result, config = built.result, built.config
    snapshot = release_request.config
    released = released_columns(snapshot, all_columns)
    report = _report(
        result,
        config,
        release_request,
        [c for c in all_columns if c not in released],
        (built.plan.rows_out, list(built.plan.columns)),
        unchanged_columns_of(
            snapshot, released, built.table.rows, lambda name: _counted(built, name)
        ),
    )
    ranks, mappings = _orders(built)
    report["distributions"] = streamed.distributions(
        built, [*config.quasi_identifiers, *config.sensitive], ranks, mappings
    )
    columns, original, released_cells = streamed.head_rows(built)
    report["sample"] = {
        "columns": columns,
        "original": original[:SAMPLE_ROWS],
        "released": released_cells[:SAMPLE_ROWS],
    }
    report["examples"] = streamed.examples(built)
    before = result.class_sizes_before
    if before is None:
        before = (
            built.table.frame.groupby(list(config.quasi_identifiers), sort=False, observed=True)[
                streamed.ROWS
            ]
            .sum()
            .to_numpy()
        )
    return _with_classes(report, result, config, before, ranks)


def _counted(built: streamed.StreamedRelease, name: str) -> np.ndarray:
    """How many rows hold each distinct value of a column: counted by the second pass, else
    (a column the profile measured) the profile's distinct values and unique rows."""
    if name in built.observed.counts:
        return np.fromiter(built.observed.counts[name].values(), dtype=np.int64)
    profile = built.profiles[name]
    distinct, unique = int(profile["distinct"]), int(profile["unique_rows"])
    # Only how many values there are and how many occur once is measured.
    return np.append(np.ones(unique, dtype=np.int64), np.full(distinct - unique, 2))


def _profiles(dataset: Dataset, names: list[str], rows: int) -> dict[str, dict]:
    """The profiles of ``names`` that measured the store's ``rows`` rows with unique rows."""
    found = dataset.columns.filter(name__in=names).values_list("name", "profile")
    return {
        name: profile
        for name, profile in found
        if profile.get("rows") == rows and "unique_rows" in profile and "distinct" in profile
    }


def _orders(built: BuiltRelease | streamed.StreamedRelease) -> tuple[dict, dict]:
    """Per quasi-identifier, the order of its hierarchy's labels (when the hierarchy came as a
    file, whose order its author chose; a built one orders by the data) and the released value
    of each original value (full-domain generalization: the hierarchy at the applied level)."""
    ranks: dict[str, dict[str, int] | None] = {}
    mappings: dict[str, dict[str, str]] = {}
    levels = built.result.levels or {}
    for name, hierarchy in built.config.quasi_identifiers.items():
        rows = getattr(hierarchy, "rows", None)
        if not rows:
            continue
        if hierarchy.kind == "arx":
            ranks[name] = figures.hierarchy_rank(rows)
        if levels.get(name) is not None:
            mappings[name] = hierarchy.mapping(levels[name])
    return ranks, mappings


def _examples(built: BuiltRelease, frame: pd.DataFrame, per_attribute: int = 4) -> dict:
    """Per quasi-identifier, a few original values and what they became in the extract."""
    positions = built.source_rows[:2000]
    out: dict[str, list[list[str]]] = {}
    for name in built.config.quasi_identifiers:
        before = frame[name].iloc[positions].astype(str).tolist()
        after = built.data[name].head(2000).astype(str).tolist()
        pairs = zip(before, after, strict=True)
        out[name] = [list(pair) for pair in dict.fromkeys(pairs)][:per_attribute]
    return out


def _codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, distinct values as strings) of a column: a Categorical's own, else factorized."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), np.asarray(column.cat.categories.astype(str))
    codes, uniques = pd.factorize(column, sort=False, use_na_sentinel=False)
    return codes, np.asarray(pd.Index(uniques).astype(str))


def value_counts_by_class(
    data: pd.DataFrame, qis: list[str], name: str
) -> dict[tuple[str, ...], dict[str, int]]:
    """{class's quasi-identifier values: {value of ``name``: rows}} over the extract's rows.

    The columns' codes are combined into one integer per row and counted by hashing: a few
    bytes per row, where a group-by over millions of rows of Categoricals builds a frame of
    every group (and, without ``observed=True``, every combination of categories)."""
    columns = [*qis, name]
    coded = [_codes(data[c]) for c in columns]
    cards = [max(len(values), 1) for _, values in coded]
    missing = any((codes < 0).any() for codes, _ in coded)
    if missing or math.prod(cards) >= 2**62:  # not one integer per row: group the frame
        grouped = data.groupby(columns, sort=False, dropna=False, observed=True).size()
        out: dict[tuple[str, ...], dict[str, int]] = {}
        for group, count in grouped.items():
            *class_key, value = cast(tuple, group)
            out.setdefault(tuple(str(k) for k in class_key), {})[str(value)] = int(count)
        return out
    key = np.zeros(len(data), dtype=np.int64)
    for (codes, _), card in zip(coded, cards, strict=True):
        key *= card
        key += codes
    counted = pd.Series(key, copy=False).value_counts(sort=False)
    rest = counted.index.to_numpy()
    labels = []
    for (_, values), card in zip(reversed(coded), reversed(cards), strict=True):
        labels.append(values[rest % card])
        rest = rest // card
    *class_labels, value_labels = reversed(labels)
    out = {}
    for *class_key, value, count in zip(
        *class_labels, value_labels, counted.to_numpy().tolist(), strict=True
    ):
        out.setdefault(tuple(class_key), {})[value] = count
    return out


def class_rows(
    release_request: ReleaseRequest,
    result,
    params: ReleaseParameters,
    qis: list[str],
    sensitive: list[str],
    counts: dict[str, dict[tuple, dict[str, int]]] | None = None,
) -> Iterator[dict]:
    """Each EquivalenceClass's field values, made as they are inserted (:func:`_store_classes`):
    per sensitive attribute its value counts (``counts``, else counted on the extract's rows)
    and the per-class measures of the models (``class_column_labels``); the models each class
    fails or only just passes, as the criteria judged them; the "flagged first" mark and the
    values as searchable text (the classes table's order and filter). The engine's classes
    are read :data:`CLASS_BATCH` at a time: no model object, nor record, per class at once."""
    table = result.classes
    if counts is None:
        counts = {name: value_counts_by_class(result.data, qis, name) for name in sensitive}
    # "S:delta" -> (S, "delta"): stored under the sensitive attribute, as the page shows it.
    measures = [
        (column, *column.rsplit(":", 1))
        for column, _ in params.model.class_column_labels(sensitive)
        if column in table.columns
    ]
    for start in range(0, len(table), CLASS_BATCH):
        for record in table.iloc[start : start + CLASS_BATCH].to_dict("records"):
            values = {q: str(record[q]) for q in qis}
            key = tuple(values.values())
            size = int(record["size"])
            fails = [m for m in str(record.get("fails") or "").split(",") if m]
            borderline = [m for m in str(record.get("borderline") or "").split(",") if m]
            per_sensitive = {name: {"values": counts[name].get(key, {})} for name in sensitive}
            for column, name, measure in measures:
                per_sensitive[name][measure] = _finite(float(record[column]))
            yield {
                "request_id": release_request.pk,
                "values": values,
                "size": size,
                "risk": 1.0 / size if size else 0.0,
                "sensitive": per_sensitive,
                "fails": fails,
                "borderline": [] if fails else borderline,
                "flagged": bool(fails or borderline),
                "search": EquivalenceClass.search_text(values),
            }


def _classes(
    release_request: ReleaseRequest,
    result,
    params: ReleaseParameters,
    qis: list[str],
    sensitive: list[str],
    counts: dict[str, dict[tuple, dict[str, int]]] | None = None,
) -> list[EquivalenceClass]:
    """The round's classes as (unsaved) EquivalenceClass objects (see :func:`class_rows`)."""
    return [
        EquivalenceClass(**row)
        for row in class_rows(release_request, result, params, qis, sensitive, counts)
    ]


def fail_attempt(release_request: ReleaseRequest, reason: str) -> None:
    """End this process's attempt of a run (extract or statistics) as failed with ``reason``,
    unless it is no longer its own; what the attempt wrote and no row names is removed."""
    discard_attempt(release_request.pk, release_request.round, release_request.attempts)
    with transaction.atomic():
        failed = ReleaseRequest.objects.filter(
            pk=release_request.pk,
            state__in=rules.sources("fail_run"),
            worker=release_request.worker,
        ).update(
            state=rules.TABLE.target_of("fail_run"),
            error=reason,
            stage="Failed",
            finished_at=timezone.now(),
        )
        if not failed:
            return  # cancelled meanwhile: the cancellation stands
        EquivalenceClass.objects.filter(request=release_request).delete()
        audit.record(
            AuditEvent.Action.RUN_FAILED,
            None,
            request=release_request,
            round=release_request.round,
            reason=reason,
        )
        emit.transition(release_request, State.RUNNING, State.FAILED)


def _judged_together(
    release_request: ReleaseRequest,
    built: BuiltRelease,
    frame: pd.DataFrame,
    earlier: dict[str, np.ndarray] | None,
) -> dict:
    """The round's membership (stored in its folder for later runs), its joint partition with
    each earlier released extract, and, for a protecting search, which of them constrained it."""
    new = cross_release.membership_of_result(built.result, built.config, len(frame))
    out: dict = {
        cross_release.MEMBERSHIP: cross_release.store_membership(
            extract_folder(release_request), new
        ),
        **cross_release.summary_part(
            cross_release.judge(
                release_request, built.result, built.config, frame, new, reapplied_inputs
            ),
            release_request.dataset,
        ),
    }
    if earlier:
        released = frame[released_columns(release_request.config, frame)]
        out["protection"] = cross_release.constraint(released, built.config)
    return out


# --- The run, a job ------------------------------------------------------------------------------


class RequestRun(jobs.Job):
    """The run of a request's round, whatever its kind: claimed through the lifecycle's
    ``start_run``, failed through ``fail_run``; each kind's run says what it does."""

    model = ReleaseRequest
    running = State.RUNNING
    related = ("dataset",)
    refusals: ClassVar[tuple[type[BaseException], ...]] = (EngineError, InvalidInput)
    #: The stage and progress the claim writes.
    first_stage = "Loading the dataset"
    first_progress = 0.02

    def claimable(self):
        return {"state__in": rules.sources("start_run")}

    def claiming(self, now):
        return {
            "state": rules.TABLE.target_of("start_run"),
            "started_at": now,
            "progress": self.first_progress,
            "stage": self.first_stage,
        }

    def claimed(self) -> None:
        audit.record(
            AuditEvent.Action.RUN_START,
            None,
            request=self.row,
            round=self.row.round,
            attempt=self.row.attempts,
            worker=self.row.worker,
        )
        emit.transition(self.row, State.QUEUED, State.RUNNING)

    def work_name(self) -> str:
        return f"request {self.pk}"

    def start_stage(self) -> str:
        return self.row.stage

    def soft_limit_message(self) -> str:
        return soft_limit_message()

    def memory_message(self) -> str:
        return memory_message()

    def internal_error_message(self) -> str:
        return (
            "The run stopped because of an internal error. The administrators can find the "
            "details in the worker's log."
        )

    def fail(self, reason: str) -> None:
        fail_attempt(self.row, reason)

    def finish_run(self, **fields) -> None:
        """The round is ready for review: the final write, through the lifecycle."""
        self.finish(
            state=rules.TABLE.target_of("finish_run"),
            progress=1.0,
            stage="Ready for review",
            finished_at=timezone.now(),
            **fields,
        )


class _ProgressReporter:
    """Writes the engine's progress to the request row, at most twice a second; stops the run
    when the request is no longer running in this process (cancelled, deleted, retried)."""

    def __init__(self, job: jobs.Job) -> None:
        self.job = job
        self.last = 0.0

    def __call__(self, fraction: float, stage: str) -> None:
        now = time.monotonic()
        if (
            now - self.last < PROGRESS_INTERVAL_SECONDS
            and fraction < 1.0
            and not leases.pause_wanted(stage, self.job.work_name())
        ):
            return
        self.last = now
        # The search spans 10%..90%: loading comes before it, writing after.
        self.job.progress(
            stage[:200].capitalize(), progress=0.1 + 0.8 * max(0.0, min(1.0, fraction))
        )


class ExtractRun(RequestRun):
    """Anonymize a queued extract: write its package, summary and equivalence classes. Past
    the soft time limit or the memory ceiling it fails with a reason naming the setting."""

    #: What the body leaves for :meth:`finished`: the release, its files (and by format), the
    #: package's digest and the classes to store.
    result: tuple[
        BuiltRelease | streamed.StreamedRelease,
        list[ReleaseFile],
        dict[str, ReleaseFile],
        str,
        Iterator[dict],
    ]

    def log_failure(self) -> None:
        logger.exception("Release request %s failed", self.pk)

    def stopped(self) -> None:
        """Remove what this attempt wrote; record the stop of a cancelled run."""
        release_request = self.row
        discard_attempt(release_request.pk, release_request.round, release_request.attempts)
        still_cancelled = ReleaseRequest.objects.filter(
            pk=release_request.pk,
            state=rules.TABLE.target_of("cancel"),
            round=release_request.round,
        ).exists()
        if still_cancelled:
            audit.record(
                AuditEvent.Action.RUN_CANCELLED,
                None,
                request=release_request,
                round=release_request.round,
                attempt=release_request.attempts,
            )

    def body(self) -> None:
        """Read the released columns, search, write the package, measure and record the
        result (each stage's seconds go to the worker's log): batch by batch where the engine
        releases from a frequency table (:mod:`.streamed`; on Spark when ``SPARK_MASTER`` is
        set, :mod:`.on_spark`), else with the rows in memory."""
        release_request = self.row
        timer = _StageTimer()
        params = ReleaseParameters.of(release_request)
        earlier = protected_releases(release_request, params)
        if earlier is None and on_spark.wanted(
            release_request.shuffle_scheme, params, release_request.config
        ):
            with on_spark.session(release_request.dataset) as job:
                prepared = prepare_streamed(release_request, params, on_spark.frequencies(job))
                if prepared is not None:
                    timer.done("frequency table (Spark)")
                    self.body_streamed(params, prepared, timer, job)
                    return
        elif earlier is None:
            prepared = prepare_streamed(release_request, params)
            if prepared is not None:
                timer.done("frequency table")
                self.body_streamed(params, prepared, timer)
                return
        frame, all_columns = load_released(release_request.dataset, release_request.config)
        timer.done("read")
        # A differentially private extract spends first, and commits, before its sample is
        # drawn (as a statistics release spends before its noise).
        dp_budget.spend(release_request, params.model)
        self.progress("Searching for the best generalization", progress=0.1)
        built = build_release(
            frame,
            release_request.config,
            params,
            release_request.shuffle_seed,
            scheme=release_request.shuffle_scheme,
            progress=_ProgressReporter(self),
            earlier_releases=earlier,
        )
        timer.done("anonymized")
        self.progress("Writing the extract", progress=0.92)
        files = _store_package(release_request, built.data)
        timer.done("package written")
        self.progress("Recording the result", progress=0.95)
        summary = _summary(built, release_request, frame, all_columns)
        if settings.SPARK_MASTER:
            summary["ran_on"] = on_spark.ran_in_process()
        timer.done("measured")
        self._judge_and_finish(
            params,
            built,
            files,
            summary,
            lambda: _judged_together(release_request, built, frame, earlier),
            timer,
        )

    def body_streamed(
        self,
        params: ReleaseParameters,
        prepared: tuple[FrequencyTable, AnonymizationConfig, list[str]],
        timer: _StageTimer,
        job: spark.Job | None = None,
    ) -> None:
        """:meth:`body`, the rows read batch by batch and never held (or, given a Spark
        ``job``, on Spark: :mod:`.on_spark`)."""
        release_request = self.row
        table, config, all_columns = prepared
        dp_budget.spend(release_request, params.model)
        self.progress("Searching for the best generalization", progress=0.1)
        with tempfile.TemporaryDirectory(dir=settings.FILE_UPLOAD_TEMP_DIR) as folder:
            built = build_streamed(
                release_request,
                prepared,
                Path(folder),
                progress=_ProgressReporter(self),
                written=self._writing,
                job=job,
            )
            timer.done("anonymized and written" + (" on Spark" if job is not None else ""))
            files = _store_written(
                release_request,
                {f: built.files[f] for f in ReleaseFile.ORDER if f in built.files},
            )
        timer.done("package stored")
        self.progress("Recording the result", progress=0.95)
        summary = _summary(built, release_request, None, all_columns)
        if settings.SPARK_MASTER:
            summary["ran_on"] = on_spark.ran_on_spark() if job else on_spark.ran_in_process()
        timer.done("measured")
        qis = list(config.quasi_identifiers)
        self._judge_and_finish(
            params,
            built,
            files,
            summary,
            lambda: _judged_streamed(release_request, built),
            timer,
            counts={s: streamed.value_counts_by_class(built, qis, s) for s in config.sensitive},
        )

    def _judge_and_finish(
        self,
        params: ReleaseParameters,
        built: BuiltRelease | streamed.StreamedRelease,
        files: list[ReleaseFile],
        summary: dict,
        judged: Callable[[], dict],
        timer: _StageTimer,
        counts: dict[str, dict[tuple, dict[str, int]]] | None = None,
    ) -> None:
        """The end of either body: the round judged with the earlier releases (``judged()``
        gives that part of the summary), its classes (per sensitive attribute ``counts``,
        else counted on the extract's rows), then the final write."""
        release_request = self.row
        by_format = {f.format: f for f in files}
        digest = package.package_digest({f.format: f.sha256 for f in files})
        self.progress("Judging the release with the earlier ones", progress=0.96)
        summary.update(judged())
        timer.done("judged with earlier releases")
        classes = class_rows(
            release_request,
            built.result,
            params,
            list(built.config.quasi_identifiers),
            built.config.sensitive,
            counts=counts,
        )
        self.progress(f"Storing {len(built.result.classes):,} equivalence classes", progress=0.97)
        self.result = (built, files, by_format, digest, classes)
        self.finish_run(
            extract_path=by_format[ReleaseFile.Format.CSV].path,
            extract_sha256=by_format[ReleaseFile.Format.CSV].sha256,
            package_sha256=digest,
            summary=summary,
        )
        timer.done("stored")
        where = f" ({summary['ran_on']})" if "ran_on" in summary else ""
        logger.info(
            "Request %s round %s%s: %s", release_request.pk, release_request.round, where, timer
        )

    def _writing(self, rows: int) -> None:
        """The second pass's progress (rows written): reported, and a stop wanted is noticed."""
        self.progress(f"Writing the extract: {rows:,} rows", progress=0.92)

    def finished(self) -> None:
        release_request = self.row
        built, files, by_format, digest, classes = self.result
        EquivalenceClass.objects.filter(request=release_request).delete()
        _store_classes(classes)
        ReleaseFile.objects.bulk_create(files)
        attacker.queue_after_run(release_request)  # the new extract is linked again
        audit.record(
            AuditEvent.Action.RUN_END,
            None,
            request=release_request,
            round=release_request.round,
            rows_out=built.result.rows_out,
            suppressed=built.result.suppressed,
            k_achieved=built.result.achieved_k,
            sha256=by_format[ReleaseFile.Format.CSV].sha256,
            package_sha256=digest,
            files={f.format: f.sha256 for f in files},
        )
        emit.transition(release_request, State.RUNNING, State.READY)


def run_release(request_id: int) -> None:
    """Anonymize a queued request (the Celery task's body): see :class:`ExtractRun`."""
    ExtractRun(request_id).run()
