"""A time-limited heuristic search for many quasi-identifiers (ARX's Lightning).

The optimal search (:func:`.lattice.search`) lays the whole lattice out in memory; with 15 or
more quasi-identifiers the lattice has billions of nodes and that is out of reach. This search
walks the lattice from its bottom instead, as ARX 3.9.2's ``LIGHTNINGAlgorithm`` does:

* *Best first*: a priority queue of the transformations evaluated, lowest Loss first (an
  invalid transformation's Loss counts the rows it would suppress). The transformation taken
  from the queue is *expanded*: each of its direct generalizations (one level higher on one
  quasi-identifier) is evaluated and queued.
* *Greedy descent*: at the first expansion and every ``stepping``-th one after (``stepping``
  is the height of the lattice, the sum of the levels of its top), the search follows the
  cheapest direct generalization of each expanded node until it reaches the top or a node
  the bound prunes, so that a valid solution is found early even in a lattice too wide for
  best first alone. (ARX starts its first descent at step ``stepping``; starting at once
  finds a first solution within a short limit on 20 quasi-identifiers, where ARX's first
  ``stepping`` expansions may use up the time without one.)
* *Pruning* (the optimal search's lower bound, ARX's ``ILMultiDimensionalWithBound``): a
  transformation whose Loss without suppression (a lower bound of its Loss, and of every
  generalization's) is above the best Loss found is not expanded. Transformations are only
  evaluated once, and a table is rolled up from the one it was generalized from.
* *Stopping*: at the time limit, at the step limit (transformations evaluated), or when the
  queue is empty. A search stopped before it found any valid transformation climbs greedily
  from the bottom (fewest suppressed rows first) to the first valid one, past its limit, so
  that even a tiny limit returns a transformation that satisfies the model. An empty queue means every transformation was evaluated or pruned by the
  bound: the best one found is then the optimum (*proven optimal*).

Ties go as in the optimal search (lowest Loss, then lowest sum of levels, then the
lexicographically smallest levels), and a transformation is pruned only when its bound is
strictly above the best Loss, so an exhausted search returns exactly the optimal search's
transformation. The search draws no random numbers: with a step limit (and no time limit) it
evaluates the same transformations in the same order on every machine; a time limit stops it
wherever the machine's speed has brought it.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from . import metrics
from .criteria import DataContext, PrivacyModel
from .errors import EngineError
from .lattice import (
    CACHE_BYTES,
    CANDIDATE_LIMIT,
    EncodedData,
    SearchResult,
    Table,
    _better,
    _greedy,
    _no_solution_message,
    _Searcher,
    pareto_front,
)
from .types import ProgressCallback

__all__ = ["HeuristicResult", "lightning"]

_TIE = 1e-12
_HASH_SEED = 20251126


@dataclass
class HeuristicResult(SearchResult):
    """The heuristic search's result: the best transformation found, and how the search ended."""

    #: Every transformation was evaluated or pruned by the bound: the result is the optimum.
    exhausted: bool = False
    #: Why the search stopped: "exhausted", "time limit" or "step limit" (with ", then a greedy
    #: climb ..." when it had found no valid transformation by then).
    stopped: str = "exhausted"
    #: Transformations expanded (taken from the queue and their generalizations evaluated).
    expansions: int = 0
    seconds: float = 0.0


class _Hashes:
    """Per quasi-identifier and level, a random 64-bit number per code, drawn once from a fixed
    seed: a class's hash is the sum (mod 2^64) of its codes' numbers, so a generalization of
    one attribute updates it in one pass over the classes."""

    def __init__(self, enc: EncodedData) -> None:
        rng = np.random.default_rng(_HASH_SEED)
        self.values = [
            [
                rng.integers(0, 2**63, a.cardinality(level), dtype=np.uint64)
                for level in range(a.height)
            ]
            for a in enc.attributes
        ]

    def of(self, table: Table) -> NDArray[np.uint64]:
        total = np.zeros(len(table.counts), dtype=np.uint64)
        for i, level in enumerate(table.levels):
            total += self.values[i][level][table.codes[:, i]]
        return total


