"""Strict multidimensional Mondrian (LeFevre, DeWitt & Ramakrishnan, ICDE 2006), local recoding.

The table is split recursively. A partition is cut on the quasi-identifier with the widest
normalised range (numeric: value range / domain range; categorical: values under the LCA /
domain size), falling back to the next widest when that one cannot be cut. The cut is the
allowed boundary closest to the median row among those leaving at least k rows on each side
(the median itself whenever it is allowed; k is the smallest class any per-class model can
accept, :meth:`.criteria.PrivacyModel.min_class_size`); with models on sensitive attributes the
three most balanced such boundaries are tried. A cut is made only when *both* halves satisfy
every per-class model of the configuration (:meth:`.criteria.PrivacyModel.class_fails`). A
partition that no quasi-identifier can cut is an equivalence class.

Models of the whole release: average re-identification risk caps the number of classes at
``floor(r n)`` (partitions are then cut breadth-first, so that the cap is spread over the whole
table); population uniqueness is refused (ARX does not support it with local recoding).

Everything runs on integer codes:

* numeric quasi-identifiers (every value parses as a finite number, no missing value): code =
  rank of the distinct value; any boundary between two codes may be cut; a class is released
  as ``"[min-max]"`` (the original strings of its smallest and largest value) or as the single
  value when it has one;
* other quasi-identifiers: the distinct values are ordered depth-first along the hierarchy
  (siblings in the order they first appear in the hierarchy), so every hierarchy node covers a
  contiguous run of codes. A partition is only cut between children of its lowest common
  ancestor (LCA), so a flat hierarchy (value, ``*``) is cut anywhere in that order. A class is
  released as the LCA of the values it holds: the lowest hierarchy node covering all of them,
  ``*`` at worst. (No set notation: every released value is a node of the given hierarchy.)

Mondrian suppresses no row: when the whole table already fails the models there is nothing to
split and :class:`EngineError` is raised.

Metrics (local recoding; ``n`` rows, ``d`` quasi-identifiers, classes ``E``), with the same
keys and aggregates as the optimal search (:mod:`.metrics`):

* cell loss: numeric ``(max - min) / (domain max - domain min)`` of the released range;
  categorical ``(hierarchy leaves under the released node - 1) / (hierarchy leaves - 1)`` (leaves
  of the hierarchy, as ARX's domain shares; 0 for a one-leaf domain). This is ARX's normalised
  Loss of a cell: ``(share - 1/D) / (1 - 1/D)`` with ``share = leaves / D``.
  ``loss_per_attribute[a]`` = mean cell loss of column a over the rows;
* ``loss`` = ARX's geometric aggregate ``prod_a (1 + loss_a)^(1/d) - 1``;
  ``granularity`` = ARX's aggregate (:func:`.metrics.granularity`) of the mean domain share of
  each column (categorical: leaves under the released node / leaves; numeric: the released
  range's share of the column's range, with lower bound 0);
* ``precision`` (Sweeney) = mean over cells of ``level / (height - 1)``; a categorical cell's
  level is its released node's level in the hierarchy, a numeric cell counts its cell loss;
* ``discernibility`` = ``sum_E |E|^2`` (no row is suppressed);
* ``average_class_size`` = ``n / |classes|``;
* ``non_uniform_entropy_bits`` = sum over attributes and rows of
  ``-log2( #rows(original v, released g) / #rows(released g) )`` (ARX's definition when no row
  is suppressed); ``non_uniform_entropy`` = that sum over the sum of each column's maximum
  ``-sum_v f_v log2(f_v / n)``, in [0, 1] as ARX shows it.

``transformations_checked`` counts the partitions evaluated (every node of the split tree).
Partitions whose released values coincide form one equivalence class of the extract, and
``classes`` / ``achieved_*`` / risk are computed on those classes, as a recipient sees them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import metrics
from .arrays import BoolArray, FloatArray, IntArray, ObjectArray
from .criteria import Classes, DataContext
from .hierarchy import Hierarchy
from .privacy import SensitiveCounts
from .risk import class_sizes_of, risk_summary
from .summation import block_mean, block_sum
from .types import (
    SUPPRESSED_VALUE,
    AnonymizationConfig,
    AnonymizationResult,
    EngineError,
    HierarchyError,
    ProgressCallback,
)

_EPS = 1e-9


# --------------------------------------------------------------------------- hierarchies


def _hierarchy_rows(hierarchy: Hierarchy | None) -> list[list[str]]:
    """Rows ``[value, level1, ..., top]`` of a hierarchy."""
    if hierarchy is None:
        return []
    return [list(r) for r in hierarchy.rows]


def _ordered_tree(
    values: Sequence[str], rows: list[list[str]], attribute: str
) -> tuple[list[str], IntArray]:
    """Order ``values`` depth-first along the hierarchy ``rows``.

    Returns the ordered values and ``nodes`` of shape (levels, len(values)): ``nodes[l, c]``
    is the id of the level-l ancestor of code c (ids numbered so that a node's codes are
    contiguous). Level 0 is the value itself; the last level is the common root.
    """
    values = list(values)
    if not rows:  # no hierarchy: flat (value, *)
        rows = [[v, SUPPRESSED_VALUE] for v in values]
    height = max(len(r) for r in rows)
    by_value: dict[str, list[str]] = {}
    for r in rows:
        # Short rows (ragged files) are padded with the root.
        by_value.setdefault(r[0], r + [SUPPRESSED_VALUE] * (height - len(r)))
    missing = [v for v in values if v not in by_value]
    if missing:
        shown = ", ".join(repr(v) for v in missing[:5])
        raise HierarchyError(
            f"The hierarchy of {attribute!r} does not cover {len(missing)} value(s) of the data"
            f" (e.g. {shown})."
        )
    # First-appearance rank of each path (node) at each level, from the root down.
    rank: list[dict[tuple[str, ...], int]] = [{} for _ in range(height)]
    for r in rows:
        full = r + [SUPPRESSED_VALUE] * (height - len(r))
        for level in range(height):
            path = tuple(full[level:])
            rank[level].setdefault(path, len(rank[level]))
    paths = [by_value[v] for v in values]
    keys = [
        tuple(rank[level][tuple(p[level:])] for level in range(height - 1, -1, -1)) for p in paths
    ]
    order = sorted(range(len(values)), key=keys.__getitem__)
    ordered = [values[i] for i in order]
    nodes = np.zeros((height + 1, len(values)), dtype=np.int64)
    for level in range(height):
        ids: dict[tuple[str, ...], int] = {}
        nodes[level] = [ids.setdefault(tuple(paths[i][level:]), len(ids)) for i in order]
    # An extra root level guarantees a common ancestor even if the file's tops differ.
    nodes[height] = 0
    return ordered, nodes


# --------------------------------------------------------------------------- attributes


@dataclass
class _QI:
    name: str
    numeric: bool
    codes: IntArray  # code per row
    labels: list[str]  # original string of each code
    values: FloatArray | None = None  # numeric value of each code
    nodes: IntArray | None = None  # (levels, D) ancestor ids, categorical only
    node_labels: list[dict[int, str]] = field(default_factory=list)
    node_lo: list[IntArray] = field(default_factory=list)
    node_hi: list[IntArray] = field(default_factory=list)
    node_leaves: list[dict[int, int]] = field(default_factory=list)  # hierarchy leaves per node
    hierarchy_size: int = 0  # leaves of the whole hierarchy (ARX's domain size)
    top: int = 0  # number of generalization levels above the value (categorical)

    @property
    def domain(self) -> int:
        return len(self.labels)


def _encode_qi(name: str, column: pd.Series, hierarchy: Hierarchy | None) -> _QI:
    # Each row's distinct value (in order of first appearance), then one code per distinct
    # value: a lookup per value, not per row (pandas 3's str columns map cell by cell).
    value_of_row, uniques = pd.factorize(column, sort=False)
    distinct = np.asarray(uniques, dtype=object)
    numbers = pd.to_numeric(pd.Series(distinct, dtype=object), errors="coerce").to_numpy(
        dtype=float
    )
    if len(distinct) and np.isfinite(numbers).all():
        order = np.argsort(numbers, kind="stable")
        labels = [str(distinct[i]) for i in order]
        vals = numbers[order]
        # Equal numbers written differently ("5", "5.0") share a rank: same point on the axis.
        ranks = np.searchsorted(np.unique(vals), vals)
        lookup = dict(zip(labels, ranks, strict=True))
        uniq_vals = np.unique(vals)
        # Keep the first spelling of each number as its label.
        first_label: dict[int, str] = {}
        for lab, rank in zip(labels, ranks.tolist(), strict=True):
            first_label.setdefault(rank, lab)
        codes = np.array([lookup[str(v)] for v in distinct], dtype=np.int64)[value_of_row]
        return _QI(
            name,
            True,
            codes,
            [first_label[i] for i in range(len(uniq_vals))],
            values=uniq_vals,
        )
    rows = _hierarchy_rows(hierarchy)
    ordered, nodes = _ordered_tree([str(v) for v in distinct], rows, name)
    lookup_c = {v: i for i, v in enumerate(ordered)}
    codes = np.array([lookup_c[str(v)] for v in distinct], dtype=np.int64)[value_of_row]
    # Labels of every node (from the hierarchy rows), and each node's code interval.
    height = nodes.shape[0] - 1
    by_value: dict[str, list[str]] = {}
    for r in rows or [[v, SUPPRESSED_VALUE] for v in ordered]:
        by_value.setdefault(r[0], r + [SUPPRESSED_VALUE] * (height - len(r)))
    # Hierarchy leaves under each node (path from the node up to the root), as ARX counts them.
    leaf_count: dict[tuple[str, ...], int] = {}
    for full in by_value.values():
        for level in range(height):
            path = tuple(full[level:])
            leaf_count[path] = leaf_count.get(path, 0) + 1
    node_leaves: list[dict[int, int]] = []
    node_labels: list[dict[int, str]] = []
    node_lo: list[IntArray] = []
    node_hi: list[IntArray] = []
    d = len(ordered)
    positions = np.arange(d)
    for level in range(height + 1):
        ids = nodes[level]
        count = int(ids.max()) + 1
        lo = np.full(count, d, dtype=np.int64)
        hi = np.full(count, -1, dtype=np.int64)
        np.minimum.at(lo, ids, positions)
        np.maximum.at(hi, ids, positions)
        node_lo.append(lo)
        node_hi.append(hi)
        level_labels: dict[int, str] = {}
        leaves: dict[int, int] = {}
        for code in lo:
            full = by_value[ordered[int(code)]]
            node = int(ids[code])
            level_labels[node] = full[level] if level < height else SUPPRESSED_VALUE
            leaves[node] = leaf_count[tuple(full[level:])] if level < height else len(by_value)
        node_labels.append(level_labels)
        node_leaves.append(leaves)
    return _QI(
        name,
        False,
        codes,
        ordered,
        nodes=nodes,
        node_labels=node_labels,
        node_lo=node_lo,
        node_hi=node_hi,
        node_leaves=node_leaves,
        hierarchy_size=len(by_value),
        # Generalization steps from a value to the file's top (the extra root adds one).
        top=max(height - 1, 1),
    )


def _encode_sensitive(column: pd.Series) -> tuple[IntArray, list[str]]:
    codes, uniques = pd.factorize(column, sort=False)
    return codes.astype(np.int64), [str(u) for u in uniques]


# --------------------------------------------------------------------------- the search


def _lca_levels(qi: _QI, lo: int, hi: int) -> int:
    nodes = qi.nodes
    assert nodes is not None
    return int(np.argmax(nodes[:, lo] == nodes[:, hi]))


def anonymize_mondrian(
    data: pd.DataFrame, config: AnonymizationConfig, progress: ProgressCallback | None = None
) -> AnonymizationResult:
    """Anonymize ``data`` with strict Mondrian under ``config.model`` (see module docstring)."""
    start = time.perf_counter()
    if progress is not None:
        progress(0.0, "encoding the data")
    model = config.model
    model.validate()
    qi_names = list(config.quasi_identifiers)
    if not qi_names:
        raise EngineError("Mondrian needs at least one quasi-identifier.")
    columns = set(data.columns)
    for name in [*qi_names, *config.sensitive, *config.identifiers]:
        if name not in columns:
            raise EngineError(f"Column {name!r} is not in the data.")
    overlap = set(qi_names) & set(config.sensitive)
    if overlap:
        raise EngineError(f"{sorted(overlap)} cannot be both quasi-identifying and sensitive.")
    for criterion in model.criteria:
        if criterion.needs_sensitive and not config.sensitive:
            raise EngineError(f"{criterion.label} needs at least one sensitive attribute.")
        if not criterion.local_recoding:
            raise EngineError(
                f"{criterion.label.capitalize()} cannot be enforced by Mondrian (local "
                "recoding); use the optimal search."
            )

    released = data.drop(columns=list(config.identifiers)).reset_index(drop=True)
    # Cells are strings with "" for missing (guards against callers that read NaNs).
    released = released.apply(lambda c: c.where(c.notna(), "").astype(str))
    n = len(released)
    if n == 0:
        raise EngineError("The table has no rows.")

    qis = [_encode_qi(q, released[q], config.quasi_identifiers[q]) for q in qi_names]
    encoded = {s: _encode_sensitive(released[s]) for s in config.sensitive}
    population_size = model.population.size(n) if model.population is not None else None
    context = DataContext(
        n,
        {s: codes for s, (codes, _) in encoded.items()},
        {s: labels for s, (_, labels) in encoded.items()},
        config.sensitive_hierarchies,
        population_size,
    )
    check_sensitive = model.needs_sensitive
    # Smaller classes fail for sure (k, highest risk, and the bounds l, t, δ, β imply).
    k = model.min_class_size(context)
    budgets = [b for c in model.dataset_criteria if (b := c.class_budget(n)) is not None]
    budget = min(budgets) if budgets else None

    X = np.stack([q.codes for q in qis], axis=1)
    S = {s: codes for s, (codes, _) in encoded.items()}
    d = len(qis)
    numeric = np.array([q.numeric for q in qis])
    spans = np.array(
        [
            (q.values[-1] - q.values[0]) if q.numeric and q.values is not None else q.domain - 1
            for q in qis
        ],
        dtype=float,
    )
    spans[spans == 0] = 1.0

    def halves(rows: IntArray, left: BoolArray) -> Classes:
        """The two halves of a cut as classes (left first)."""
        group = (~left).astype(np.int64)
        sensitive = (
            {
                name: SensitiveCounts.from_codes(group, codes[rows], 2, len(context.labels[name]))
                for name, codes in S.items()
            }
            if check_sensitive
            else {}
        )
        return Classes(np.array([int(left.sum()), int((~left).sum())]), sensitive)

    # The whole table must satisfy the model: Mondrian never suppresses.
    if n < k:
        raise EngineError(
            f"The table has {n} rows, fewer than k = {k}: no release can be {k}-anonymous."
        )
    whole = halves(np.arange(n), np.ones(n, dtype=bool)).subset(np.array([True, False]))
    failing = [c for c in model.class_criteria if c.class_fails(whole, context)[0]]
    if failing:
        raise EngineError(
            f"Even the whole table, as one class, fails {failing[0].label} "
            f"({failing[0].describe()}); relax the model (Mondrian does not suppress rows)."
        )
    if budget is not None and budget < 1:
        raise EngineError(
            f"{model.dataset_criteria[0].describe().capitalize()} cannot hold for {n} rows, "
            "even as one class."
        )

    finals: list[IntArray] = []
    final_lo: list[IntArray] = []
    final_hi: list[IntArray] = []
    evaluated = 0
    done_rows = 0
    partitions = 1
    # With a class budget (average risk), cut breadth-first so that the budget is spread over
    # the whole table instead of spent on its first corner.
    stack: deque[IntArray] = deque([np.arange(n)])
    while stack:
        idx = stack.popleft() if budget is not None else stack.pop()
        evaluated += 1
        sub = X[idx]
        lo = sub.min(axis=0)
        hi = sub.max(axis=0)
        m_rows = len(idx)
        split: tuple[IntArray, IntArray] | None = None
        if m_rows >= 2 * k and (budget is None or partitions < budget):
            widths = np.zeros(d)
            lca = np.zeros(d, dtype=np.int64)
            for j, q in enumerate(qis):
                if lo[j] == hi[j]:
                    continue
                if numeric[j]:
                    assert q.values is not None
                    widths[j] = (q.values[hi[j]] - q.values[lo[j]]) / spans[j]
                else:
                    assert q.nodes is not None
                    level = _lca_levels(q, int(lo[j]), int(hi[j]))
                    lca[j] = level
                    node = q.nodes[level, lo[j]]
                    leaves = q.node_hi[level][node] - q.node_lo[level][node]
                    widths[j] = leaves / spans[j]
            for j in np.argsort(-widths, kind="stable").tolist():
                if widths[j] <= 0:
                    break
                col = sub[:, j]
                base = int(lo[j])
                cum = np.cumsum(np.bincount(col - base, minlength=int(hi[j]) - base + 1))
                left = cum[:-1]  # rows with code < base + 1 + i
                valid = (left >= k) & (m_rows - left >= k)
                if not numeric[j] and lca[j] > 1:
                    # Cut only between children of the LCA (level lca - 1 nodes).
                    nodes = qis[j].nodes
                    assert nodes is not None
                    child = nodes[lca[j] - 1, base : int(hi[j]) + 1]
                    valid &= child[1:] != child[:-1]
                if not valid.any():
                    continue
                candidates = np.flatnonzero(valid)
                # Most balanced first (the median cut when allowed); a couple of fall-backs
                # help l-diversity / t-closeness where the median half lacks diversity.
                order = candidates[np.argsort(np.abs(2 * left[candidates] - m_rows), kind="stable")]
                for i in order[: 3 if check_sensitive else 1]:
                    mask = col <= base + int(i)
                    if model.class_fails(halves(idx, mask), context).any():
                        continue
                    split = (idx[mask], idx[~mask])
                    break
                if split is not None:
                    break
        if split is not None:
            partitions += 1
            if budget is not None:
                stack.extend(split)
            else:
                stack.append(split[1])
                stack.append(split[0])
            continue
        finals.append(idx)
        final_lo.append(lo)
        final_hi.append(hi)
        done_rows += m_rows
        if progress is not None and len(finals) % 512 == 0:
            progress(done_rows / n, "Mondrian partitioning")

    return _build_result(
        released, config, qis, context, finals, final_lo, final_hi, evaluated, start, progress
    )


# --------------------------------------------------------------------------- the result


def _build_result(
    released: pd.DataFrame,
    config: AnonymizationConfig,
    qis: list[_QI],
    context: DataContext,
    finals: list[IntArray],
    final_lo: list[IntArray],
    final_hi: list[IntArray],
    evaluated: int,
    start: float,
    progress: ProgressCallback | None,
) -> AnonymizationResult:
    model = config.model
    n = len(released)
    n_parts = len(finals)
    row_part = np.empty(n, dtype=np.int64)
    for p, idx in enumerate(finals):
        row_part[idx] = p
    part_lo = np.vstack(final_lo)
    part_hi = np.vstack(final_hi)

    population_size = context.population_size
    sizes_before = class_sizes_of(released, list(config.quasi_identifiers))
    risk_before = risk_summary(sizes_before, population_size=population_size)

    label_codes = np.zeros((n_parts, len(qis)), dtype=np.int64)
    part_labels: list[ObjectArray] = []
    loss_per_attribute: dict[str, float] = {}
    mean_shares: list[float] = []
    min_shares: list[float] = []
    precision_cells = 0.0
    entropy: list[float] = []
    entropy_max: list[float] = []
    for j, q in enumerate(qis):
        lo, hi = part_lo[:, j], part_hi[:, j]
        if q.numeric:
            assert q.values is not None
            labels = np.array(
                [
                    q.labels[a] if a == b else f"[{q.labels[a]}-{q.labels[b]}]"
                    for a, b in zip(lo.tolist(), hi.tolist(), strict=True)
                ],
                dtype=object,
            )
            span = q.values[-1] - q.values[0]
            cell_loss = (q.values[hi] - q.values[lo]) / span if span > 0 else np.zeros(n_parts)
            cell_precision = cell_loss
            cell_share, low_share = cell_loss, 0.0  # no hierarchy domain: the range's share
        else:
            assert q.nodes is not None
            level = np.argmax(q.nodes[:, lo] == q.nodes[:, hi], axis=0)
            node = q.nodes[level, lo]
            pairs = list(zip(level.tolist(), node.tolist(), strict=True))
            labels = np.array([q.node_labels[lv][nd] for lv, nd in pairs], dtype=object)
            leaves = np.array([q.node_leaves[lv][nd] for lv, nd in pairs], dtype=float)
            size = q.hierarchy_size
            cell_loss = (leaves - 1) / (size - 1) if size > 1 else np.zeros(n_parts)
            cell_precision = np.minimum(level / q.top, 1.0)
            cell_share, low_share = leaves / max(size, 1), 1.0 / max(size, 1)
        part_labels.append(labels)
        codes, _ = pd.factorize(labels)
        label_codes[:, j] = codes
        loss_per_attribute[q.name] = block_mean(cell_loss[row_part])
        precision_cells += block_sum(cell_precision[row_part])
        mean_shares.append(block_mean(cell_share[row_part]))
        min_shares.append(low_share)
        entropy.append(metrics.non_uniform_entropy(q.codes, codes[row_part]))
        frequency = np.bincount(q.codes).astype(float)
        frequency = frequency[frequency > 0]
        entropy_max.append(-block_sum(frequency * np.log2(frequency / n)))

    # Partitions with identical released values form one equivalence class of the extract.
    _, part_class = np.unique(label_codes, axis=0, return_inverse=True)
    part_class = part_class.ravel()
    row_class = part_class[row_part]
    n_classes = int(part_class.max()) + 1
    sizes = np.bincount(row_class, minlength=n_classes)
    first_part = np.full(n_classes, -1, dtype=np.int64)
    first_part[part_class[::-1]] = np.arange(n_parts)[::-1]

    data_out = released.copy()
    for j, q in enumerate(qis):
        # Object strings as before: pandas 3 would copy an array of them into its str dtype.
        data_out[q.name] = pd.Series(part_labels[j][row_part], index=data_out.index, dtype=object)
    classes = pd.DataFrame(
        {q.name: part_labels[j][first_part] for j, q in enumerate(qis)}, dtype=object
    )
    extract_classes = Classes(
        sizes,
        {
            name: SensitiveCounts.from_codes(row_class, codes, n_classes, len(context.labels[name]))
            for name, codes in context.codes.items()
        },
    )
    for name, values in model.class_columns(extract_classes, context).items():
        classes[name] = values
    achieved_l, achieved_t = model.legacy_achieved(extract_classes, context)
    # Cross-check with the models' per-class tests: partitions merged by identical released
    # values could in principle fail (not seen in practice); name the models they fail.
    classes["fails"] = model.failing_models(extract_classes, context)
    classes["borderline"] = model.borderline_models(extract_classes, context)
    for criterion in model.dataset_criteria:
        if not criterion.fulfilled(sizes, context):
            raise EngineError(f"The Mondrian release does not satisfy {criterion.describe()}.")
    # Same order as the optimal search's table: smallest classes first.
    classes = classes.sort_values(["size", *[q.name for q in qis]], kind="stable").reset_index(
        drop=True
    )

    per_attribute = np.array(list(loss_per_attribute.values()))
    weights = (
        metrics.loss_weights(
            [float(config.weights.get(q.name, metrics.DEFAULT_WEIGHT)) for q in qis]
        )
        if config.weights
        else None
    )
    metric_values: dict[str, Any] = {
        "loss": metrics.loss(per_attribute, weights),
        "granularity": metrics.granularity(mean_shares, min_shares),
        "precision": precision_cells / (n * len(qis)),
        "discernibility": int(metrics.discernibility(sizes, 0, n)),
        "average_class_size": float(metrics.average_class_size(n, n_classes)),
        "non_uniform_entropy": metrics.normalised_entropy(entropy, entropy_max),
        "non_uniform_entropy_bits": float(sum(entropy)),
        "loss_per_attribute": loss_per_attribute,
    }
    if progress is not None:
        progress(1.0, "Mondrian done")
    heights = {q: int(getattr(h, "height", 0) or 0) for q, h in config.quasi_identifiers.items()}
    return AnonymizationResult(
        data=data_out,
        algorithm="mondrian",
        levels=None,
        heights=heights,
        rows_in=n,
        rows_out=n,
        suppressed=0,
        classes=classes,
        achieved_k=int(sizes.min()),
        achieved_l=achieved_l,
        achieved_t=achieved_t,
        metrics=metric_values,
        risk_before=risk_before,
        risk_after=risk_summary(sizes, population_size=population_size),
        transformations_checked=evaluated,
        seconds=time.perf_counter() - start,
        source_rows=np.arange(n),  # Mondrian keeps every row, in input order
        model=model,
        models=model.achieved(extract_classes, context),
        warnings=[
            w
            for h in [*config.quasi_identifiers.values(), *config.sensitive_hierarchies.values()]
            for w in getattr(h, "warnings", ())
        ],
        class_sizes_before=sizes_before,
        utility=config.utility(),
    )


__all__ = ["anonymize_mondrian"]
