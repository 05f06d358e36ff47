"""The optimal search returns what an exhaustive search over the whole lattice returns.

The brute force below is written independently of the engine: it generalizes the rows with
plain ``Series.map`` on each hierarchy level, forms the equivalence classes with a pandas
groupby, checks each class with straightforward per-class code, and scores every valid
transformation with ARX's Loss written out from its definition.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, PrivacyModel, anonymize
from releases.engine import lattice as lattice_module
from releases.engine.criteria import (
    AverageRisk,
    BetaLikeness,
    DeltaDisclosure,
    HighestRisk,
    KAnonymity,
    LDiversity,
    PopulationUniqueness,
    TCloseness,
)
from releases.engine.risk import PopulationModel, population_uniques

QIS = ["age", "zip", "sex", "marital"]


def arx_size_threshold(risk: float) -> int:
    """ARX's ParameterTranslation: floor(1/r), plus one when 1/floor(1/r) exceeds r by 1 %."""
    size = math.floor(1 / risk)
    return size + 1 if 1 / size - risk >= 0.01 * risk else size


def arx_binary_search(holds, start: int, m: int) -> int:
    """How many of the m ordered classes ARX suppresses (RiskBasedCriterion.enforce with
    HashGroupifyDistribution.suppressWhileNotFulfilledBinary), written from ARX's Java: none
    if the model holds; else a binary search on "entries 0..mid suppressed", then one more
    entry if the model still fails. Java divides toward zero."""
    if m <= start or holds(start):
        return start
    low, high = start, m - 1
    mid = int((low + high) / 2)
    while low <= high:
        if holds(mid + 1):
            high = mid - 1
        else:
            low = mid + 1
        mid = int((low + high) / 2)
    return mid + 2 if not holds(mid + 1) and mid + 1 < m else mid + 1


def class_value_counts(cls: np.ndarray, n_classes: int, values: np.ndarray) -> pd.DataFrame:
    """The class x sensitive-value count matrix: what ``pd.crosstab(cls, values)`` reindexed to
    every class gives (columns: the values in sorted order), counted with ``np.add.at`` in a
    fraction of crosstab's time."""
    codes, labels = pd.factorize(values, sort=True)
    counts = np.zeros((n_classes, len(labels)), dtype=np.int64)
    np.add.at(counts, (cls, codes), 1)
    return pd.DataFrame(counts, columns=pd.Index(labels, name="col_0"))


#: The population the small tables are drawn from, for population uniqueness (1 in 20).
SAMPLING_FRACTION = 0.05