def _step_up(
    enc: EncodedData,
    hashes: _Hashes,
    parent: Table,
    parent_hash: NDArray[np.uint64],
    attribute: int,
    with_sensitive: bool,
) -> tuple[Table, NDArray[np.uint64]] | None:
    """The table one level higher on ``attribute`` than ``parent`` (with its class hashes),
    grouped by the hashes; None when two different classes share a hash (the caller then rolls
    up exactly). The same classes as :meth:`EncodedData.rollup`, possibly numbered otherwise."""
    src = parent.levels[attribute]
    old = parent.codes[:, attribute]
    new = enc.attributes[attribute].step(src, src + 1)[old]
    values = hashes.values[attribute]
    child_hash = parent_hash - values[src][old] + values[src + 1][new]
    inverse, uniques = pd.factorize(child_hash, sort=False)
    g = len(uniques)
    first = np.full(g, len(inverse), dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(len(inverse), dtype=np.int64))
    mapped = parent.codes.copy()
    mapped[:, attribute] = new
    codes = mapped[first]
    # Every class grouped under a hash must have that group's codes: else a collision.
    if not (mapped == codes[inverse]).all():
        return None
    inverse = inverse.astype(np.int64)
    counts = np.bincount(inverse, weights=parent.counts, minlength=g).astype(np.int64)
    population = None
    if parent.population is not None:
        population = np.bincount(inverse, weights=parent.population, minlength=g).astype(np.int64)
    sensitive = (
        {k: v.regroup(inverse, g) for k, v in parent.sensitive.items()} if with_sensitive else {}
    )
    first_rows = None
    if parent.first is not None:
        first_rows = np.full(g, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_rows, inverse, parent.first)
    linked = {k: v.regroup(inverse, g) for k, v in parent.linked.items()}
    levels = parent.levels[:attribute] + (src + 1,) + parent.levels[attribute + 1 :]
    table = Table(levels, codes, counts, sensitive, first_rows, population, linked)
    return table, child_hash[first]


@dataclass
class _Node:
    valid: bool
    loss: float
    suppressed: int


