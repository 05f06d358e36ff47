"""Optimal global full-domain generalization: a search over the lattice of per-attribute levels.

A transformation (lattice node) assigns every quasi-identifier a hierarchy level. It is *valid*
when the rows in equivalence classes failing the privacy model number at most
``floor(suppression_limit * n)`` (those rows are suppressed), as in ARX. Among the valid
transformations we return the one with the lowest ARX Loss (see ``metrics.py``); ties go to the
lowest sum of levels, then the lexicographically smallest levels.

How the search stays fast:

* The data are encoded once into a frequency table of distinct quasi-identifier combinations
  (integer codes, with per-combination counts of every sensitive value). A node's classes are
  obtained by *rolling up* the table of an already evaluated finer node (one level lower on one
  attribute): map one code column one level up and regroup, never touching the rows.
* Lower bound pruning (ARX's ``ILMultiDimensionalWithBound``): a node's Loss is at least the Loss
  it would have without suppression, which needs no grouping (it only depends on per-value
  frequencies). Nodes are visited in ascending order of that bound; once the bound exceeds the
  best Loss found, no remaining node can win and the search stops. The result is exact.
* Predictive tagging (ARX's Flash / optimal algorithm): for monotone models (every criterion
  monotone, see :meth:`.criteria.PrivacyModel.monotone`) an invalid node makes all its
  specializations invalid and a valid node all its generalizations valid. Before a node of
  unknown status is evaluated, a binary search runs on a path from it to the top (as Flash
  does), so the invalid nodes found tag whole down-sets. Models that are not monotone are
  pruned with the monotone per-class model they imply
  (:meth:`.criteria.PrivacyModel.pruning_model`: k raised to the smallest class that can pass,
  distinct ceil(l)-diversity).

The valid transformations evaluated are kept (their levels, Loss, highest risk and suppressed
rows; at most :data:`CANDIDATE_LIMIT` before thinning to the Pareto front), so that the result
can show the Pareto front of the candidates; once the optimum is known, up to :data:`EXPLORE`
more transformations around it (its generalizations, breadth first) are evaluated for that
front, within a quarter of the search's own work (:data:`EXPLORE_WORK`, counted in classes
rolled up, so the candidates do not depend on the machine's speed).

Lattices of more than :data:`MAX_NODES` nodes, or a search exceeding ``time_limit``, fall back
to a greedy bottom-up climb; its result is flagged ``heuristic=True``.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
import pandas as pd

from . import metrics
from .arrays import BoolArray, CodeArray, FloatArray, IntArray
from .criteria import Classes, DataContext, Evaluation, PrivacyModel
from .errors import EngineError
from .frequency import FIRST, ROWS, FrequencyTable
from .hierarchy import Hierarchy
from .microaggregation import AggregatedColumn
from .privacy import SensitiveCounts
from .types import SUPPRESSED_VALUE, ProgressCallback

__all__ = ["EncodedData", "Table", "SearchResult", "search", "pareto_front", "MAX_NODES"]

#: Lattices larger than this are searched greedily (result flagged heuristic).
MAX_NODES = 200_000
#: Valid transformations remembered before the list is thinned to its Pareto front.
CANDIDATE_LIMIT = 20_000
#: Transformations evaluated around the optimum for the candidates, within this share of the
#: search's own work.
EXPLORE = 48
EXPLORE_WORK = 0.25
#: Memory budget of cached frequency tables of evaluated nodes.
CACHE_BYTES = 256 * 1024 * 1024
_TIE = 1e-12


@dataclass
class Attribute:
    """One quasi-identifier, encoded: ``gen[level][v]`` is the code at ``level`` of the data's
    ``v``-th distinct value, ``labels[level][code]`` its text, ``shares[level][code]`` its
    domain share."""

    name: str
    hierarchy: Hierarchy
    gen: list[CodeArray]
    labels: list[list[str]]
    shares: list[FloatArray]
    frequency: IntArray  # rows per level-0 code
    _steps: dict[tuple[int, int], CodeArray] = field(default_factory=dict)
    _share_totals: dict[int, float] = field(default_factory=dict)

    @property
    def height(self) -> int:
        return len(self.gen)

    @property
    def domain_size(self) -> int:
        return self.hierarchy.domain_size

    def share_total(self, level: int) -> float:
        """Sum of domain shares over all rows at ``level``: ``sum_v freq(v) * share(gen(v))``."""
        totals = self._share_totals
        if level not in totals:
            totals[level] = float(self.frequency @ self.shares[level][self.gen[level]])
        return totals[level]

    def cardinality(self, level: int) -> int:
        return len(self.labels[level])

    def released_level(self, level: int) -> IntArray:
        """Per data value, the level ARX reads off its label at ``level`` (see
        :attr:`Hierarchy.label_levels`; usually ``level`` itself)."""
        first = self.hierarchy.label_levels
        return np.array([first[lab] for lab in self.labels[level]], dtype=np.int64)[self.gen[level]]

    def step(self, src: int, dst: int) -> CodeArray:
        """Lookup array: code at level ``src`` -> code at level ``dst`` (src <= dst)."""
        key = (src, dst)
        arr = self._steps.get(key)
        if arr is None:
            arr = np.zeros(self.cardinality(src), dtype=np.int32)
            arr[self.gen[src]] = self.gen[dst]  # consistent: hierarchies are functional
            self._steps[key] = arr
        return arr


@dataclass
class Table:
    """Frequency table of one transformation: one row per equivalence class."""

    levels: tuple[int, ...]
    codes: CodeArray  # (classes, quasi-identifiers) codes at ``levels``
    counts: IntArray  # rows per class (in the research subset, when there is one)
    sensitive: dict[str, SensitiveCounts]
    first: IntArray | None = None  # first input row of each class (when tracked)
    population: IntArray | None = None  # rows per class in the population (research subset)
    #: Per earlier release, its classes counted within each class (the joint classes; in the
    #: research subset, when there is one).
    linked: dict[str, SensitiveCounts] = field(default_factory=dict)
    #: Per microaggregated column, its values counted within each class.
    aggregated: dict[str, SensitiveCounts] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        extra = 0 if self.first is None else self.first.nbytes
        extra += 0 if self.population is None else self.population.nbytes
        return (
            self.codes.nbytes
            + self.counts.nbytes
            + extra
            + sum(s.nbytes for s in self.sensitive.values())
            + sum(s.nbytes for s in self.linked.values())
            + sum(s.nbytes for s in self.aggregated.values())
        )

    def classes(self) -> Classes:
        return Classes(self.counts, self.sensitive, self.linked, self.population)


def _sorted_unique(key: IntArray) -> tuple[IntArray, IntArray]:
    """``np.unique(key, return_inverse=True)`` by hashing, then sorting the distinct keys only:
    on millions of rows it needs a fraction of the sort's memory and time."""
    codes, uniques = pd.factorize(key, sort=False)
    order = np.argsort(uniques, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return uniques[order], rank[codes]


def _group(cols: list[CodeArray], cards: list[int]) -> tuple[IntArray, int, CodeArray | None]:
    """Number the distinct combinations of code columns.

    Returns ``(inverse, n_groups, codes)``: ``codes`` is the (groups x columns) code matrix when
    it could be decoded from the keys (else None). Columns are combined into one int64 key
    (mixed radix); when the key space is small a dense bincount replaces sorting; when it would
    overflow, the partial key is compacted first.
    """
    m = len(cols[0]) if cols else 0
    if m == 0:
        return np.zeros(0, dtype=np.int64), 0, np.zeros((0, len(cols)), dtype=np.int32)
    key = np.zeros(m, dtype=np.int64)
    space = 1
    compacted = False
    for col, card in zip(cols, cards, strict=True):
        card = max(int(card), 1)
        if space * card >= (1 << 62):
            uniq, key = _sorted_unique(key)
            space = len(uniq)
            compacted = True
        key = key * card + col
        space *= card
    if space <= max(4 * m, 1 << 16):
        present = np.bincount(key, minlength=space) > 0
        position = np.cumsum(present) - 1
        inverse, uniq = position[key], np.flatnonzero(present)
    else:
        uniq, inverse = _sorted_unique(key)
    if compacted:
        return inverse, len(uniq), None
    codes = np.empty((len(uniq), len(cols)), dtype=np.int32)
    rest = uniq
    for i in range(len(cols) - 1, -1, -1):
        card = max(int(cards[i]), 1)
        codes[:, i] = rest % card
        rest = rest // card
    return inverse, len(uniq), codes


def _encode_attribute(
    name: str,
    hierarchy: Hierarchy,
    column: pd.Series,
    counted: BoolArray | None = None,
    weights: IntArray | None = None,
) -> tuple[Attribute, CodeArray]:
    """A quasi-identifier's values numbered in order of first appearance in ``column``, checked
    against and encoded with its hierarchy, and each entry's code (int32: 12 million rows of 8
    attributes are 384 MB, not 768 MB). Each value's frequency counts the entries (only those
    ``counted``, when given), each standing for ``weights`` rows when given (a frequency
    table's combinations)."""
    codes, uniques = pd.factorize(column, sort=False)
    values = [str(u) for u in uniques]
    named = hierarchy if hierarchy.attribute else hierarchy.with_attribute(name)
    named.validate_against(values)
    gen, labels = hierarchy.encode(values)
    shares = []
    for level in range(hierarchy.height):
        by_label = hierarchy.domain_shares(level)
        shares.append(np.array([by_label[lab] for lab in labels[level]]))
    frequency = np.bincount(
        codes if counted is None else codes[counted], weights=weights, minlength=len(values)
    )
    if weights is not None:
        frequency = np.rint(frequency)
    attribute = Attribute(
        name,
        hierarchy,
        [g.astype(np.int32) for g in gen],
        labels,
        shares,
        frequency.astype(np.int64),
    )
    return attribute, codes.astype(np.int32)


def _linked_counts(
    name: str, membership: IntArray, row_class: IntArray, m: int, in_subset: BoolArray | None
) -> SensitiveCounts:
    """The classes of an earlier release (``membership``: each input row's class there, -1 for
    a row not in it) counted per level-0 class; "not in it" is the last value. With a research
    subset (``in_subset``), only the subset's rows are counted: only they are released."""
    n = len(row_class)
    if membership.shape != (n,):
        raise EngineError(
            f"The earlier release {name!r} gives a class for {len(membership):,} rows; the "
            f"data has {n:,}."
        )
    codes = membership.astype(np.int64, copy=False)
    absent = int(codes.max()) + 1 if n else 0
    if n and int(codes.min()) < -1:
        raise EngineError(f"The earlier release {name!r} has a class number below -1.")
    values = np.where(codes < 0, absent, codes)
    if in_subset is not None:
        row_class, values = row_class[in_subset], values[in_subset]
    return SensitiveCounts.from_codes(row_class, values, n_groups=m, n_values=absent + 1)


@dataclass
class EncodedData:
    """The input, encoded once for the search: attributes, the level-0 frequency table and the
    row -> level-0 class mapping (to build the extract at the end).

    With a research subset the input is the population table: ``n`` counts the subset's rows,
    the tables count each class's rows in the subset (``counts``, what the frequencies and the
    Loss are computed on) and in the population (``population``), and ``population_rows`` is
    the population table's size."""

    attributes: list[Attribute]
    n: int
    base: Table
    #: Each input row's level-0 class; None when encoded from a frequency table (the rows are
    #: not kept: :meth:`from_frequencies`).
    row_class: IntArray | None
    sensitive_codes: dict[str, IntArray]
    sensitive_labels: dict[str, list[str]]
    population_rows: int | None = None
    #: The attribute weights of the Loss (:func:`.metrics.loss_weights`), the
    #: microaggregated columns' last; None: all 1.
    weights: FloatArray | None = None
    #: The microaggregated columns (:mod:`.microaggregation`), in the Loss after the others.
    aggregated: list[AggregatedColumn] = field(default_factory=list)
    #: Encoded from a frequency table: per sensitive attribute, the rows holding each code
    #: (``sensitive_codes`` is then empty).
    sensitive_frequencies: dict[str, IntArray] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        data: pd.DataFrame,
        hierarchies: dict[str, Hierarchy],
        sensitive: Sequence[str] = (),
        sensitive_hierarchies: dict[str, Hierarchy] | None = None,
        track_first: bool = False,
        subset: BoolArray | None = None,
        linked: Mapping[str, IntArray] | None = None,
        aggregated: Sequence[AggregatedColumn] = (),
    ) -> EncodedData:
        """Encode ``data``; ``track_first``: remember each class's first input row (ARX orders
        classes of equal size by it when a dataset criterion suppresses some); ``subset``: the
        rows of ``data`` (then the population table) that form the research subset;
        ``linked``: per earlier release, each input row's class in it (-1: not in it), counted
        per class (only the subset's rows, with a subset) so that the joint classes roll up
        with the table."""
        rows = len(data)
        in_subset = None if subset is None else np.asarray(subset, dtype=bool)
        n = rows if in_subset is None else int(in_subset.sum())
        attributes: list[Attribute] = []
        row_codes: list[CodeArray] = []
        for name, hierarchy in hierarchies.items():
            attribute, encoded = _encode_attribute(name, hierarchy, data[name], in_subset)
            attributes.append(attribute)
            row_codes.append(encoded)
        cards = [a.cardinality(0) for a in attributes]
        row_class, m, base_codes = _group(row_codes, cards)
        population = None
        counts = np.bincount(row_class, minlength=m).astype(np.int64)
        if in_subset is not None:
            population = counts
            counts = np.bincount(row_class[in_subset], minlength=m).astype(np.int64)
        # Sensitive values are counted (and their distribution taken) in the released rows.
        released_class = row_class if in_subset is None else row_class[in_subset]
        if base_codes is None:
            base_codes = np.empty((m, len(attributes)), dtype=np.int32)
            for i, column in enumerate(row_codes):
                base_codes[row_class, i] = column
        sens_counts: dict[str, SensitiveCounts] = {}
        sens_codes: dict[str, IntArray] = {}
        sens_labels: dict[str, list[str]] = {}
        for name in sensitive:
            codes, uniques = pd.factorize(data[name], sort=False)
            codes = codes.astype(np.int64)
            if in_subset is not None:
                codes = codes[in_subset]
            h = (sensitive_hierarchies or {}).get(name)
            if h is not None:
                (h if h.attribute else h.with_attribute(name)).validate_against(
                    [str(u) for u in uniques]
                )
            labels_s = [str(u) for u in uniques]
            sens_codes[name] = codes
            sens_labels[name] = labels_s
            sens_counts[name] = SensitiveCounts.from_codes(
                released_class, codes, n_groups=m, n_values=len(labels_s)
            )
        first = None
        if track_first:
            # The first (released) row of each class; a class without one comes last.
            positions = np.arange(rows) if in_subset is None else np.flatnonzero(in_subset)
            first = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
            classes, at = np.unique(released_class, return_index=True)
            first[classes] = positions[at]
        linked_counts = {
            name: _linked_counts(name, np.asarray(membership), row_class, m, in_subset)
            for name, membership in (linked or {}).items()
        }
        aggregated_counts = {
            column.name: SensitiveCounts.from_codes(
                released_class,
                column.codes if in_subset is None else column.codes[in_subset],
                n_groups=m,
                n_values=column.domain_size,
            )
            for column in aggregated
        }
        base = Table(
            tuple([0] * len(attributes)),
            base_codes,
            counts,
            sens_counts,
            first,
            population=population,
            linked=linked_counts,
            aggregated=aggregated_counts,
        )
        return cls(
            attributes,
            n,
            base,
            row_class.astype(np.int64),
            sens_codes,
            sens_labels,
            None if in_subset is None else rows,
            aggregated=list(aggregated),
        )

    @classmethod
    def from_frequencies(
        cls,
        table: FrequencyTable,
        hierarchies: dict[str, Hierarchy],
        sensitive: Sequence[str] = (),
        sensitive_hierarchies: dict[str, Hierarchy] | None = None,
        track_first: bool = False,
    ) -> EncodedData:
        """Encode the input from its frequency table (:mod:`.frequency`) instead of its rows:
        the same attributes, level-0 table, sensitive counts and first rows as :meth:`build`
        gives on the rows, so that the search gives the same result; ``row_class`` is None.

        Values are numbered in order of first appearance in the input, as :meth:`build` does:
        the table is ordered by each combination's first row, so a value's first combination
        in it is the one holding its first row."""
        frame = table.frame
        missing = [c for c in [*hierarchies, *sensitive] if c not in table.columns]
        if missing:
            raise EngineError(f"Column {missing[0]!r} is not in the frequency table.")
        weights = frame[ROWS].to_numpy(dtype=np.int64)
        firsts = frame[FIRST].to_numpy(dtype=np.int64)
        if len(firsts) > 1 and bool((np.diff(firsts) <= 0).any()):
            raise EngineError("The frequency table is not ordered by first row.")
        attributes: list[Attribute] = []
        combo_codes: list[CodeArray] = []
        for name, hierarchy in hierarchies.items():
            attribute, encoded = _encode_attribute(name, hierarchy, frame[name], weights=weights)
            attributes.append(attribute)
            combo_codes.append(encoded)
        if not attributes:
            raise EngineError("Choose at least one quasi-identifier.")
        cards = [a.cardinality(0) for a in attributes]
        combo_class, m, base_codes = _group(combo_codes, cards)
        if base_codes is None:
            base_codes = np.empty((m, len(attributes)), dtype=np.int32)
            for i, column in enumerate(combo_codes):
                base_codes[combo_class, i] = column
        counts = np.rint(np.bincount(combo_class, weights=weights, minlength=m)).astype(np.int64)
        sens_counts: dict[str, SensitiveCounts] = {}
        sens_labels: dict[str, list[str]] = {}
        sens_frequencies: dict[str, IntArray] = {}
        for name in sensitive:
            codes, uniques = pd.factorize(frame[name], sort=False)
            labels_s = [str(u) for u in uniques]
            h = (sensitive_hierarchies or {}).get(name)
            if h is not None:
                (h if h.attribute else h.with_attribute(name)).validate_against(labels_s)
            sens_labels[name] = labels_s
            sens_frequencies[name] = np.rint(
                np.bincount(codes, weights=weights, minlength=len(labels_s))
            ).astype(np.int64)
            sens_counts[name] = SensitiveCounts.from_codes(
                combo_class, codes, n_groups=m, n_values=len(labels_s), weights=weights
            )
        first = None
        if track_first:
            first = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(first, combo_class, firsts)
        base = Table(tuple([0] * len(attributes)), base_codes, counts, sens_counts, first)
        return cls(
            attributes,
            int(table.rows),
            base,
            None,
            {},
            sens_labels,
            sensitive_frequencies=sens_frequencies,
        )

    def data_context(
        self,
        sensitive_hierarchies: dict[str, Hierarchy] | None = None,
        population_size: int | None = None,
    ) -> DataContext:
        """What the privacy models need to know about the whole input."""
        return DataContext(
            self.n,
            self.sensitive_codes,
            self.sensitive_labels,
            sensitive_hierarchies,
            population_size,
            self.population_rows,
            self.sensitive_frequencies,
        )

    # ------------------------------------------------------------------------------ roll-up
    def rollup(
        self, table: Table, levels: Sequence[int], with_sensitive: bool = True
    ) -> tuple[Table, IntArray]:
        """The table of ``levels`` from a finer ``table``; also the old class -> new class map.
        ``with_sensitive=False`` skips the sensitive counts (for k-only checks)."""
        cols = []
        cards = []
        for i, (a, src, dst) in enumerate(zip(self.attributes, table.levels, levels, strict=True)):
            col = table.codes[:, i]
            if dst != src:
                if dst < src:
                    raise ValueError("can only roll up to a coarser transformation")
                col = a.step(src, dst)[col]
            cols.append(col)
            cards.append(a.cardinality(dst))
        codes = None
        if not cols:  # no quasi-identifier: one class
            inverse = np.zeros(len(table.counts), dtype=np.int64)
            g = 1 if len(table.counts) else 0
            codes = np.zeros((g, 0), dtype=np.int32)
        else:
            inverse, g, codes = _group(cols, cards)
        if codes is None:
            codes = np.empty((g, len(cols)), dtype=np.int32)
            for i, col in enumerate(cols):
                codes[inverse, i] = col
        counts = np.bincount(inverse, weights=table.counts, minlength=g).astype(np.int64)
        population = None
        if table.population is not None:
            population = np.bincount(inverse, weights=table.population, minlength=g)
            population = population.astype(np.int64)
        sensitive = (
            {k: s.regroup(inverse, g) for k, s in table.sensitive.items()} if with_sensitive else {}
        )
        first = None
        if table.first is not None:
            first = np.full(g, np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(first, inverse, table.first)
        # The joint classes with earlier releases roll up whatever the criteria: few tables
        # carry them (only searches that protect earlier releases).
        linked = {k: s.regroup(inverse, g) for k, s in table.linked.items()}
        aggregated = {k: s.regroup(inverse, g) for k, s in table.aggregated.items()}
        levels_out = tuple(int(v) for v in levels)
        rolled = Table(levels_out, codes, counts, sensitive, first, population, linked, aggregated)
        return rolled, inverse

    def tie_order(self, table: Table) -> Callable[[IntArray, int], IntArray]:
        """ARX's order of classes of equal size when a dataset criterion suppresses some:
        lower information loss first (the class's Loss aggregate, ``sum_i log(1 + size *
        share_i)``), then the earlier first row. Returns ``first(index, count)``: the
        ``count`` classes of ``index`` (all of one size) that come first."""

        def first(index: IntArray, count: int) -> IntArray:
            if count >= len(index):
                return index
            size = table.counts[index]
            loss = np.zeros(len(index))
            for i, a in enumerate(self.attributes):
                share = a.shares[table.levels[i]][table.codes[index, i]]
                loss += np.log1p(size * share * self.weight(i))
            # Everything below the count-th loss goes; the tie at that loss by first row.
            cut = np.partition(loss, count - 1)[count - 1] if count else -np.inf
            below = index[loss < cut]
            at = index[loss == cut]
            if table.first is not None:
                at = at[np.argsort(table.first[at], kind="stable")]
            return np.concatenate([below, at[: count - len(below)]])

        return first

    def fully_generalized(self, table: Table) -> BoolArray:
        """Classes whose every quasi-identifier is released as ``*`` (ARX leaves them out of
        the risk distribution without counting them as suppressed)."""
        out = np.ones(len(table.counts), dtype=bool)
        for i, a in enumerate(self.attributes):
            labels = a.labels[table.levels[i]]
            star = np.array([lab == SUPPRESSED_VALUE for lab in labels], dtype=bool)
            if not star.any():
                return np.zeros(len(table.counts), dtype=bool)
            out &= star[table.codes[:, i]]
        return out

    # ------------------------------------------------------------------------------ loss
    def share_sums(self, table: Table, fails: BoolArray) -> tuple[FloatArray, FloatArray]:
        """Per attribute, the sum of domain shares over kept rows and over suppressed rows.

        The sum over all rows depends only on the level (precomputed), so only the usually few
        suppressed classes are visited."""
        failing = np.flatnonzero(fails)
        sup_w = table.counts[failing].astype(np.float64)
        kept = np.empty(len(self.attributes))
        sup = np.empty(len(self.attributes))
        for i, a in enumerate(self.attributes):
            level = table.levels[i]
            sup[i] = sup_w @ a.shares[level][table.codes[failing, i]] if len(failing) else 0.0
            kept[i] = a.share_total(level) - sup[i]
        return kept, sup

    def loss_vector(self, table: Table, fails: BoolArray) -> FloatArray:
        kept, sup = self.share_sums(table, fails)
        suppressed = int(table.counts[fails].sum())
        out = metrics.loss_per_attribute(kept, sup, suppressed, self.n, self.domain_sizes)
        return np.concatenate((out, self.aggregated_loss(table, fails)))

    def aggregated_loss(self, table: Table, fails: BoolArray) -> FloatArray:
        """The Loss of each microaggregated column (ARX's ``MetricMDNMLoss``): per kept class,
        its rows times the share of the column's distinct values it holds, plus every
        suppressed row, over the rows."""
        suppressed = float(table.counts[fails].sum())
        out = np.empty(len(self.aggregated))
        for j, column in enumerate(self.aggregated):
            cells = table.aggregated[column.name]
            distinct = np.bincount(cells.group, minlength=len(table.counts))
            kept = ~fails
            held = float(table.counts[kept] @ distinct[kept]) / column.domain_size
            out[j] = max(0.0, (held + suppressed) / self.n) if self.n else 0.0
        return out

    @property
    def domain_sizes(self) -> FloatArray:
        return np.array([a.domain_size for a in self.attributes], dtype=np.float64)

    def weight(self, i: int) -> float:
        """Attribute i's weight in the Loss."""
        return 1.0 if self.weights is None else float(self.weights[i])

    def bound_matrix(self) -> list[FloatArray]:
        """``B[i][level]``: attribute i's weighted Loss at ``level`` without suppression (a
        lower bound)."""
        out = []
        for i, a in enumerate(self.attributes):
            sums = np.array([a.share_total(lv) for lv in range(a.height)], dtype=np.float64)
            bound = metrics.loss_per_attribute(
                sums, np.zeros_like(sums), 0, self.n, np.full(len(sums), a.domain_size)
            )
            out.append(bound * self.weight(i))
        return out


#: A valid transformation evaluated: (levels, Loss, highest risk, suppressed rows).
CandidateEntry: TypeAlias = tuple[tuple[int, ...], float, float, int]


@dataclass
class SearchResult:
    levels: tuple[int, ...]
    loss: float
    suppressed: int
    transformations_checked: int
    heuristic: bool
    #: Valid transformations evaluated.
    candidates: list[CandidateEntry] = field(default_factory=list)


def pareto_front(
    candidates: Sequence[CandidateEntry],
) -> list[CandidateEntry]:
    """The candidates no other candidate beats on Loss, highest risk and suppressed rows at
    once (at least as good on all three, better on one); lowest Loss first."""
    ordered = sorted(candidates, key=lambda c: (c[1], c[2], c[3], sum(c[0]), c[0]))
    front: list[CandidateEntry] = []
    for cand in ordered:
        _, loss, risk, sup = cand
        dominated = any(
            f[1] <= loss + _TIE * max(1.0, abs(loss))
            and f[2] <= risk
            and f[3] <= sup
            and (f[1] < loss - _TIE * max(1.0, abs(loss)) or f[2] < risk or f[3] < sup)
            for f in front
        )
        if not dominated:
            front.append(cand)
    return front


class _Searcher:
    def __init__(
        self,
        enc: EncodedData,
        model: PrivacyModel,
        lo: Sequence[int],
        hi: Sequence[int],
        time_limit: float | None,
        progress: ProgressCallback | None,
        data: DataContext,
    ) -> None:
        self.enc = enc
        self.model = model
        self.data = data
        self.lo = tuple(lo)
        self.hi = tuple(hi)
        self.limit_rows = int(np.floor(model.suppression_limit * enc.n + 1e-9))
        self.deadline = None if time_limit is None else time.perf_counter() + time_limit
        self.progress = progress
        self.cache: OrderedDict[tuple[int, ...], Table] = OrderedDict()
        self.cache_bytes = 0
        self.sub_cache: OrderedDict[tuple[int, ...], Table] = OrderedDict()
        self.sub_cache_bytes = 0
        self.with_sensitive = model.needs_sensitive
        self.dataset = bool(model.dataset_criteria)
        # A per-class model, monotone even with suppression, that the model implies.
        self.sub_model = model.pruning_model(data)
        self.checked = 0
        self.work = 0  # classes rolled up: a measure of the search's work, machine-independent
        self.start_table = enc.base
        self.candidates: list[CandidateEntry] = []

    def _source(self, node: tuple[int, ...]) -> Table:
        # The smallest cached table of a direct predecessor (one level lower on one attribute),
        # else of any cached transformation below this one.
        best: Table | None = None
        for i, v in enumerate(node):
            if v > self.lo[i]:
                pred = node[:i] + (v - 1,) + node[i + 1 :]
                t = self.cache.get(pred)
                if t is not None and (best is None or len(t.counts) < len(best.counts)):
                    best = t
        if best is None:
            for levels, t in self.cache.items():
                below = all(a <= b for a, b in zip(levels, node, strict=True))
                if below and (best is None or len(t.counts) < len(best.counts)):
                    best = t
        return best if best is not None else self.start_table

    def _remember(self, table: Table) -> None:
        self.cache[table.levels] = table
        self.cache_bytes += table.nbytes
        while self.cache_bytes > CACHE_BYTES and len(self.cache) > 1:
            _, old = self.cache.popitem(last=False)
            self.cache_bytes -= old.nbytes

    def judge(self, table: Table, limit_rows: int | None) -> Evaluation:
        """The model's evaluation of a transformation's table."""
        if not self.dataset:
            return self.model.evaluate(table.classes(), self.data, limit_rows)
        return self.model.evaluate(
            table.classes(),
            self.data,
            limit_rows,
            tie_order=self.enc.tie_order(table),
            excluded=self.enc.fully_generalized(table),
        )

    def evaluate(
        self, node: tuple[int, ...], hint: tuple[int, ...] | None = None
    ) -> tuple[bool, int, float]:
        """Returns (valid, suppressed rows, Loss) of a transformation. ``hint``: an evaluated
        node below this one whose table may be rolled up."""
        source = self._source(node)
        if hint is not None and source is self.start_table and hint in self.cache:
            source = self.cache[hint]
        table, _ = self.enc.rollup(source, node, with_sensitive=self.with_sensitive)
        self._remember(table)
        self.checked += 1
        self.work += len(source.counts)
        judged = self.judge(table, self.limit_rows)
        if not judged.valid:
            return False, judged.suppressed, np.inf
        loss = metrics.loss(self.enc.loss_vector(table, judged.fails), self.enc.weights)
        kept = table.counts[~judged.fails]
        kept = kept[kept > 0]  # a research subset's population has classes it does not release
        highest = 1.0 / float(kept.min()) if len(kept) else 0.0
        self.candidates.append((node, float(loss), highest, judged.suppressed))
        if len(self.candidates) > CANDIDATE_LIMIT:
            self.candidates = pareto_front(self.candidates)
        return True, judged.suppressed, loss

    def sub_valid(self, node: tuple[int, ...], hint: tuple[int, ...] | None = None) -> bool:
        """Whether ``node`` satisfies :attr:`sub_model` within the suppression limit.

        The sub-model is implied by the model and monotone even with suppression, so a node
        invalid for it is invalid."""
        source = self.sub_cache.get(hint) if hint is not None else None
        if source is None:
            for i, v in enumerate(node):
                if v > self.lo[i]:
                    pred = node[:i] + (v - 1,) + node[i + 1 :]
                    t = self.sub_cache.get(pred) or self.cache.get(pred)
                    if t is not None and (source is None or len(t.counts) < len(source.counts)):
                        source = t
        if source is None:
            source = self.start_table
        needs_sensitive = self.sub_model.needs_sensitive and self.with_sensitive
        table, _ = self.enc.rollup(source, node, with_sensitive=needs_sensitive)
        self.checked += 1
        self.work += len(source.counts)
        self.sub_cache[node] = table
        self.sub_cache_bytes += table.nbytes
        while self.sub_cache_bytes > CACHE_BYTES // 2 and len(self.sub_cache) > 1:
            _, old = self.sub_cache.popitem(last=False)
            self.sub_cache_bytes -= old.nbytes
        return self.sub_model.evaluate(table.classes(), self.data, self.limit_rows).valid

    def timed_out(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline

    def report(self, fraction: float, stage: str) -> None:
        if self.progress is not None:
            self.progress(float(min(max(fraction, 0.0), 1.0)), stage)

    def result(
        self, best: tuple[int, ...], loss: float, suppressed: int, heuristic: bool
    ) -> SearchResult:
        return SearchResult(best, loss, suppressed, self.checked, heuristic, self.candidates)


def _better(
    loss: float, node: tuple[int, ...], best_loss: float, best: tuple[int, ...] | None
) -> bool:
    if best is None:
        return True
    if loss < best_loss - _TIE * max(1.0, abs(best_loss)):
        return True
    if loss > best_loss + _TIE * max(1.0, abs(best_loss)):
        return False
    return (sum(node), node) < (sum(best), best)


def search(
    enc: EncodedData,
    model: PrivacyModel,
    min_levels: Sequence[int],
    max_levels: Sequence[int],
    time_limit: float | None = None,
    progress: ProgressCallback | None = None,
    data: DataContext | None = None,
    explore: int = EXPLORE,
) -> SearchResult:
    """Find the valid transformation with the lowest Loss between ``min_levels`` and
    ``max_levels`` (inclusive, per quasi-identifier). Raises :class:`EngineError` when none is
    valid. ``data``: what the privacy models know of the input (built from ``enc`` when
    omitted); ``explore``: transformations evaluated past the optimum for the candidates."""
    data = data if data is not None else enc.data_context()
    s = _Searcher(enc, model, min_levels, max_levels, time_limit, progress, data)
    lo = np.array(min_levels, dtype=np.int64)
    hi = np.array(max_levels, dtype=np.int64)
    d = len(lo)
    # Python integers: a lattice of 30 quasi-identifiers with 20 levels each has more nodes
    # than an int64 holds, and an overflowed count would let it past the bound below.
    n_nodes = math.prod(int(b - a + 1) for a, b in zip(lo, hi, strict=True))
    if d and lo.any():
        # Every node is at least min_levels: start rolling up from there.
        s.start_table, _ = enc.rollup(enc.base, tuple(int(v) for v in lo))
    if n_nodes > MAX_NODES:
        return _greedy(s, reason="lattice")

    grids = np.meshgrid(*[np.arange(a, b + 1) for a, b in zip(lo, hi, strict=True)], indexing="ij")
    nodes = np.stack([g.reshape(-1) for g in grids], axis=1) if d else np.zeros((1, 0), np.int64)
    bounds_by_attr = enc.bound_matrix()
    per_attr = (
        np.stack([bounds_by_attr[i][nodes[:, i]] for i in range(d)], axis=1)
        if d
        else np.zeros((1, 0))
    )
    if enc.aggregated:
        # Microaggregated columns have no bound (ARX's neither): 0, which underestimates.
        per_attr = np.hstack((per_attr, np.zeros((len(per_attr), len(enc.aggregated)))))
    # One Loss bound per node (geometric_mean of a table is an array).
    bound = (
        np.asarray(metrics.geometric_mean(per_attr, axis=1), dtype=np.float64)
        if per_attr.shape[1]
        else np.zeros(1)
    )
    keys = [nodes[:, i] for i in range(d - 1, -1, -1)] + [nodes.sum(axis=1), bound]
    order = np.lexsort(keys)

    monotone = model.monotone()
    dims = tuple(int(v) for v in hi - lo + 1)
    # 0 unknown, -1 invalid (evaluated or tagged), 1 valid by tagging, 2 evaluated and valid.
    state = np.zeros(n_nodes, dtype=np.int8)
    grid = state.reshape(dims)
    log_bounds = [np.log1p(b) for b in bounds_by_attr]
    best: tuple[int, ...] | None = None
    best_loss = np.inf
    best_suppressed = 0

    strides = [int(np.prod(dims[i + 1 :])) for i in range(d)]
    offset = sum(int(a) * st for a, st in zip(lo, strides, strict=True))

    def index_of(node: tuple[int, ...]) -> int:
        # Row-major position in the grid (np.ravel_multi_index, without its overhead).
        return sum(v * st for v, st in zip(node, strides, strict=True)) - offset

    def check(node: tuple[int, ...], hint: tuple[int, ...] | None = None) -> bool:
        """Evaluate ``node`` unless its validity is known; tag what monotonicity implies."""
        nonlocal best, best_loss, best_suppressed
        i = index_of(node)
        if state[i] == -1:
            return False
        if state[i] == 2:
            return True
        valid, suppressed, loss = s.evaluate(node, hint)
        if valid:
            state[i] = 2
            if _better(loss, node, best_loss, best):
                best, best_loss, best_suppressed = node, loss, suppressed
            if monotone:  # every generalization is valid too
                up = grid[tuple(slice(v - a, None) for v, a in zip(node, lo, strict=True))]
                up[up == 0] = 1
        else:
            state[i] = -1
            if monotone:  # every specialization is invalid too
                grid[tuple(slice(0, v - a + 1) for v, a in zip(node, lo, strict=True))] = -1
        return valid

    # For models that are not monotone, the implied sub-model (k, distinct ceil(l)) still is:
    # its invalid nodes (and their specializations) are invalid for the whole model.
    use_sub = not monotone and bool(s.sub_model.criteria)
    sub_state = np.zeros(n_nodes if use_sub else 0, dtype=np.int8)
    sub_grid = sub_state.reshape(dims if use_sub else (0,))

    def check_sub(node: tuple[int, ...], hint: tuple[int, ...] | None = None) -> bool:
        i = index_of(node)
        if sub_state[i] != 0:
            return bool(sub_state[i] == 1)
        if s.sub_valid(node, hint):
            sub_grid[tuple(slice(v - a, None) for v, a in zip(node, lo, strict=True))] = 1
            return True
        down = tuple(slice(0, v - a + 1) for v, a in zip(node, lo, strict=True))
        sub_grid[down] = -1
        grid[down] = -1
        return False

    def climb(node: tuple[int, ...]) -> list[tuple[int, ...]]:
        """A path from ``node`` to the top, each step raising the attribute whose level costs
        the least Loss bound (so the path's nodes tag wide parts of the lattice)."""
        path = [node]
        current = list(node)
        while True:
            options = [
                (log_bounds[i][current[i] + 1] - log_bounds[i][current[i]], i)
                for i in range(d)
                if current[i] < hi[i]
            ]
            if not options:
                return path
            _, i = min(options)
            current[i] += 1
            path.append(tuple(current))

    s.report(0.0, "searching the generalization lattice")
    for count, idx in enumerate(order):
        if best is not None and bound[idx] > best_loss + _TIE * max(1.0, best_loss):
            break  # every remaining node has a larger lower bound: none can win
        if state[idx] == -1 or state[idx] == 2:
            continue
        if s.timed_out():
            if best is None:
                return _greedy(s, reason="time")
            return s.result(best, best_loss, best_suppressed, True)
        node = tuple(int(v) for v in nodes[idx])
        if state[idx] == 0 and (monotone or use_sub):
            # Binary search for the lowest valid node on a path up from here (as ARX's Flash
            # does): the invalid nodes found tag their whole down-sets.
            test = check if monotone else check_sub
            path = climb(node)
            low, high = 0, len(path) - 1
            while low < high:
                mid = (low + high) // 2
                if test(path[mid], path[low - 1] if low > 0 else None):
                    high = mid
                else:
                    low = mid + 1
            test(path[low], path[low - 1] if low > 0 else None)
            if state[idx] == -1 or state[idx] == 2:
                continue
        check_hint = None
        state[idx] = 0 if state[idx] == 1 else state[idx]
        check(node, check_hint)
        if s.checked % 64 == 0:
            s.report(count / n_nodes, "searching the generalization lattice")
    if best is None:
        limited = any(int(h) < a.height - 1 for h, a in zip(hi, enc.attributes, strict=True))
        raise EngineError(_no_solution_message(model, limited))
    # A few more transformations past the optimum (next lowest bound first, known invalid ones
    # skipped) so that the candidates show what more Loss buys in risk or suppressed rows.
    # Around the optimum: its direct generalizations, then theirs (breadth first), each rolled
    # up from the cached table of the one below, so that the candidates show what a little
    # more Loss buys in risk or suppressed rows. At most EXPLORE of them, and at most a
    # quarter more work than the search itself (counted in classes rolled up).
    explored = 0
    budget = s.work + EXPLORE_WORK * s.work
    queue = [best]
    seen = {best}
    while queue and explored < explore and s.work <= budget and not s.timed_out():
        node = queue.pop(0)
        for i in range(d):
            if node[i] >= hi[i] or explored >= explore:
                continue
            up = node[:i] + (node[i] + 1,) + node[i + 1 :]
            if up in seen:
                continue
            seen.add(up)
            j = index_of(up)
            if state[j] == -1:
                continue
            if state[j] != 2:
                state[j] = 0
                explored += 1
            if check(up, node):
                queue.append(up)
    s.report(1.0, "search finished")
    return s.result(best, best_loss, best_suppressed, False)


def _greedy(s: _Searcher, reason: str) -> SearchResult:
    """Bottom-up hill climb: from the lowest node, repeatedly move to the direct generalization
    with the fewest suppressed rows (then lowest Loss) until the node is valid."""
    node = s.lo
    steps = sum(h - lo for h, lo in zip(s.hi, s.lo, strict=True))
    valid, suppressed, loss = s.evaluate(node)
    taken = 0
    while not valid:
        candidates = []
        for i in range(len(node)):
            if node[i] < s.hi[i]:
                nxt = node[:i] + (node[i] + 1,) + node[i + 1 :]
                v, sup, lo_ = s.evaluate(nxt)
                candidates.append(((not v), sup, lo_, sum(nxt), nxt))
        if not candidates:
            raise EngineError(_no_solution_message(s.model))
        candidates.sort()
        invalid_flag, suppressed, loss, _, node = candidates[0]
        valid = not invalid_flag
        taken += 1
        s.report(
            taken / max(steps, 1),
            "searching greedily (lattice too large)"
            if reason == "lattice"
            else "searching greedily (time limit reached)",
        )
    return s.result(node, float(loss), suppressed, True)


def _no_solution_message(model: PrivacyModel, limited: bool = False) -> str:
    share = f"{model.suppression_limit * 100:g}%"
    if limited:
        return (
            f"No generalization satisfies {model.describe_criteria()} with at most {share} of "
            "rows suppressed, not even at the highest levels the level limits allow; raise the "
            "suppression limit, widen the level limits or relax the model."
        )
    return (
        f"No generalization satisfies {model.describe_criteria()} with at most {share} of rows "
        "suppressed, not even generalizing every quasi-identifier fully; raise the suppression "
        "limit or relax the model."
    )