class BruteForce:
    def __init__(self, data, hierarchies, disease_hierarchy):
        self.data = data
        self.population = round(len(data) / SAMPLING_FRACTION)
        self.h = hierarchies
        self.disease_h = disease_hierarchy
        self.n = len(data)
        self.nodes = list(itertools.product(*[range(hierarchies[q].height) for q in QIS]))
        self._classes: dict[tuple, np.ndarray] = {}
        self._generalized: dict[tuple, pd.DataFrame] = {}
        self._fails: dict[tuple, np.ndarray] = {}
        self._shares: dict[tuple, dict[str, float]] = {}
        # What depends on the transformation alone, computed once per node for every case.
        self._row_shares: dict[tuple, pd.Series] = {}
        self._value_counts: dict[tuple, pd.DataFrame] = {}
        self._ordering: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def generalized(self, node):
        if node not in self._generalized:
            self._generalized[node] = pd.DataFrame(
                {
                    q: self.data[q].map(self.h[q].mapping(lv))
                    for q, lv in zip(QIS, node, strict=True)
                }
            )
        return self._generalized[node]

    def classes(self, node) -> np.ndarray:
        if node not in self._classes:
            grouped = self.generalized(node).groupby(QIS, sort=False)
            self._classes[node] = grouped.ngroup().to_numpy()
        return self._classes[node]

    # --- per-class checks on a class x sensitive-value count matrix (pd.crosstab)
    def t_matrix(self, counts: pd.DataFrame, column: str, distance: str) -> np.ndarray:
        overall = self.data[column].value_counts(normalize=True)
        p = counts.reindex(columns=overall.index, fill_value=0)
        p = p.div(p.sum(axis=1), axis=0)
        diff = p - overall
        if distance == "equal":
            return 0.5 * diff.abs().sum(axis=1).to_numpy()
        if distance == "ordered":
            ordered = diff[sorted(diff.columns, key=float)]
            return ordered.cumsum(axis=1).abs().sum(axis=1).to_numpy() / (ordered.shape[1] - 1)
        # hierarchical (Li et al.): cost(N) = level(N)/H * min(pos_extra(N), neg_extra(N))
        h = self.disease_h
        top = h.height - 1
        extra = {v: diff[v].to_numpy() if v in diff else np.zeros(len(diff)) for v in h.values}
        total = np.zeros(len(diff))
        for level in range(1, h.height):
            parent_of = {r[level - 1]: r[level] for r in h.rows}
            children_of: dict[str, list[str]] = {}
            for label in extra:
                children_of.setdefault(parent_of[label], []).append(label)
            new_extra = {}
            for parent, children in children_of.items():
                stacked = np.stack([extra[c] for c in children])
                pos = np.clip(stacked, 0, None).sum(axis=0)
                neg = np.clip(-stacked, 0, None).sum(axis=0)
                total += level / top * np.minimum(pos, neg)
                new_extra[parent] = stacked.sum(axis=0)
            extra = new_extra
        return total

    def failing_rows(self, node, model: PrivacyModel, sensitive: list[str]) -> np.ndarray:
        """Row mask of the rows suppressed under ``model`` (suppression limit ignored): rows of
        classes failing a per-class model, then, for dataset models (average risk, population
        uniqueness), the smallest classes (ties: lower class Loss, then earlier first row)
        until the model holds, leaving out classes that are "*" everywhere (as ARX)."""
        key = (node, model.criteria, tuple(sensitive))
        if key in self._fails:
            return self._fails[key]
        cls = self.classes(node)
        n_classes = cls.max() + 1
        sizes = np.bincount(cls, minlength=n_classes)
        fails = np.zeros(n_classes, dtype=bool)
        for c in model.criteria:
            if isinstance(c, KAnonymity):
                fails |= sizes < c.k
            elif isinstance(c, HighestRisk):
                fails |= sizes < arx_size_threshold(c.risk)
        for s in sensitive:
            counts = self.value_counts(node, s)
            m = counts.to_numpy()
            overall = self.data[s].value_counts(normalize=True).reindex(counts.columns).to_numpy()
            share = m / m.sum(axis=1, keepdims=True)
            for c in model.criteria:
                if isinstance(c, LDiversity):
                    if c.variant == "distinct":
                        fails |= (m > 0).sum(axis=1) < c.l
                    elif c.variant == "entropy":
                        with np.errstate(divide="ignore", invalid="ignore"):
                            h = -np.nansum(np.where(share > 0, share * np.log(share), 0.0), axis=1)
                        fails |= h < math.log(c.l) - 1e-9
                    else:
                        desc = -np.sort(-m, axis=1)
                        tail = desc[:, int(c.l) - 1 :].sum(axis=1)
                        fails |= ~(desc[:, 0] < c.c * tail)
                elif isinstance(c, TCloseness):
                    fails |= self.t_matrix(counts, s, c.distance) > c.t + 1e-9
                elif isinstance(c, DeltaDisclosure):
                    # ARX: |log2(share in class / share in table)| < delta for present values
                    with np.errstate(divide="ignore"):
                        ratio = np.abs(np.log2(share / overall))
                    fails |= np.where(m > 0, ratio >= c.delta - 1e-9, False).any(axis=1)
                elif isinstance(c, BetaLikeness):
                    gain = (share - overall) / overall
                    cap = c.beta if c.variant == "basic" else np.minimum(c.beta, -np.log(overall))
                    fails |= np.where(m > 0, gain > cap + 1e-9, False).any(axis=1)
        dataset = [c for c in model.criteria if isinstance(c, AverageRisk | PopulationUniqueness)]
        if dataset:
            everything_star, loss_key, first_row = self.ordering(node)
            candidates = np.flatnonzero(~fails & ~everything_star)
            order = sorted(candidates, key=lambda j: (sizes[j], loss_key[j], first_row[j]))
            ordered = sizes[order]

            def holds(criterion, rest):
                if rest.sum() == 0:
                    return True
                if isinstance(criterion, AverageRisk):
                    return len(rest) / rest.sum() <= criterion.risk + 1e-12
                estimate = population_uniques(rest, self.population, criterion.estimator)
                return (0 < estimate <= criterion.risk + 1e-12) or (
                    estimate == 0 and not (rest == 1).any()
                )

            prefix = 0
            for criterion in dataset:
                prefix = arx_binary_search(
                    lambda p, c=criterion: holds(c, ordered[p:]), prefix, len(order)
                )
            fails[np.array(order[:prefix], dtype=np.int64)] = True
        mask = fails[cls]
        self._fails[key] = mask
        return mask

    def value_counts(self, node, column: str) -> pd.DataFrame:
        if (node, column) not in self._value_counts:
            cls = self.classes(node)
            counts = class_value_counts(cls, cls.max() + 1, self.data[column].to_numpy())
            self._value_counts[(node, column)] = counts
        return self._value_counts[(node, column)]

    def ordering(self, node) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per class: "*" everywhere, the class Loss key and the first row (the order in which
        dataset models suppress classes)."""
        if node not in self._ordering:
            cls = self.classes(node)
            n_classes = cls.max() + 1
            sizes = np.bincount(cls, minlength=n_classes)
            gen = self.generalized(node)
            everything_star = (gen == "*").all(axis=1).groupby(cls).first().to_numpy()
            loss_key = np.zeros(n_classes)
            for q, lv in zip(QIS, node, strict=True):
                shares = self.row_shares(node, q, lv).groupby(cls).first().to_numpy()
                loss_key += np.log1p(sizes * shares)
            first_row = pd.Series(np.arange(self.n)).groupby(cls).min().to_numpy()
            self._ordering[node] = (everything_star, loss_key, first_row)
        return self._ordering[node]

    def row_shares(self, node, q, lv) -> pd.Series:
        """Per row: the share of the hierarchy's values under the row's label of ``q``."""
        if (node, q) not in self._row_shares:
            self._row_shares[(node, q)] = self.generalized(node)[q].map(self.share(q, lv))
        return self._row_shares[(node, q)]

    def share(self, q, lv) -> dict[str, float]:
        if (q, lv) not in self._shares:
            rows = self.h[q].rows
            labels = [r[lv] for r in rows]
            self._shares[(q, lv)] = {lab: labels.count(lab) / len(rows) for lab in set(labels)}
        return self._shares[(q, lv)]

    def loss(self, node, suppressed_mask: np.ndarray, weights=None) -> float:
        # ARX's weights: 0.5 when not given, divided by the largest.
        given = {q: (weights or {}).get(q, 0.5) for q in QIS}
        top = max(given.values()) if weights else 0
        w = {q: given[q] / top if top > 0 else 1.0 for q in QIS}
        values = []
        for q, lv in zip(QIS, node, strict=True):
            kept = self.row_shares(node, q, lv)[~suppressed_mask].sum()
            total = kept + suppressed_mask.sum()
            low = self.n / len(self.h[q].rows)
            values.append(w[q] * max(0.0, (total - low) / (self.n - low)))
        return float(np.prod([(v + 1) ** (1 / len(values)) for v in values]) - 1)

    def optimum(self, model: PrivacyModel, sensitive: list[str], weights=None, limits=None):
        limit = math.floor(model.suppression_limit * self.n + 1e-9)
        best = None
        for node in self.nodes:
            if limits and any(
                not limits.get(q, (0, 99))[0] <= lv <= limits.get(q, (0, 99))[1]
                for q, lv in zip(QIS, node, strict=True)
            ):
                continue
            suppressed_mask = self.failing_rows(node, model, sensitive)
            if suppressed_mask.sum() > limit:
                continue
            loss = self.loss(node, suppressed_mask, weights)
            key = (loss, sum(node), node)
            if (
                best is None
                or (loss < best[0] - 1e-12)
                or (abs(loss - best[0]) <= 1e-12 and key[1:] < best[1:])
            ):
                best = key + (int(suppressed_mask.sum()),)
        return best


@pytest.fixture(scope="module")
def brute(table_factory):
    data, hierarchies, disease = table_factory(11, n=300)
    return BruteForce(data, hierarchies, disease)


MODELS = {
    "k2": (PrivacyModel(k=2), []),
    "k5": (PrivacyModel(k=5), []),
    "k12": (PrivacyModel(k=12), []),
    "distinct-l2": (PrivacyModel(l=2), ["disease"]),
    "k3-distinct-l3": (PrivacyModel(k=3, l=3), ["disease"]),
    "entropy-l2": (PrivacyModel(l=2, l_variant="entropy"), ["disease"]),
    "recursive-c3-l2": (PrivacyModel(l=2, l_variant="recursive", c=3), ["disease"]),
    "t-equal": (PrivacyModel(t=0.3), ["disease"]),
    "t-ordered": (PrivacyModel(t=0.2, t_distance="ordered"), ["salary"]),
    "t-hierarchical": (PrivacyModel(t=0.15, t_distance="hierarchical"), ["disease"]),
    "k2-l2-t-two-sensitive": (PrivacyModel(k=2, l=2, t=0.35), ["disease", "salary"]),
    "delta-disclosure": (PrivacyModel(criteria=[DeltaDisclosure(delta=1.2)]), ["disease"]),
    "k2-delta-two-sensitive": (
        PrivacyModel(k=2, criteria=[DeltaDisclosure(delta=2.5)]),
        ["disease", "salary"],
    ),
    "basic-beta": (PrivacyModel(criteria=[BetaLikeness(beta=1.0)]), ["disease"]),
    "enhanced-beta": (
        PrivacyModel(criteria=[BetaLikeness(beta=2.0, variant="enhanced")]),
        ["disease"],
    ),
    "highest-risk": (PrivacyModel(criteria=[HighestRisk(risk=0.15)]), []),
    "average-risk": (PrivacyModel(criteria=[AverageRisk(risk=0.08)]), []),
    "k2-average-risk-l2": (
        PrivacyModel(k=2, l=2, criteria=[AverageRisk(risk=0.1)]),
        ["disease"],
    ),
    "population-pitman": (
        PrivacyModel(criteria=[PopulationUniqueness(risk=0.002, estimator="pitman")]),
        [],
    ),
    "population-zayatz": (
        PrivacyModel(criteria=[PopulationUniqueness(risk=0.002, estimator="zayatz")]),
        [],
    ),
    "population-dankar-k2": (
        PrivacyModel(k=2, criteria=[PopulationUniqueness(risk=0.001, estimator="dankar")]),
        [],
    ),
}


#: Models added with the criteria module are checked at two suppression limits (keeps the
#: suite fast); the others at three.
NEW_MODELS = {
    name
    for name in MODELS
    if name.startswith(
        ("delta", "k2-delta", "basic", "enhanced", "highest", "average", "k2-average", "population")
    )
}
CASES = [
    (name, limit)
    for name in MODELS
    for limit in ((0.0, 0.05) if name in NEW_MODELS else (0.0, 0.02, 0.1))
]


@pytest.mark.parametrize(("name", "limit"), CASES, ids=[f"{n}-{lim}" for n, lim in CASES])
def test_optimal_search_matches_brute_force(brute, name, limit):
    base, sensitive = MODELS[name]
    model = PrivacyModel(
        criteria=base.criteria,
        suppression_limit=limit,
        population=PopulationModel(sampling_fraction=SAMPLING_FRACTION),
    )
    config = AnonymizationConfig(
        quasi_identifiers=brute.h,
        model=model,
        sensitive=sensitive,
        identifiers=["name"],
        sensitive_hierarchies={"disease": brute.disease_h},
    )
    expected = brute.optimum(model, sensitive)
    if expected is None:
        with pytest.raises(EngineError, match="No generalization satisfies"):
            anonymize(brute.data, config)
        return
    result = anonymize(brute.data, config)
    assert tuple(result.levels[q] for q in QIS) == expected[2]
    assert result.suppressed == expected[3]
    assert result.metrics["loss"] == pytest.approx(expected[0], abs=1e-9)
    assert result.heuristic is False


@pytest.mark.parametrize(
    ("weights", "limits"),
    [
        ({QIS[0]: 1.0, QIS[1]: 0.1}, {}),
        ({QIS[-1]: 0.0, QIS[0]: 0.3}, {QIS[0]: (1, 2), QIS[-1]: (0, 1)}),
        ({}, {QIS[1]: (1, 1)}),
    ],
)
def test_weights_and_level_limits_match_brute_force(brute, weights, limits):
    model = PrivacyModel(k=4, suppression_limit=0.04)
    expected = brute.optimum(model, [], weights, limits)
    config = AnonymizationConfig(
        quasi_identifiers=brute.h,
        model=model,
        identifiers=["name"],
        weights=weights,
        min_levels={q: lo for q, (lo, _) in limits.items()},
        max_levels={q: hi for q, (_, hi) in limits.items()},
    )
    result = anonymize(brute.data, config)
    assert tuple(result.levels[q] for q in QIS) == expected[2]
    assert result.suppressed == expected[3]
    assert result.metrics["loss"] == pytest.approx(expected[0], abs=1e-9)


def test_pruning_evaluates_fewer_transformations_than_the_lattice(brute):
    config = AnonymizationConfig(quasi_identifiers=brute.h, model=PrivacyModel(k=5))
    result = anonymize(brute.data, config)
    assert 0 < result.transformations_checked < len(brute.nodes)


def test_min_and_max_levels_bound_the_search(brute):
    model = PrivacyModel(k=4, suppression_limit=0.02)
    config = AnonymizationConfig(
        quasi_identifiers=brute.h, model=model, min_levels={"sex": 1}, max_levels={"age": 1}
    )
    result = anonymize(brute.data, config)
    assert result.levels["sex"] == 1
    assert result.levels["age"] <= 1
    # The same answer as the brute force restricted to that part of the lattice.
    restricted = BruteForce(brute.data, brute.h, brute.disease_h)
    restricted.nodes = [n for n in brute.nodes if n[2] == 1 and n[0] <= 1]
    restricted._classes, restricted._generalized = brute._classes, brute._generalized
    restricted._fails = brute._fails
    expected = restricted.optimum(model, [])
    assert tuple(result.levels[q] for q in QIS) == expected[2]


def test_large_lattice_falls_back_to_a_flagged_heuristic(brute, monkeypatch):
    monkeypatch.setattr(lattice_module, "MAX_NODES", 10)
    model = PrivacyModel(k=5, suppression_limit=0.02)
    result = anonymize(brute.data, AnonymizationConfig(quasi_identifiers=brute.h, model=model))
    assert result.heuristic is True
    sizes = result.data.groupby(QIS).size()
    assert sizes.min() >= 5
    assert result.suppressed <= math.floor(0.02 * len(brute.data))


def test_a_lattice_larger_than_an_int64_counts_is_searched_greedily_not_a_crash():
    # 18 quasi-identifiers with 12 levels each: 12**18 (about 2.7e19) transformations, more
    # than an int64 holds (2**63 is about 9.2e18; asserted below). Counted in int64 the size
    # wrapped and let the search build the grid (a numpy ValueError, shown as an internal
    # error). 18 are enough to overflow; each further one only lengthens the greedy walk
    # (30 took about 4 times as long).
    from releases.engine import Hierarchy

    rng = np.random.default_rng(7)
    names = [f"q{i}" for i in range(18)]
    data = pd.DataFrame({n: rng.integers(0, 2048, 300).astype(str) for n in names})
    widths = [2.0**p for p in range(1, 11)]
    hierarchies = {
        n: Hierarchy.intervals(data[n].unique(), widths=widths, attribute=n) for n in names
    }
    assert math.prod(h.height for h in hierarchies.values()) > 2**63
    model = PrivacyModel(k=3, suppression_limit=0.05)
    result = anonymize(data, AnonymizationConfig(quasi_identifiers=hierarchies, model=model))
    assert result.heuristic is True
    assert result.data.groupby(names).size().min() >= 3


def test_interval_widths_must_grow():
    from releases.engine import Hierarchy
    from releases.engine.errors import HierarchyError

    with pytest.raises(HierarchyError, match="larger") as refused:
        Hierarchy.intervals([str(v) for v in range(100)], widths=[1.0] * 5000, attribute="age")
    assert len(str(refused.value)) < 200  # names the widths without listing 5,000 of them
    assert Hierarchy.intervals(["1", "7"], widths=[5.0, 10.0], attribute="a").height == 4


def test_time_limit_falls_back_to_a_flagged_heuristic(brute):
    model = PrivacyModel(k=5, suppression_limit=0.02)
    config = AnonymizationConfig(quasi_identifiers=brute.h, model=model, time_limit=0.0)
    result = anonymize(brute.data, config)
    assert result.heuristic is True
    assert result.data.groupby(QIS).size().min() >= 5


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_random_tables_match_brute_force_for_k(table_factory, seed):
    data, hierarchies, disease = table_factory(seed, n=200)
    bf = BruteForce(data, hierarchies, disease)
    for k, limit in ((3, 0.0), (6, 0.05)):
        model = PrivacyModel(k=k, suppression_limit=limit)
        expected = bf.optimum(model, [])
        result = anonymize(data, AnonymizationConfig(quasi_identifiers=hierarchies, model=model))
        assert tuple(result.levels[q] for q in QIS) == expected[2]
        assert result.suppressed == expected[3]
