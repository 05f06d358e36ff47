"""The engine's entry point: :func:`anonymize` a DataFrame under a privacy model."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from pandas.api.extensions import ExtensionArray

from . import metrics, safepub
from .arrays import BoolArray, CodeArray, FloatArray, IntArray, ObjectArray, SmallIntArray
from .criteria import DataContext, EarlierReleases, Evaluation, PrivacyModel
from .hierarchy import Hierarchy
from .lattice import (
    MAX_NODES,
    CandidateEntry,
    EncodedData,
    SearchResult,
    Table,
    pareto_front,
    search,
)
from .lightning import HeuristicResult, lightning
from .microaggregation import (
    NUMERIC_FUNCTIONS,
    AggregatedColumn,
    aggregate_classes,
    column_kind,
    first_rows,
)
from .microaggregation import describe as describe_function
from .microaggregation import validate as validate_microaggregation
from .mondrian import anonymize_mondrian
from .risk import risk_summary
from .types import (
    SUPPRESSED_VALUE,
    AnonymizationConfig,
    AnonymizationResult,
    Candidate,
    EngineError,
    ProgressCallback,
)

__all__ = [
    "Chosen",
    "anonymize",
    "encode",
    "judge_levels",
    "parse_levels",
    "release",
    "validate_config",
    "validate_shape",
]


def _as_text(column: pd.Series) -> pd.Series:
    """Cells as strings, a missing value as "" (data should be read with dtype=str and
    keep_default_na=False; this guards against callers that did not). A Categorical of
    strings stays a Categorical: the engine factorizes it without expanding it to objects."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = column.cat.categories
        if pd.api.types.infer_dtype(categories, skipna=False) == "string":
            if column.isna().any():
                if "" not in categories:
                    column = column.cat.add_categories([""])
                column = column.fillna("")
            return column
        return column.astype(object).where(column.notna(), "").astype(str)
    if pd.api.types.infer_dtype(column, skipna=False) == "string":
        # pandas' str dtype is inferred as "string" even when it holds missing values (NaN).
        return column.fillna("") if column.hasnans else column
    return column.where(column.notna(), "").astype(str)


def _released_column(
    labels: list[str], codes: CodeArray, categorical: bool
) -> pd.Categorical[str] | pd.Series[str]:
    """A generalized quasi-identifier: its labels taken by code. A Categorical column stays one
    (of the labels that occur) so that millions of rows cost a small code each; other columns
    are object strings as before (callers group on them without ``observed=True``): an object
    Series, which pandas 3 keeps as it is (an array would be copied into its str dtype)."""
    if categorical and len(set(labels)) == len(labels):
        released = pd.Categorical.from_codes(codes, categories=pd.Index(labels))
        return released.remove_unused_categories()
    return pd.Series(np.array(labels, dtype=object)[codes], dtype=object, copy=False)