def lightning(
    enc: EncodedData,
    model: PrivacyModel,
    min_levels: Sequence[int],
    max_levels: Sequence[int],
    time_limit: float | None,
    step_limit: int | None = None,
    progress: ProgressCallback | None = None,
    data: DataContext | None = None,
) -> HeuristicResult:
    """The best valid transformation between ``min_levels`` and ``max_levels`` that the
    heuristic search finds within ``time_limit`` seconds and ``step_limit`` transformations
    evaluated (either None: no such limit). Raises :class:`EngineError` when it found none."""
    started = time.perf_counter()
    data = data if data is not None else enc.data_context()
    s = _Searcher(enc, model, min_levels, max_levels, None, progress, data)
    lo, hi = s.lo, s.hi
    d = len(lo)
    if d and any(lo):
        s.start_table, _ = enc.rollup(enc.base, lo)
    deadline = None if time_limit is None else started + float(time_limit)
    bounds_by_attr = enc.bound_matrix()
    log_bounds = [np.log1p(b) for b in bounds_by_attr]
    stepping = max(sum(h - a for a, h in zip(lo, hi, strict=True)), 1)
    n_nodes = math.prod(h - a + 1 for a, h in zip(lo, hi, strict=True))

    def bound(node: tuple[int, ...]) -> float:
        if not d:
            return 0.0
        total = sum(float(log_bounds[i][v]) for i, v in enumerate(node))
        return math.exp(total / d) - 1.0

    hashes = _Hashes(enc)
    tables: OrderedDict[tuple[int, ...], tuple[Table, NDArray[np.uint64]]] = OrderedDict()
    cache_bytes = 0
    seen: dict[tuple[int, ...], _Node] = {}
    expanded: set[tuple[int, ...]] = set()
    insufficient: set[tuple[int, ...]] = set()
    best: tuple[int, ...] | None = None
    best_loss = math.inf
    best_suppressed = 0
    stopped = ""

    def must_stop() -> bool:
        nonlocal stopped
        if stopped:
            return True
        if step_limit is not None and s.checked >= step_limit:
            stopped = "step limit"
        elif deadline is not None and time.perf_counter() > deadline:
            stopped = "time limit"
        return bool(stopped)

    def remember(table: Table, hashed: NDArray[np.uint64]) -> None:
        nonlocal cache_bytes
        tables[table.levels] = (table, hashed)
        cache_bytes += table.nbytes + hashed.nbytes
        while cache_bytes > CACHE_BYTES and len(tables) > 1:
            _, (old, old_hash) = tables.popitem(last=False)
            cache_bytes -= old.nbytes + old_hash.nbytes

    def roll_up(node: tuple[int, ...], parent: tuple[int, ...] | None) -> Table:
        """``node``'s table: one step up from its parent's when that is cached (grouping by
        the classes' hashes), else rolled up exactly from the start."""
        cached = tables.get(parent) if parent is not None else None
        stepped = None
        if cached is not None and parent is not None:
            changed = next(i for i in range(d) if node[i] != parent[i])
            stepped = _step_up(enc, hashes, cached[0], cached[1], changed, s.with_sensitive)
            s.work += len(cached[0].counts)
        if stepped is None:
            source = cached[0] if cached is not None else s.start_table
            table, _ = enc.rollup(source, node, with_sensitive=s.with_sensitive)
            s.work += len(source.counts)
            stepped = table, hashes.of(table)
        remember(*stepped)
        return stepped[0]

    def assure_checked(node: tuple[int, ...], parent: tuple[int, ...] | None) -> _Node:
        nonlocal best, best_loss, best_suppressed
        known = seen.get(node)
        if known is not None:
            return known
        table = roll_up(node, parent)
        s.checked += 1
        judged = s.judge(table, s.limit_rows)
        loss = metrics.loss(enc.loss_vector(table, judged.fails), enc.weights)
        found = _Node(bool(judged.valid), float(loss), int(judged.suppressed))
        seen[node] = found
        if found.valid:
            kept = table.counts[~judged.fails]
            kept = kept[kept > 0]
            highest = 1.0 / float(kept.min()) if len(kept) else 0.0
            s.candidates.append((node, found.loss, highest, found.suppressed))
            if len(s.candidates) > CANDIDATE_LIMIT:
                s.candidates = pareto_front(s.candidates)
            if _better(found.loss, node, best_loss, best):
                best, best_loss, best_suppressed = node, found.loss, found.suppressed
        if s.checked % 64 == 0:
            _report()
        return found

    def _report() -> None:
        if deadline is not None and time_limit:
            fraction = (time.perf_counter() - started) / float(time_limit)
        elif step_limit:
            fraction = s.checked / step_limit
        else:
            fraction = s.checked / max(n_nodes, 1)
        s.report(fraction, "searching heuristically (best first)")

    def expand(
        queue: list[tuple[float, int, tuple[int, ...]]], node: tuple[int, ...]
    ) -> tuple[int, ...] | None:
        """Evaluate and queue ``node``'s direct generalizations; the cheapest of them."""
        result: tuple[int, ...] | None = None
        result_loss = math.inf
        for i in range(d):
            if node[i] >= hi[i]:
                continue
            up = node[:i] + (node[i] + 1,) + node[i + 1 :]
            if up not in expanded and up not in insufficient:
                checked = assure_checked(up, node)
                heapq.heappush(queue, (checked.loss, sum(up), up))
                if result is None or checked.loss < result_loss:
                    result, result_loss = up, checked.loss
            if must_stop():
                return None
        expanded.add(node)
        return result

    def prune(node: tuple[int, ...]) -> bool:
        if node in expanded or node in insufficient:
            return True
        if (
            best is not None
            and node != best
            and bound(node) > best_loss + _TIE * max(1.0, abs(best_loss))
        ):
            insufficient.add(node)
            return True
        return False

    s.report(0.0, "searching heuristically (best first)")
    queue: list[tuple[float, int, tuple[int, ...]]] = []
    bottom = tuple(lo)
    first = assure_checked(bottom, None)
    heapq.heappush(queue, (first.loss, sum(bottom), bottom))
    step = 0
    while queue and not must_stop():
        _, _, node = heapq.heappop(queue)
        if prune(node):
            continue
        step += 1
        if step == 1 or step % stepping == 0:
            current: tuple[int, ...] | None = node
            while (
                current is not None and not must_stop() and (current == node or not prune(current))
            ):
                current = expand(queue, current)
        else:
            expand(queue, node)
    exhausted = not stopped
    if best is None:
        if exhausted:
            limited = any(h < a.height - 1 for h, a in zip(hi, enc.attributes, strict=True))
            raise EngineError(_no_solution_message(model, limited))
        # Stopped before any valid transformation: climb greedily (fewest suppressed rows
        # first) to the first valid one, past the limit, so that there is a result to release.
        climbed = _greedy(s, reason="time")
        best, best_loss, best_suppressed = climbed.levels, climbed.loss, climbed.suppressed
        stopped += ", then a greedy climb to the first valid transformation"
    s.report(1.0, "search finished")
    return HeuristicResult(
        best,
        float(best_loss),
        best_suppressed,
        s.checked,
        True,
        s.candidates,
        exhausted=exhausted,
        stopped=stopped or "exhausted",
        expansions=len(expanded),
        seconds=time.perf_counter() - started,
    )
