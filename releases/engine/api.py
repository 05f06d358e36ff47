"""The engine's entry point: :func:`anonymize` a DataFrame under a privacy model."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from . import metrics
from .hierarchy import Hierarchy
from .lattice import EncodedData, search
from .privacy import TContext, distinct_l, entropy_l, recursive_l_value, t_distance
from .risk import risk_summary
from .types import (
    SUPPRESSED_VALUE,
    AnonymizationConfig,
    AnonymizationResult,
    EngineError,
    ProgressCallback,
)

__all__ = ["anonymize", "validate_config"]


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
        return column
    return column.where(column.notna(), "").astype(str)


def _released_column(
    labels: list[str], codes: np.ndarray, categorical: bool
) -> pd.Categorical | np.ndarray:
    """A generalized quasi-identifier: its labels taken by code. A Categorical column stays one
    (of the labels that occur) so that millions of rows cost a small code each; other columns
    are object strings as before (callers group on them without ``observed=True``)."""
    if categorical and len(set(labels)) == len(labels):
        return pd.Categorical.from_codes(codes, categories=labels).remove_unused_categories()
    return np.array(labels, dtype=object)[codes]


def _kept(column: pd.Series, keep_rows: np.ndarray, dropped: bool):
    """The rows of a column that are released (a Categorical keeps only values that occur)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        kept = column.array[keep_rows]
        return kept.remove_unused_categories() if dropped else kept
    return column.to_numpy()[keep_rows]


def validate_config(
    data: pd.DataFrame, config: AnonymizationConfig, check_values: bool = True
) -> None:
    """Raise :class:`EngineError` with one clear sentence when the configuration cannot work.

    ``check_values``: also check that every hierarchy covers its column's values (the optimal
    search does that itself while encoding, so :func:`anonymize` skips it here)."""
    model = config.model
    model.validate()
    if config.algorithm not in ("optimal", "mondrian"):
        raise EngineError(f"Unknown algorithm {config.algorithm!r}; use 'optimal' or 'mondrian'.")
    if not config.quasi_identifiers:
        raise EngineError("Choose at least one quasi-identifier.")
    roles: dict[str, str] = {}
    for role, names in (
        ("an identifier", config.identifiers),
        ("a quasi-identifier", list(config.quasi_identifiers)),
        ("a sensitive attribute", config.sensitive),
    ):
        for name in names:
            if name not in data.columns:
                raise EngineError(f"Column {name!r}, given as {role}, is not in the data.")
            if name in roles:
                if roles[name] == role:
                    raise EngineError(f"Column {name!r} is listed twice as {role}.")
                raise EngineError(f"Column {name!r} cannot be both {roles[name]} and {role}.")
            roles[name] = role
    if (model.l is not None or model.t is not None) and not config.sensitive:
        what = "l-diversity" if model.l is not None else "t-closeness"
        raise EngineError(f"{what} needs at least one sensitive attribute.")
    if model.t is not None and model.t_distance == "hierarchical":
        for name in config.sensitive:
            if name not in config.sensitive_hierarchies:
                raise EngineError(
                    f"Hierarchical-distance t-closeness needs a hierarchy for the sensitive "
                    f"attribute {name!r}."
                )
    n = len(data)
    if n == 0:
        raise EngineError("The data has no rows to anonymize.")
    if model.k > n:
        raise EngineError(f"k={model.k} is larger than the number of rows ({n}).")
    for bounds, what in ((config.min_levels, "minimum"), (config.max_levels, "maximum")):
        for name, level in bounds.items():
            if name not in config.quasi_identifiers:
                raise EngineError(
                    f"A {what} level is given for {name!r}, which is not a quasi-identifier."
                )
            height = config.quasi_identifiers[name].height
            if not 0 <= int(level) < height:
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
    if not check_values:
        return
    for name, hierarchy in list(config.quasi_identifiers.items()) + list(
        config.sensitive_hierarchies.items()
    ):
        if name in data.columns:
            named = hierarchy if hierarchy.attribute else hierarchy.with_attribute(name)
            named.validate_against(pd.unique(_as_text(data[name])))