def _kept(
    column: pd.Series, keep_rows: BoolArray, dropped: bool
) -> ExtensionArray | NDArray[np.generic]:
    """The rows of a column that are released (a Categorical keeps only values that occur)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        categorical: pd.Categorical = column.array
        kept = categorical[keep_rows]
        return kept.remove_unused_categories() if dropped else kept
    if isinstance(column.dtype, pd.ArrowDtype | pd.StringDtype):
        # Arrow strings (pandas' str dtype too) stay Arrow: no Python object per cell.
        arrow: ExtensionArray = column.array
        return arrow[keep_rows] if dropped else arrow
    return column.to_numpy()[keep_rows]


def parse_levels(text: str) -> dict[str, int]:
    """``"age=2,sex=0"`` -> ``{"age": 2, "sex": 0}`` (the command line's ``--levels``)."""
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.rpartition("=")
        if not sep or not name.strip():
            raise EngineError(f"Levels are given as COLUMN=LEVEL, not {part!r}.")
        try:
            level = int(value)
        except ValueError:
            raise EngineError(
                f"The level of {name.strip()!r} must be a number, not {value!r}."
            ) from None
        if name.strip() in out:
            raise EngineError(f"The level of {name.strip()!r} is given twice.")
        out[name.strip()] = level
    if not out:
        raise EngineError("No levels given.")
    return out


def _pairs(text: str, what: str, form: str) -> list[tuple[str, str]]:
    """``"a=1,b=2"`` -> ``[("a", "1"), ("b", "2")]``, each name once."""
    out: list[tuple[str, str]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.rpartition("=")
        name = name.strip()
        if not sep or not name:
            raise EngineError(f"{what} are given as {form}, not {part!r}.")
        if any(name == seen for seen, _ in out):
            raise EngineError(f"The {what.lower()[:-1]} of {name!r} is given twice.")
        out.append((name, value.strip()))
    if not out:
        raise EngineError(f"No {what.lower()} given.")
    return out


def parse_weights(text: str) -> dict[str, float]:
    """``"age=1,sex=0.2"`` -> ``{"age": 1.0, "sex": 0.2}`` (the command line's ``--weights``)."""
    out: dict[str, float] = {}
    for name, value in _pairs(text, "Weights", "COLUMN=WEIGHT"):
        try:
            weight = float(value)
        except ValueError:
            raise EngineError(f"The weight of {name!r} must be a number, not {value!r}.") from None
        if not math.isfinite(weight) or weight < 0:
            raise EngineError(f"The weight of {name!r} must be a number of 0 or more, not {value}.")
        out[name] = weight
    return out


def parse_level_limits(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """``"age=1:3,sex=:0"`` -> ``({"age": 1}, {"age": 3, "sex": 0})``: the minimum and maximum
    levels (the command line's ``--level-limits``; an empty side is not limited)."""
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    for name, value in _pairs(text, "Level limits", "COLUMN=MIN:MAX"):
        first, sep, second = value.partition(":")
        if not sep:
            raise EngineError(f"The level limits of {name!r} are given as MIN:MAX, not {value!r}.")
        for side, target in ((first, low), (second, high)):
            if side.strip() == "":
                continue
            try:
                target[name] = int(side)
            except ValueError:
                raise EngineError(
                    f"The level limits of {name!r} must be whole numbers, not {value!r}."
                ) from None
    return low, high


def _validate_microaggregate(data: pd.DataFrame, config: AnonymizationConfig) -> None:
    """The microaggregated quasi-identifiers: the optimal search alone, at least one other
    quasi-identifier to form the classes, no level for them, numbers for mean, median and
    interval."""
    micro = config.microaggregate
    if not micro:
        return
    validate_microaggregation(micro, list(config.quasi_identifiers))
    if config.algorithm != "optimal":
        other = "Mondrian" if config.algorithm == "mondrian" else "the heuristic search"
        raise EngineError(f"Microaggregation applies to the optimal search, not to {other}.")
    if config.research_subset is not None:
        raise EngineError("Microaggregation is not available with a research subset.")
    if config.earlier_releases:
        raise EngineError("Microaggregation is not available with earlier releases.")
    if all(q in micro for q in config.quasi_identifiers):
        raise EngineError(
            "At least one quasi-identifier must be generalized: the classes are formed by the "
            "quasi-identifiers that are not microaggregated."
        )
    for bounds, what in (
        (config.levels or {}, "A level"),
        (config.min_levels, "A level limit"),
        (config.max_levels, "A level limit"),
    ):
        for name in bounds:
            if name in micro:
                raise EngineError(
                    f"{what} is given for {name!r}, which is microaggregated, not generalized."
                )
    for name, function in micro.items():
        if (
            function in NUMERIC_FUNCTIONS
            and column_kind([str(v) for v in pd.unique(data[name])]) is None
        ):
            raise EngineError(
                f"Column {name!r} cannot be microaggregated with the "
                f"{describe_function(function)}: it needs numbers (every value a whole or a "
                "decimal number, or empty)."
            )


def generalized_config(config: AnonymizationConfig) -> AnonymizationConfig:
    """``config`` with its microaggregated quasi-identifiers out of the lattice (they keep their
    place in :attr:`~.AnonymizationConfig.microaggregate`)."""
    if not config.microaggregate:
        return config
    return dataclasses.replace(
        config,
        quasi_identifiers={
            q: h for q, h in config.quasi_identifiers.items() if q not in config.microaggregate
        },
    )


def validate_config(
    data: pd.DataFrame, config: AnonymizationConfig, check_values: bool = True
) -> None:
    """Raise :class:`EngineError` with one clear sentence when the configuration cannot work.

    ``check_values``: also check that every hierarchy covers its column's values (the optimal
    search does that itself while encoding, so :func:`anonymize` skips it here)."""
    validate_shape(list(data.columns), len(data), config)
    _validate_microaggregate(data, config)
    if not check_values:
        return
    for name, hierarchy in list(config.quasi_identifiers.items()) + list(
        config.sensitive_hierarchies.items()
    ):
        if name in data.columns:
            named = hierarchy if hierarchy.attribute else hierarchy.with_attribute(name)
            named.validate_against(pd.unique(_as_text(data[name])))


def validate_shape(columns: list[str], rows: int, config: AnonymizationConfig) -> None:
    """:func:`validate_config` for a table known by its columns and number of rows (the values
    are not looked at)."""
    model = config.model
    model.validate()
    if config.algorithm not in ("optimal", "mondrian", "heuristic"):
        raise EngineError(
            f"Unknown algorithm {config.algorithm!r}; use 'optimal', 'heuristic' or 'mondrian'."
        )
    _validate_limits(config)
    if not config.quasi_identifiers:
        raise EngineError("Choose at least one quasi-identifier.")
    roles: dict[str, str] = {}
    for role, names in (
        ("an identifier", config.identifiers),
        ("a quasi-identifier", list(config.quasi_identifiers)),
        ("a sensitive attribute", config.sensitive),
    ):
        for name in names:
            if name not in columns:
                raise EngineError(f"Column {name!r}, given as {role}, is not in the data.")
            if name in roles:
                if roles[name] == role:
                    raise EngineError(f"Column {name!r} is listed twice as {role}.")
                raise EngineError(f"Column {name!r} cannot be both {roles[name]} and {role}.")
            roles[name] = role
    protects = any(isinstance(c, EarlierReleases) for c in model.criteria)
    if protects and not config.earlier_releases:
        raise EngineError("Protecting earlier releases needs at least one earlier release.")
    for name, membership in config.earlier_releases.items():
        if len(membership) != rows:
            raise EngineError(
                f"The earlier release {name!r} gives a class for {len(membership):,} rows; the "
                f"data has {rows:,}."
            )
    for criterion in model.criteria:
        if criterion.needs_sensitive and not config.sensitive:
            raise EngineError(f"{criterion.label} needs at least one sensitive attribute.")
        if criterion.requires_hierarchy():
            for name in config.sensitive:
                if name not in config.sensitive_hierarchies:
                    raise EngineError(
                        f"{criterion.describe().capitalize()} needs a hierarchy for the "
                        f"sensitive attribute {name!r}."
                    )
        if config.algorithm == "mondrian" and not criterion.local_recoding:
            raise EngineError(
                f"{criterion.label.capitalize()} cannot be enforced by Mondrian (local "
                "recoding); use the optimal search."
            )
    n = rows
    if n == 0:
        raise EngineError("The data has no rows to anonymize.")
    subset = config.research_subset
    if subset is not None:
        if subset.population_rows != n:
            raise EngineError(
                f"The research subset marks {subset.population_rows:,} rows, the population "
                f"table has {n:,}."
            )
        if config.algorithm == "mondrian":
            raise EngineError("A research subset needs the optimal search, not Mondrian.")
        n = subset.size
        if n == 0:
            raise EngineError("The research subset holds no rows to release.")
    if model.k > n:
        raise EngineError(f"k={model.k} is larger than the number of rows ({n}).")
    size = model.population.population_size if model.population is not None else None
    if size is not None and size < n:
        raise EngineError(f"The population ({size:,}) is smaller than the data ({n:,} rows).")
    context = DataContext(
        n,
        population_size=model.population.size(n) if model.population is not None else None,
        population_rows=None if subset is None else subset.population_rows,
    )
    for criterion in model.criteria:
        problem = criterion.data_problem(context)
        if problem:
            raise EngineError(problem)
    if config.levels is not None and config.algorithm == "heuristic":
        raise EngineError("Fixed levels apply to the optimal search, not to the heuristic search.")
    if config.levels is not None and config.algorithm != "optimal":
        raise EngineError("Fixed levels apply to the optimal search, not to Mondrian.")
    if (config.min_levels or config.max_levels) and config.algorithm == "mondrian":
        raise EngineError("Level limits apply to the optimal search, not to Mondrian.")
    for bounds, what in (
        (config.min_levels, "minimum"),
        (config.max_levels, "maximum"),
        (config.levels or {}, "fixed"),
    ):
        for name, level in bounds.items():
            if name not in config.quasi_identifiers:
                raise EngineError(
                    f"A {what} level is given for {name!r}, which is not a quasi-identifier."
                )
            height = config.quasi_identifiers[name].height
            if int(level) != level or not 0 <= int(level) < height:
                raise EngineError(
                    f"The {what} level of {name!r} must be between 0 and {height - 1}, not {level}."
                )
    for name, hierarchy in config.quasi_identifiers.items():
        if not isinstance(hierarchy, Hierarchy):
            raise EngineError(f"The hierarchy of {name!r} is not a Hierarchy.")
        lo = config.min_levels.get(name, 0)
        hi = config.max_levels.get(name, hierarchy.height - 1)
        if lo > hi:
            raise EngineError(
                f"The minimum level of {name!r} ({lo}) is above its maximum level ({hi})."
            )
    for name, weight in config.weights.items():
        if name not in config.quasi_identifiers:
            raise EngineError(f"A weight is given for {name!r}, which is not a quasi-identifier.")
        if not (isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0):
            raise EngineError(
                f"The weight of {name!r} must be a number of 0 or more, not {weight}."
            )


def anonymize(
    data: pd.DataFrame,
    config: AnonymizationConfig,
    progress: ProgressCallback | None = None,
) -> AnonymizationResult:
    """Anonymize ``data`` (cells are strings; "" is a missing value) as ``config`` asks.

    Raises :class:`EngineError` for an unusable configuration, and when no transformation
    satisfies the model within the suppression limit (or the fixed levels do not).
    """
    started = time.perf_counter()
    validate_config(data, config, check_values=config.algorithm == "mondrian")
    if config.algorithm == "mondrian":
        return anonymize_mondrian(data, config, progress)
    utility = config.utility()
    config = generalized_config(config)

    config, dp = safepub.prepare(len(data), config)
    if progress is not None:
        progress(0.0, "encoding the data")
    enc, context = encode(data, config)
    return release(enc, context, config, utility, dp, progress, started, data)[0]


@dataclass
class Chosen:
    """The transformation a release applies: its levels, its classes (``table``), each level-0
    class's class in it (``base_to_class``) and the classes suppressed (``fails``)."""

    levels: tuple[int, ...]
    table: Table
    base_to_class: IntArray
    fails: BoolArray


def release(
    enc: EncodedData,
    context: DataContext,
    config: AnonymizationConfig,
    utility: dict[str, object],
    dp: safepub.SafePubRun | None,
    progress: ProgressCallback | None,
    started: float,
    data: pd.DataFrame | None,
) -> tuple[AnonymizationResult, Chosen]:
    """The search on the encoded input, and the result: with ``data`` (the rows ``enc`` was
    encoded from) the extract too; without (``enc`` from a frequency table), ``data`` of the
    result is empty and ``source_rows`` None: the rows are released from the returned
    :class:`Chosen` (:mod:`.streaming`). ``config`` is :func:`generalized_config`'s, after
    SafePub's preparation (``dp``); ``utility`` the original configuration's."""
    model = config.model
    qis = list(config.quasi_identifiers)
    subset = config.research_subset
    n = enc.n
    population_size = context.population_size
    lo = [int(config.min_levels.get(q, 0)) for q in qis]
    hi = [int(config.max_levels.get(q, config.quasi_identifiers[q].height - 1)) for q in qis]
    search_info: dict[str, object] = {}
    if dp is not None:
        found, optimum, candidates = _safepub_search(enc, model, qis, lo, hi, config, context, dp)
    elif config.algorithm == "heuristic":
        found, optimum, candidates, search_info = _heuristic(
            enc, model, qis, lo, hi, config, progress, context
        )
    else:
        found, optimum, candidates = _search(enc, model, qis, lo, hi, config, progress, context)

    # Re-derive the chosen transformation from the level-0 table to map rows to classes.
    table, base_to_class, judged = judge_levels(enc, model, context, found.levels)
    fails = judged.fails
    suppressed = int(table.counts[fails].sum())
    aggregates: dict[str, ObjectArray] = {}
    if data is None or enc.row_class is None:
        if enc.aggregated or subset is not None:
            raise EngineError(
                "Microaggregation and research subsets need the rows: they are not released "
                "from a frequency table."
            )
        extract = pd.DataFrame()
        source_rows = None
    else:
        # int32: a class per row of 12 million rows is 48 MB, not 96 MB.
        row_class = base_to_class.astype(np.int32)[enc.row_class]
        keep_rows = ~fails[row_class]
        if subset is not None:
            keep_rows &= subset.rows  # only the research subset is released

        # --- the extract: identifiers dropped, suppressed rows removed, QIs generalized
        kept_class = row_class[keep_rows]
        columns: dict[str, object] = {}
        aggregates = {c.name: _aggregates(c, table, row_class) for c in enc.aggregated}
        for col in data.columns:
            if col in config.identifiers:
                continue
            if col in aggregates:
                columns[col] = aggregates[col][kept_class]
            elif col in config.quasi_identifiers:
                i = qis.index(col)
                level = found.levels[i]
                columns[col] = _released_column(
                    list(enc.attributes[i].labels[level]),
                    table.codes[kept_class, i],
                    isinstance(data[col].dtype, pd.CategoricalDtype),
                )
            else:
                columns[col] = _kept(data[col], keep_rows, suppressed > 0 or subset is not None)
        extract = pd.DataFrame(columns, columns=list(columns))
        source_rows = np.flatnonzero(keep_rows)

    # --- equivalence classes of the extract (not the population's classes it does not hold)
    keep_classes = ~fails & (table.counts > 0)
    kept_table_codes = table.codes[keep_classes]
    sizes = table.counts[keep_classes]
    classes = pd.DataFrame(
        {
            q: np.array(enc.attributes[i].labels[found.levels[i]], dtype=object)[
                kept_table_codes[:, i]
            ]
            for i, q in enumerate(qis)
        },
        dtype=object,  # the labels as they are (pandas 3 would copy them into its str dtype)
    )
    for name, per_class in aggregates.items():  # each class's aggregate of the column
        classes[name] = per_class[keep_classes]
    released = table.classes().subset(keep_classes)
    for name, values in model.class_columns(released, context).items():
        classes[name] = values
    classes["fails"] = ""
    classes["borderline"] = model.borderline_models(released, context)
    classes = classes.sort_values(["size", *qis], kind="stable").reset_index(drop=True)
    achieved_l, achieved_t = model.legacy_achieved(released, context)

    # --- metrics
    kept_shares, suppressed_shares = enc.share_sums(table, fails)
    loss_vec = metrics.loss_per_attribute(
        kept_shares, suppressed_shares, suppressed, n, enc.domain_sizes
    )
    aggregated_loss = enc.aggregated_loss(table, fails)
    heights = {q: config.quasi_identifiers[q].height for q in qis}
    entropy, entropy_max = [], []
    failing_base = np.flatnonzero(fails[base_to_class])
    for i, a in enumerate(enc.attributes):
        level = found.levels[i]
        # Rows of each original value that are suppressed (released as "*").
        sup_v = np.bincount(
            enc.base.codes[failing_base, i],
            weights=enc.base.counts[failing_base],
            minlength=a.cardinality(0),
        )
        h, top = metrics.non_uniform_entropy_levels(
            a.frequency - sup_v,
            sup_v,
            a.gen,
            a.released_level(level),
            a.hierarchy.label_levels[SUPPRESSED_VALUE],
        )
        entropy.append(h)
        entropy_max.append(top)
    metric_values = {
        "loss": float(metrics.loss(np.concatenate((loss_vec, aggregated_loss)), enc.weights)),
        "granularity": metrics.granularity((kept_shares + suppressed) / n, 1.0 / enc.domain_sizes),
        "precision": float(
            metrics.precision(found.levels, [heights[q] for q in qis], suppressed, n)
        ),
        "discernibility": int(metrics.discernibility(sizes, suppressed, n)),
        "average_class_size": float(metrics.average_class_size(n - suppressed, len(sizes))),
        "non_uniform_entropy": metrics.normalised_entropy(entropy, entropy_max),
        "non_uniform_entropy_bits": float(sum(entropy)),
        "loss_per_attribute": {
            **{q: float(v) for q, v in zip(qis, loss_vec, strict=True)},
            **{c.name: float(v) for c, v in zip(enc.aggregated, aggregated_loss, strict=True)},
        },
    }

    before = enc.base.counts[enc.base.counts > 0]
    if progress is not None:
        progress(1.0, "release built")
    warnings = [
        w
        for h in [*config.quasi_identifiers.values(), *config.sensitive_hierarchies.values()]
        for w in h.warnings
    ]
    result = AnonymizationResult(
        data=extract,
        algorithm=config.algorithm,
        levels={q: int(v) for q, v in zip(qis, found.levels, strict=True)},
        heights=heights,
        rows_in=n,
        rows_out=n - suppressed,
        suppressed=suppressed,
        classes=classes,
        achieved_k=int(sizes.min()) if len(sizes) else 0,
        achieved_l=achieved_l,
        achieved_t=achieved_t,
        metrics=metric_values,
        risk_before=risk_summary(before, population_size=population_size),
        risk_after=risk_summary(sizes, population_size=population_size),
        transformations_checked=int(found.transformations_checked),
        seconds=float(time.perf_counter() - started),
        heuristic=bool(found.heuristic),
        source_rows=source_rows,
        model=model,
        models=_with_sample(model.achieved(released, context), dp),
        candidates=candidates,
        optimum=optimum,
        levels_fixed=config.levels is not None,
        warnings=warnings,
        class_sizes_before=np.asarray(before, dtype=np.int64),
        population_rows=enc.population_rows,
        utility=utility,
        search=search_info,
        safepub=None if dp is None else dp.report(),
    )
    return result, Chosen(tuple(found.levels), table, base_to_class, fails)


def _aggregates(column: AggregatedColumn, table: Table, row_class: SmallIntArray) -> ObjectArray:
    """The microaggregated column's value of every class of ``table``."""
    cells = table.aggregated[column.name]
    first = None
    if column.function == "mode":  # ties go by the order of the rows (ARX's hash table)
        key, first = first_rows(column, row_class)
        if not np.array_equal(key, cells.group * column.domain_size + cells.value):
            raise EngineError("The classes of the microaggregated column do not match its rows.")
    values = aggregate_classes(
        column, cells.group, cells.value, cells.count, len(table.counts), first
    )
    return np.array(values, dtype=object)


def encode(data: pd.DataFrame, config: AnonymizationConfig) -> tuple[EncodedData, DataContext]:
    """The input encoded for the optimal search (the quasi-identifiers, the sensitive
    attributes, the research subset and, when the model protects them, the earlier releases'
    classes, counted in the subset's rows), and what the privacy models know of it."""
    config = generalized_config(config)
    model = config.model
    qis = list(config.quasi_identifiers)
    work = pd.DataFrame({c: _as_text(data[c]) for c in qis + list(config.sensitive)})
    aggregated = [
        AggregatedColumn.build(name, function, _as_text(data[name]).tolist())
        for name, function in config.microaggregate.items()
    ]
    protects = any(isinstance(c, EarlierReleases) for c in model.criteria)
    subset = config.research_subset
    enc = EncodedData.build(
        work,
        dict(config.quasi_identifiers),
        config.sensitive,
        config.sensitive_hierarchies,
        track_first=bool(model.dataset_criteria),
        subset=None if subset is None else subset.rows,
        linked=config.earlier_releases if protects else None,
        aggregated=aggregated,
    )
    enc.weights = loss_weights(config)
    population_size = model.population.size(enc.n) if model.population is not None else None
    return enc, enc.data_context(config.sensitive_hierarchies, population_size)


def loss_weights(config: AnonymizationConfig) -> FloatArray | None:
    """The quasi-identifiers' weights in the Loss, in their order, the microaggregated ones
    last (None: all equal)."""
    if not config.weights:
        return None
    names = [q for q in config.quasi_identifiers if q not in config.microaggregate]
    return metrics.loss_weights(
        [
            float(config.weights.get(q, metrics.DEFAULT_WEIGHT))
            for q in names + list(config.microaggregate)
        ]
    )


def judge_levels(
    enc: EncodedData, model: PrivacyModel, context: DataContext, levels: tuple[int, ...]
) -> tuple[Table, IntArray, Evaluation]:
    """The transformation ``levels`` applied: its classes, each level-0 class's class and the
    model's judgement (which classes are suppressed), exactly as :func:`anonymize` releases
    it (whatever the suppression limit)."""
    table, base_to_class = enc.rollup(enc.base, levels)
    judged = model.evaluate(
        table.classes(),
        context,
        None,
        tie_order=enc.tie_order(table) if model.dataset_criteria else None,
        excluded=enc.fully_generalized(table) if model.dataset_criteria else None,
    )
    return table, base_to_class, judged


def _candidate(qis: list[str], entry: CandidateEntry, optimum_levels: tuple[int, ...]) -> Candidate:
    levels, loss, highest, suppressed = entry
    return Candidate(
        {q: int(v) for q, v in zip(qis, levels, strict=True)},
        float(loss),
        float(highest),
        int(suppressed),
        tuple(levels) == tuple(optimum_levels),
    )


def _search(
    enc: EncodedData,
    model: PrivacyModel,
    qis: list[str],
    lo: list[int],
    hi: list[int],
    config: AnonymizationConfig,
    progress: ProgressCallback | None,
    context: DataContext,
) -> tuple[SearchResult, Candidate, list[Candidate]]:
    """The transformation to apply (the optimum, or the best one with the fixed levels), the
    optimum, and the Pareto front of the valid candidates evaluated."""
    chosen = None
    if config.levels is not None:
        fixed_lo = [int(config.levels.get(q, a)) for q, a in zip(qis, lo, strict=True)]
        fixed_hi = [int(config.levels.get(q, b)) for q, b in zip(qis, hi, strict=True)]
        try:
            chosen = search(
                enc, model, fixed_lo, fixed_hi, config.time_limit, None, context, explore=0
            )
        except EngineError:
            message = _fixed_levels_message(enc, model, qis, fixed_lo, config.levels, context)
            raise EngineError(message) from None
    best = search(enc, model, lo, hi, config.time_limit, progress, context)
    front = [_candidate(qis, c, best.levels) for c in pareto_front(best.candidates)]
    optimum = _candidate(
        qis, (best.levels, best.loss, _highest(best), best.suppressed), best.levels
    )
    return (chosen or best), optimum, front


def _validate_limits(config: AnonymizationConfig) -> None:
    """The heuristic search's limits: at least one, each positive (the optimal search's time
    limit, after which it falls back to a greedy climb, may be 0)."""
    limit, steps = config.time_limit, config.step_limit
    heuristic = config.algorithm == "heuristic"
    if (
        heuristic
        and limit is not None
        and not (isinstance(limit, int | float) and math.isfinite(limit) and limit > 0)
    ):
        raise EngineError(f"The time limit must be a positive number of seconds, not {limit}.")
    if steps is not None and not (isinstance(steps, int) and steps > 0):
        raise EngineError(f"The step limit must be a whole number of 1 or more, not {steps}.")
    if config.algorithm == "heuristic" and limit is None and steps is None:
        raise EngineError("The heuristic search needs a time limit (seconds) or a step limit.")
    if steps is not None and config.algorithm != "heuristic":
        raise EngineError("A step limit applies to the heuristic search only.")


def _heuristic(
    enc: EncodedData,
    model: PrivacyModel,
    qis: list[str],
    lo: list[int],
    hi: list[int],
    config: AnonymizationConfig,
    progress: ProgressCallback | None,
    context: DataContext,
) -> tuple[SearchResult, Candidate, list[Candidate], dict[str, object]]:
    """The heuristic search's best transformation, the Pareto front of its valid candidates,
    and its summary (:func:`heuristic_summary`). When the search stopped before exhausting a
    lattice the optimal search can lay out (:data:`.lattice.MAX_NODES`), the optimal search
    runs too, within the same time limit, so that the gap to the optimum can be stated."""
    found = lightning(enc, model, lo, hi, config.time_limit, config.step_limit, progress, context)
    optimum_loss: float | None = found.loss if found.exhausted else None
    n_nodes = math.prod(b - a + 1 for a, b in zip(lo, hi, strict=True))
    if not found.exhausted and n_nodes <= MAX_NODES:
        exact = search(enc, model, lo, hi, config.time_limit, None, context, explore=0)
        if not exact.heuristic:
            optimum_loss = exact.loss
    front = [_candidate(qis, c, found.levels) for c in pareto_front(found.candidates)]
    best = _candidate(
        qis, (found.levels, found.loss, _highest(found), found.suppressed), found.levels
    )
    return found, best, front, heuristic_summary(found, config, optimum_loss)


def heuristic_summary(
    found: HeuristicResult, config: AnonymizationConfig, optimum_loss: float | None
) -> dict[str, object]:
    """What the report states about a heuristic search: its limits, the transformations it
    evaluated (``steps``), why it stopped, whether its result is proven optimal (the lattice
    was exhausted), the optimum's Loss when known and the gap to it (Loss minus the optimum's,
    absolute and relative)."""
    gap = None if optimum_loss is None else max(found.loss - optimum_loss, 0.0)
    if gap is not None and gap <= 1e-12 * max(1.0, abs(optimum_loss or 0.0)):
        gap = 0.0
    return {
        "algorithm": "heuristic",
        "time_limit": config.time_limit,
        "step_limit": config.step_limit,
        "steps": int(found.transformations_checked),
        "expansions": int(found.expansions),
        "stopped": found.stopped,
        "seconds": float(found.seconds),
        "proven_optimal": bool(found.exhausted),
        "optimum_known": optimum_loss is not None,
        "optimum_loss": optimum_loss,
        "loss_gap": gap,
        "loss_gap_relative": (
            None if gap is None or not optimum_loss else float(gap / optimum_loss)
        ),
        "statement": optimality_statement(found.exhausted, gap, optimum_loss),
    }


def optimality_statement(exhausted: bool, gap: float | None, optimum_loss: float | None) -> str:
    """One sentence for the report and the request page."""
    if exhausted:
        return "Proven optimal: the search evaluated or pruned every transformation."
    if gap is None or optimum_loss is None:
        return (
            "Not proven optimal: the search stopped at its limit, and the optimum is not known "
            "(the lattice is too large for the optimal search, or it did not finish in time)."
        )
    if gap == 0.0:
        return (
            "Optimal, though not proven by the search itself: its Loss equals the optimum's, "
            "found by the optimal search."
        )
    share = f" ({gap / optimum_loss:.1%} more)" if optimum_loss else ""
    return (
        f"Not optimal: its Loss is {gap:.6f} above the optimum's {optimum_loss:.6f}{share}, "
        "found by the optimal search."
    )


def _safepub_search(
    enc: EncodedData,
    model: PrivacyModel,
    qis: list[str],
    lo: list[int],
    hi: list[int],
    config: AnonymizationConfig,
    context: DataContext,
    dp: safepub.SafePubRun,
) -> tuple[SearchResult, Candidate, list[Candidate]]:
    """SafePub's transformation: the scheme's levels, or the data-dependent search's choice.
    No optimum is searched and no candidates are kept: they would look at the data without
    spending budget."""
    scored = 0
    if config.levels is not None:
        levels = tuple(int(config.levels[q]) for q in qis)
    else:
        levels, scored = safepub.exponential_search(enc, model, context, lo, hi, dp)
    chosen = search(enc, model, list(levels), list(levels), None, None, context, explore=0)
    chosen = replace(chosen, transformations_checked=chosen.transformations_checked + scored)
    entry = (chosen.levels, chosen.loss, _highest(chosen), chosen.suppressed)
    return chosen, _candidate(qis, entry, chosen.levels), []


def _with_sample(
    models: list[dict[str, object]], dp: safepub.SafePubRun | None
) -> list[dict[str, object]]:
    """The models' achieved values, SafePub's with the rows it sampled and its seed."""
    if dp is None:
        return models
    for entry in models:
        achieved = entry.get("achieved")
        if entry.get("model") == dp.criterion.name and isinstance(achieved, dict):
            achieved.update(sampled_rows=dp.sampled_rows, seed=dp.seed)
    return models


def _highest(found: SearchResult) -> float:
    for levels, _, highest, _ in found.candidates:
        if tuple(levels) == tuple(found.levels):
            return float(highest)
    return 0.0


def _fixed_levels_message(
    enc: EncodedData,
    model: PrivacyModel,
    qis: list[str],
    lo: list[int],
    levels: Mapping[str, int],
    context: DataContext,
) -> str:
    given = ", ".join(f"{q}={levels[q]}" for q in qis if q in levels)
    share = f"{model.suppression_limit * 100:g}%"
    allowed = int(np.floor(model.suppression_limit * enc.n + 1e-9))
    if len(levels) == len(qis):
        table, _ = enc.rollup(enc.base, tuple(lo))
        judged = model.evaluate(
            table.classes(),
            context,
            None,
            tie_order=enc.tie_order(table) if model.dataset_criteria else None,
            excluded=enc.fully_generalized(table) if model.dataset_criteria else None,
        )
        return (
            f"The levels {given} do not satisfy {model.describe_criteria()} with at most {share} "
            f"of rows suppressed: they would suppress {judged.suppressed:,} rows, at most "
            f"{allowed:,} are allowed."
        )
    return (
        f"No generalization with {given} satisfies {model.describe_criteria()} with at most "
        f"{share} of rows suppressed."
    )
