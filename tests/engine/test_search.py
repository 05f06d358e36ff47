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

QIS = ["age", "zip", "sex", "marital"]


class BruteForce:
    def __init__(self, data, hierarchies, disease_hierarchy):
        self.data = data
        self.h = hierarchies
        self.disease_h = disease_hierarchy
        self.n = len(data)
        self.nodes = list(itertools.product(*[range(hierarchies[q].height) for q in QIS]))
        self._classes: dict[tuple, np.ndarray] = {}
        self._generalized: dict[tuple, pd.DataFrame] = {}
        self._fails: dict[tuple, np.ndarray] = {}
        self._shares: dict[tuple, dict[str, float]] = {}

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
        """Row mask of the rows in classes failing ``model`` (suppression limit ignored)."""
        key = (
            node,
            model.k,
            model.l,
            model.l_variant,
            model.c,
            model.t,
            model.t_distance,
            tuple(sensitive),
        )
        if key in self._fails:
            return self._fails[key]
        cls = self.classes(node)
        n_classes = cls.max() + 1
        sizes = np.bincount(cls, minlength=n_classes)
        fails = sizes < model.k
        for s in sensitive:
            counts = pd.crosstab(cls, self.data[s].to_numpy())
            counts = counts.reindex(range(n_classes), fill_value=0)
            m = counts.to_numpy()
            if model.l is not None:
                if model.l_variant == "distinct":
                    fails |= (m > 0).sum(axis=1) < model.l
                elif model.l_variant == "entropy":
                    p = m / m.sum(axis=1, keepdims=True)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        h = -np.nansum(np.where(p > 0, p * np.log(p), 0.0), axis=1)
                    fails |= h < math.log(model.l) - 1e-9
                else:
                    desc = -np.sort(-m, axis=1)
                    tail = desc[:, int(model.l) - 1 :].sum(axis=1)
                    fails |= ~(desc[:, 0] < model.c * tail)
            if model.t is not None:
                fails |= self.t_matrix(counts, s, model.t_distance) > model.t + 1e-9
        mask = fails[cls]
        self._fails[key] = mask
        return mask

    def share(self, q, lv) -> dict[str, float]:
        if (q, lv) not in self._shares:
            rows = self.h[q].rows
            labels = [r[lv] for r in rows]
            self._shares[(q, lv)] = {lab: labels.count(lab) / len(rows) for lab in set(labels)}
        return self._shares[(q, lv)]

    def loss(self, node, suppressed_mask: np.ndarray) -> float:
        values = []
        gen = self.generalized(node)
        for q, lv in zip(QIS, node, strict=True):
            kept = gen[q][~suppressed_mask].map(self.share(q, lv)).sum()
            total = kept + suppressed_mask.sum()
            low = self.n / len(self.h[q].rows)
            values.append(max(0.0, (total - low) / (self.n - low)))
        return float(np.prod([(v + 1) ** (1 / len(values)) for v in values]) - 1)

    def optimum(self, model: PrivacyModel, sensitive: list[str]):
        limit = math.floor(model.suppression_limit * self.n + 1e-9)
        best = None
        for node in self.nodes:
            suppressed_mask = self.failing_rows(node, model, sensitive)
            if suppressed_mask.sum() > limit:
                continue
            loss = self.loss(node, suppressed_mask)
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
}


@pytest.mark.parametrize("limit", [0.0, 0.02, 0.1])
@pytest.mark.parametrize("name", list(MODELS))
def test_optimal_search_matches_brute_force(brute, name, limit):
    base, sensitive = MODELS[name]
    model = PrivacyModel(**{**base.__dict__, "suppression_limit": limit})
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
