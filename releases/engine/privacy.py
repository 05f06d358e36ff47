"""Per-equivalence-class privacy checks, vectorised over classes.

The optimal search, Mondrian and the result summary all describe a candidate release the same
way: every row (or every distinct quasi-identifier combination, with a weight) belongs to an
equivalence class numbered ``0..n_classes-1``, and each sensitive attribute is integer-coded
``0..n_values-1``. :class:`SensitiveCounts` holds the per-class counts of one sensitive
attribute sparsely (one cell per class and value present), and the functions below compute,
for all classes at once:

* :func:`distinct_l`   - number of distinct sensitive values in the class;
* :func:`entropy_l`    - ``exp(H)`` with ``H = -sum_s p(s) log p(s)``; a class is entropy
  l-diverse when ``H >= log(l)``, i.e. ``entropy_l >= l``;
* :func:`recursive_cl` - recursive (c,l)-diversity: with counts sorted descending
  ``r_1 >= r_2 >= ... >= r_m`` the class passes when ``r_1 < c * (r_l + ... + r_m)``;
* :func:`t_distance`   - Earth Mover's Distance between the class's distribution P and the
  whole table's distribution Q (Li et al. 2007): equal distance ``1/2 sum |p_i - q_i|``,
  ordered distance ``1/(m-1) sum_i |sum_{j<=i} (p_j - q_j)|`` and hierarchical distance.

The per-value models (δ-disclosure, β-likeness) also use :func:`cell_shares` (each value's
share of its class), :func:`class_max` (a per-value measure's largest per class) and
:func:`smallest_size` (a bound on the size of a class that can pass).

The privacy models (:mod:`.criteria`) combine these measures into per-class decisions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .arrays import BoolArray, FloatArray, IntArray, ObjectArray
from .errors import EngineError
from .hierarchy import Hierarchy
from .summation import block_sum_rows

__all__ = [
    "SensitiveCounts",
    "TContext",
    "class_sizes",
    "distinct_l",
    "entropy_l",
    "recursive_cl",
    "recursive_l_value",
    "t_distance",
    "min_class_size_for_t",
    "encode_sensitive",
    "class_max",
    "cell_shares",
    "smallest_size",
]

# Tolerance for floating-point comparisons against l and t.
_EPS = 1e-9


def class_sizes(
    group: IntArray, n_groups: int, weights: IntArray | FloatArray | None = None
) -> IntArray:
    """Rows per class: ``bincount(group, weights)`` as int64."""
    sizes = np.bincount(group, weights=weights, minlength=n_groups)
    return np.rint(sizes).astype(np.int64) if weights is not None else sizes.astype(np.int64)


@dataclass
class SensitiveCounts:
    """Sparse per-class counts of one sensitive attribute.

    Cell ``j`` says that class ``group[j]`` holds ``count[j]`` rows with value ``value[j]``.
    Cells are sorted by class then value, one per (class, value) pair present.
    """

    group: IntArray
    value: IntArray
    count: IntArray
    n_groups: int
    n_values: int

    @classmethod
    def from_codes(
        cls,
        group: IntArray,
        value: IntArray,
        n_groups: int | None = None,
        n_values: int | None = None,
        weights: IntArray | None = None,
    ) -> SensitiveCounts:
        """Count (class, sensitive value) pairs; ``weights`` are row counts (default 1 each)."""
        group = np.asarray(group, dtype=np.int64)
        value = np.asarray(value, dtype=np.int64)
        if n_groups is None:
            n_groups = int(group.max()) + 1 if len(group) else 0
        if n_values is None:
            n_values = int(value.max()) + 1 if len(value) else 0
        w = np.ones(len(group), dtype=np.int64) if weights is None else np.asarray(weights)
        return cls._aggregate(group, value, w.astype(np.int64), n_groups, n_values)

    @staticmethod
    def _aggregate(
        group: IntArray, value: IntArray, count: IntArray, n_groups: int, n_values: int
    ) -> SensitiveCounts:
        nv = max(n_values, 1)
        key = group * nv + value
        space = n_groups * nv
        if space <= 8 * len(key) + (1 << 16):
            # Dense counting beats sorting when the (class, value) space is small.
            summed = np.bincount(key, weights=count, minlength=space)
            uniq = np.flatnonzero(summed)
            summed = summed[uniq]
        else:
            uniq, inverse = np.unique(key, return_inverse=True)
            summed = np.bincount(inverse, weights=count, minlength=len(uniq))
            keep = summed > 0
            uniq, summed = uniq[keep], summed[keep]
        return SensitiveCounts(
            group=uniq // nv,
            value=uniq % nv,
            count=np.rint(summed).astype(np.int64),
            n_groups=n_groups,
            n_values=n_values,
        )

    def regroup(self, mapping: IntArray, n_groups: int) -> SensitiveCounts:
        """Merge classes: old class ``g`` becomes ``mapping[g]`` (a roll-up to a coarser node)."""
        return self._aggregate(mapping[self.group], self.value, self.count, n_groups, self.n_values)

    def subset(self, keep: BoolArray) -> SensitiveCounts:
        """Only the classes where ``keep`` is True, renumbered in order."""
        new_index = np.cumsum(keep) - 1
        cells = keep[self.group]
        return SensitiveCounts(
            new_index[self.group[cells]],
            self.value[cells],
            self.count[cells],
            int(keep.sum()),
            self.n_values,
        )

    def sizes(self) -> IntArray:
        return np.bincount(self.group, weights=self.count, minlength=self.n_groups).astype(np.int64)

    @property
    def nbytes(self) -> int:
        return self.group.nbytes + self.value.nbytes + self.count.nbytes


def distinct_l(sc: SensitiveCounts) -> FloatArray:
    """Distinct l per class: the number of distinct sensitive values it holds."""
    return np.bincount(sc.group, minlength=sc.n_groups).astype(np.float64)


def entropy_l(sc: SensitiveCounts) -> FloatArray:
    """Entropy l per class: ``exp(H)``, ``H = -sum_s p(s) ln p(s)`` (1 for a single value).

    A class satisfies entropy l-diversity when ``H >= ln(l)``, i.e. when this value ``>= l``.
    """
    sizes = np.bincount(sc.group, weights=sc.count, minlength=sc.n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = sc.count / sizes[sc.group]
        h = -np.bincount(sc.group, weights=p * np.log(p), minlength=sc.n_groups)
    out = np.exp(h)
    out[sizes == 0] = 0.0
    return out


def recursive_cl(sc: SensitiveCounts, c: float, l: int) -> BoolArray:  # noqa: E741
    """Recursive (c,l)-diversity per class (True = passes).

    With the class's counts sorted descending ``r_1 >= ... >= r_m``: ``r_1 < c * (r_l + ... + r_m)``
    (a class with fewer than l distinct values fails).
    """
    order = np.lexsort((-sc.count, sc.group))
    g = sc.group[order]
    cnt = sc.count[order]
    starts = np.searchsorted(g, np.arange(sc.n_groups), side="left")
    rank = np.arange(len(g)) - starts[g]
    r1 = np.zeros(sc.n_groups)
    r1[g[rank == 0]] = cnt[rank == 0]
    tail_cells = rank >= (int(l) - 1)
    tail = np.bincount(g[tail_cells], weights=cnt[tail_cells], minlength=sc.n_groups)
    return r1 < c * tail


def recursive_l_value(sc: SensitiveCounts, c: float) -> FloatArray:
    """Per class, the largest l for which it satisfies recursive (c,l)-diversity (0 if none):
    the largest j with ``r_1 < c * (r_j + ... + r_m)``, counts sorted descending."""
    order = np.lexsort((-sc.count, sc.group))
    g = sc.group[order]
    cnt = sc.count[order].astype(np.float64)
    starts = np.searchsorted(g, np.arange(sc.n_groups), side="left")
    rank = np.arange(len(g)) - starts[g]
    totals = np.bincount(g, weights=cnt, minlength=sc.n_groups)
    running = np.cumsum(cnt)
    before_group = np.concatenate([[0.0], running])[starts]
    tail = totals[g] - (running - cnt - before_group[g])  # r_j + ... + r_m at rank j-1
    r1 = np.zeros(sc.n_groups)
    r1[g[rank == 0]] = cnt[rank == 0]
    ok = r1[g] < c * tail
    out = np.zeros(sc.n_groups)
    np.maximum.at(out, g[ok], rank[ok] + 1.0)
    return out


@dataclass
class TContext:
    """What t-closeness needs about one sensitive attribute, fixed for the whole table.

    ``q``: the distribution of the attribute over all input rows (indexed by code).
    ``rank``: position of each code in the attribute's order (ordered distance).
    ``parents``: for hierarchical distance, ``parents[j][code]`` is the code's ancestor at
    hierarchy level ``j`` (``j = 1..H``, ``H`` = height - 1), ancestors numbered per level.
    """

    distance: str
    q: FloatArray
    rank: IntArray | None = None
    parents: list[IntArray] | None = None

    @classmethod
    def build(
        cls,
        codes: IntArray | None,
        distance: str,
        labels: Sequence[str] | None = None,
        hierarchy: Hierarchy | None = None,
        n_values: int | None = None,
        frequencies: IntArray | None = None,
    ) -> TContext:
        """From the sensitive codes of every input row (and the code -> label list), or from
        ``frequencies``, the rows holding each code (then ``codes`` is None)."""
        if frequencies is None:
            codes = np.asarray(codes, dtype=np.int64)
            n_values = (
                n_values if n_values is not None else (int(codes.max()) + 1 if len(codes) else 0)
            )
            frequencies = np.bincount(codes, minlength=n_values)
        q = frequencies / max(int(frequencies.sum()), 1)
        if distance == "equal":
            return cls("equal", q)
        if labels is None:
            raise EngineError("Ordered and hierarchical t-closeness need the value labels.")
        if distance == "ordered":
            return cls("ordered", q, rank=value_order(labels))
        if distance == "hierarchical":
            if hierarchy is None:
                raise EngineError(
                    "Hierarchical-distance t-closeness needs a hierarchy of the sensitive "
                    "attribute."
                )
            level_codes, _ = hierarchy.encode(list(labels))
            return cls("hierarchical", q, parents=level_codes[1:])
        raise EngineError(f"Unknown t-closeness distance {distance!r}.")


def min_class_size_for_t(ctx: TContext, t: float) -> int:
    """The smallest class size that can be t-close (a bound used for pruning).

    A class of s rows holds at most s distinct values, so its total-variation distance to Q is
    at least ``1 - (sum of the s largest q)``, and every EMD is at least the smallest ground
    distance ``g`` times that: ``g = 1`` (equal), ``1/(m-1)`` (ordered), ``1/H``
    (hierarchical). Classes smaller than the returned size fail t-closeness for sure.
    """
    q = np.sort(ctx.q)[::-1]
    m = len(q)
    if m <= 1:
        return 1
    if ctx.distance == "equal":
        g = 1.0
    elif ctx.distance == "ordered":
        g = 1.0 / (m - 1)
    else:
        g = 1.0 / max(len(ctx.parents or []), 1)
    lower = g * (1.0 - np.cumsum(q))  # lower[s-1]: bound for a class of s rows
    ok = np.flatnonzero(lower <= t + _EPS)
    return int(ok[0]) + 1 if len(ok) else m


def value_order(labels: Sequence[str]) -> IntArray:
    """Rank of each label: numerically when all labels are numbers, else lexicographically."""
    try:
        numbers = [float(v) for v in labels]
    except ValueError:
        order = sorted(range(len(labels)), key=lambda i: labels[i])
    else:
        order = sorted(range(len(labels)), key=lambda i: numbers[i])
    rank = np.empty(len(labels), dtype=np.int64)
    rank[order] = np.arange(len(labels))
    return rank


def _dense_chunks(
    sc: SensitiveCounts, max_cells: int = 1 << 22
) -> Iterator[tuple[int, FloatArray]]:
    """Yield ``(first_class, P)``: dense class x value distributions, a block of classes at a
    time (bounded memory)."""
    sizes = np.bincount(sc.group, weights=sc.count, minlength=sc.n_groups)
    step = max(1, max_cells // max(sc.n_values, 1))
    bounds = np.searchsorted(sc.group, np.arange(0, sc.n_groups + step, step))
    for b, start in enumerate(range(0, sc.n_groups, step)):
        stop = min(start + step, sc.n_groups)
        lo, hi = bounds[b], bounds[b + 1]
        p = np.zeros((stop - start, sc.n_values))
        g = sc.group[lo:hi]
        with np.errstate(divide="ignore", invalid="ignore"):
            p[g - start, sc.value[lo:hi]] = sc.count[lo:hi] / sizes[g]
        yield start, p


def t_distance(sc: SensitiveCounts, ctx: TContext) -> FloatArray:
    """Earth Mover's Distance between each class's distribution P and the table's Q.

    * equal:        ``D = 1/2 sum_i |p_i - q_i|``
    * ordered:      ``D = 1/(m-1) sum_{i=1..m} |sum_{j<=i} (p_j - q_j)|`` (values in order)
    * hierarchical: with ``extra(N) = sum_{leaves under N} (p - q)`` and, over N's children,
      ``pos(N) = sum max(extra, 0)``, ``neg(N) = sum max(-extra, 0)``:
      ``D = sum_N level(N)/H * min(pos(N), neg(N))`` over inner nodes N, H = hierarchy height - 1.
    """
    q = ctx.q
    if ctx.distance == "equal":
        sizes = np.bincount(sc.group, weights=sc.count, minlength=sc.n_groups)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = sc.count / sizes[sc.group]
        qv = q[sc.value]
        # Values absent from a class contribute q_i each: sum_absent q = 1 - sum_present q.
        part = np.bincount(sc.group, weights=np.abs(p - qv) - qv, minlength=sc.n_groups)
        return np.clip(0.5 * (part + 1.0), 0.0, 1.0)
    out = np.empty(sc.n_groups)
    if ctx.distance == "ordered":
        m = len(q)
        if m <= 1:
            return np.zeros(sc.n_groups)
        if ctx.rank is None:  # TContext.build gives every ordered context its ranks
            raise EngineError("Ordered t-closeness needs the order of the values.")
        inv = np.argsort(ctx.rank)
        for start, p in _dense_chunks(sc):
            cum = np.cumsum(p[:, inv] - q[inv], axis=1)
            out[start : start + len(p)] = block_sum_rows(np.abs(cum)) / (m - 1)
        return out
    if ctx.distance == "hierarchical":
        parents = ctx.parents or []
        height = len(parents)
        if height == 0:
            return np.zeros(sc.n_groups)
        for start, p in _dense_chunks(sc):
            extra = p - q
            child_of = np.arange(len(q))  # code at the level below, per leaf
            total = np.zeros(len(p))
            for j, parent in enumerate(parents, start=1):
                n_children = int(child_of.max()) + 1
                n_parents = int(parent.max()) + 1
                # Parent of each child node (children and parents numbered per level).
                child_parent = np.zeros(n_children, dtype=np.int64)
                child_parent[child_of] = parent
                member = np.zeros((n_children, n_parents))
                member[np.arange(n_children), child_parent] = 1.0
                pos = np.maximum(extra, 0.0) @ member
                neg = np.maximum(-extra, 0.0) @ member
                total += (j / height) * block_sum_rows(np.minimum(pos, neg))
                extra = extra @ member
                child_of = parent
            out[start : start + len(p)] = total
        return out
    raise EngineError(f"Unknown t-closeness distance {ctx.distance!r}.")


def encode_sensitive(values: ObjectArray) -> tuple[IntArray, list[str]]:
    """Integer codes of a column of strings and the code -> label list."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), sort=False)
    return codes.astype(np.int64), [str(u) for u in uniques]


def cell_shares(sc: SensitiveCounts) -> FloatArray:
    """Each cell's share of its class."""
    sizes = np.bincount(sc.group, weights=sc.count, minlength=sc.n_groups)
    return sc.count / sizes[sc.group]


def class_max(values: FloatArray, sc: SensitiveCounts, empty: float = 0.0) -> FloatArray:
    """Per class, the largest of ``values`` (one per cell of ``sc``, cells sorted by class)."""
    out = np.full(sc.n_groups, empty, dtype=np.float64)
    if len(values) == 0:
        return out
    starts = np.flatnonzero(np.concatenate(([True], sc.group[1:] != sc.group[:-1])))
    out[sc.group[starts]] = np.maximum.reduceat(values, starts)
    return out


def smallest_size(capacity: FloatArray, need: float) -> int:
    """The smallest s such that the s largest ``capacity`` values sum to at least ``need``
    (a class of s rows holds at most s values); ``len + 1`` when none."""
    total = np.cumsum(np.sort(capacity)[::-1])
    ok = np.flatnonzero(total >= need - _EPS)
    return int(ok[0]) + 1 if len(ok) else len(capacity) + 1