def anonymize(
    data: pd.DataFrame,
    config: AnonymizationConfig,
    progress: ProgressCallback | None = None,
) -> AnonymizationResult:
    """Anonymize ``data`` (cells are strings; "" is a missing value) as ``config`` asks.

    Raises :class:`EngineError` for an unusable configuration, and when no transformation
    satisfies the model within the suppression limit.
    """
    started = time.perf_counter()
    validate_config(data, config, check_values=config.algorithm != "optimal")
    if config.algorithm == "mondrian":
        from .mondrian import anonymize_mondrian

        return anonymize_mondrian(data, config, progress)

    model = config.model
    if progress is not None:
        progress(0.0, "encoding the data")
    qis = list(config.quasi_identifiers)
    work = pd.DataFrame({c: _as_text(data[c]) for c in qis + list(config.sensitive)})
    enc = EncodedData.build(
        work, dict(config.quasi_identifiers), config.sensitive, model, config.sensitive_hierarchies
    )
    lo = [int(config.min_levels.get(q, 0)) for q in qis]
    hi = [int(config.max_levels.get(q, config.quasi_identifiers[q].height - 1)) for q in qis]
    found = search(enc, model, lo, hi, config.time_limit, progress)

    # Re-derive the chosen transformation from the level-0 table to map rows to classes.
    table, base_to_class = enc.rollup(enc.base, found.levels)
    fails = enc.fails(table, model)
    row_class = base_to_class[enc.row_class]
    keep_rows = ~fails[row_class]
    n = enc.n
    suppressed = int(table.counts[fails].sum())

    # --- the extract: identifiers dropped, suppressed rows removed, QIs generalized
    kept_class = row_class[keep_rows]
    columns: dict[str, object] = {}
    for col in data.columns:
        if col in config.identifiers:
            continue
        if col in config.quasi_identifiers:
            i = qis.index(col)
            level = found.levels[i]
            columns[col] = _released_column(
                list(enc.attributes[i].labels[level]),
                table.codes[kept_class, i],
                isinstance(data[col].dtype, pd.CategoricalDtype),
            )
        else:
            columns[col] = _kept(data[col], keep_rows, suppressed > 0)
    extract = pd.DataFrame(columns, columns=list(columns))

    # --- equivalence classes of the extract
    keep_classes = ~fails
    kept_table_codes = table.codes[keep_classes]
    sizes = table.counts[keep_classes]
    classes = pd.DataFrame(
        {
            q: np.array(enc.attributes[i].labels[found.levels[i]], dtype=object)[
                kept_table_codes[:, i]
            ]
            for i, q in enumerate(qis)
        }
    )
    classes["size"] = sizes
    achieved_l: dict[str, float] = {}
    achieved_t: dict[str, float] = {}
    for name in config.sensitive:
        sc = table.sensitive[name].subset(keep_classes)
        dl = distinct_l(sc)
        el = entropy_l(sc)
        ctx = enc.contexts.get(name) or TContext.build(
            enc.sensitive_codes[name], "equal", n_values=len(enc.sensitive_labels[name])
        )
        tv = t_distance(sc, ctx)
        classes[f"{name}:distinct_l"] = dl
        classes[f"{name}:entropy_l"] = el
        classes[f"{name}:t"] = tv
        if model.l_variant == "entropy" and model.l is not None:
            lv = el
        elif model.l_variant == "recursive" and model.l is not None:
            lv = recursive_l_value(sc, float(model.c or 0))
        else:
            lv = dl
        achieved_l[name] = float(lv.min()) if len(lv) else 0.0
        achieved_t[name] = float(tv.max()) if len(tv) else 0.0
    classes["fails"] = ""
    classes = classes.sort_values(["size", *qis], kind="stable").reset_index(drop=True)

    # --- metrics
    loss_vec = enc.loss_vector(table, fails)
    kept_shares, _ = enc.share_sums(table, fails)
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
        "loss": float(metrics.loss(loss_vec)),
        "granularity": metrics.granularity((kept_shares + suppressed) / n, 1.0 / enc.domain_sizes),
        "precision": float(
            metrics.precision(found.levels, [heights[q] for q in qis], suppressed, n)
        ),
        "discernibility": int(metrics.discernibility(sizes, suppressed, n)),
        "average_class_size": float(metrics.average_class_size(n - suppressed, len(sizes))),
        "non_uniform_entropy": metrics.normalised_entropy(entropy, entropy_max),
        "non_uniform_entropy_bits": float(sum(entropy)),
        "loss_per_attribute": {q: float(v) for q, v in zip(qis, loss_vec, strict=True)},
    }

    if progress is not None:
        progress(1.0, "release built")
    return AnonymizationResult(
        data=extract,
        algorithm="optimal",
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
        risk_before=risk_summary(enc.base.counts),
        risk_after=risk_summary(sizes),
        transformations_checked=int(found.transformations_checked),
        seconds=float(time.perf_counter() - started),
        heuristic=bool(found.heuristic),
        source_rows=np.flatnonzero(keep_rows),
    )
