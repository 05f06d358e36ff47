"""How the engine runs SafePub (:class:`.criteria.safepub.SafePub`): the random sample, the
generalization (a scheme, or ARX's data-dependent search) and the k-suppression.

:func:`prepare` draws the sample (each row with probability β, from the model's seed or a fresh
one) and turns the configuration into one the optimal path runs as it is: the sample is a
research subset of the input (only its rows are released, classes and Loss refer to them, as
ARX's ``DataSubset``), every class smaller than k is suppressed (the suppression limit is 100%),
and in data-independent mode the levels are the scheme's. :func:`exponential_search` is ARX's
``DataDependentEDDPAlgorithm``: from the top of the lattice, each step adds the pivot's direct
specializations to the candidates and draws the next pivot with the exponential mechanism
(probability ∝ exp(ε_step · score / 2), ε_step = ε_search / steps) on SafePub's Loss score
(:func:`loss_score`, ARX's ``MetricMDNMLoss.getScore``); the best pivot visited is released.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from .arrays import BoolArray
from .criteria import DataContext, PrivacyModel
from .criteria.safepub import SafePub, sample_rows, scheme_level
from .lattice import EncodedData
from .shuffle import new_seed
from .subset import ResearchSubset
from .types import AnonymizationConfig, EngineError

__all__ = ["SafePubRun", "exponential_search", "loss_score", "prepare"]


@dataclass(frozen=True)
class SafePubRun:
    """The SafePub model of a run, with what was drawn: the seed and the sampled rows."""

    criterion: SafePub
    seed: int
    sample: BoolArray

    @property
    def sampled_rows(self) -> int:
        return int(self.sample.sum())

    def report(self) -> dict[str, object]:
        """What the report shows beside the model's achieved values."""
        return {
            "epsilon": float(self.criterion.epsilon),
            "delta": float(self.criterion.delta),
            "k": self.criterion.k,
            "beta": self.criterion.beta,
            "mode": "data-dependent" if self.criterion.data_dependent else "data-independent",
            "epsilon_search": self.criterion.epsilon_search,
            "seed": self.seed,
            "input_rows": len(self.sample),
            "sampled_rows": self.sampled_rows,
        }


def find(model: PrivacyModel) -> SafePub | None:
    """The model's SafePub criterion, if it has one."""
    return next((c for c in model.criteria if isinstance(c, SafePub)), None)


def prepare(
    rows: int, config: AnonymizationConfig
) -> tuple[AnonymizationConfig, SafePubRun | None]:
    """The configuration SafePub runs with (unchanged without SafePub) and what it drew."""
    criterion = find(config.model)
    if criterion is None:
        return config, None
    if config.research_subset is not None:
        raise EngineError(
            "SafePub draws its own sample of the rows: give it without a research subset."
        )
    if config.algorithm != "optimal":
        other = "Mondrian" if config.algorithm == "mondrian" else "the heuristic search"
        raise EngineError(f"SafePub generalizes globally: use the optimal search, not {other}.")
    if config.microaggregate:
        raise EngineError("SafePub takes no microaggregation: it generalizes every column.")
    if len(config.model.criteria) > 1:
        raise EngineError("SafePub is a privacy model of its own: give it without other models.")
    if config.min_levels or config.max_levels or config.weights:
        raise EngineError("SafePub takes no level limits or weights.")
    qis = list(config.quasi_identifiers)
    levels = config.levels
    if criterion.data_dependent:
        if levels is not None:
            raise EngineError(
                "Fixed levels make SafePub data-independent: give a search budget of 0 "
                "with them (on the command line --safepub-search-budget 0)."
            )
    else:
        scheme = {
            q: scheme_level(criterion.degree, config.quasi_identifiers[q].height)
            for q in qis
            if criterion.degree is not None
        }
        scheme.update(levels or {})
        missing = [q for q in qis if q not in scheme]
        if missing:
            raise EngineError(
                "Data-independent SafePub needs a generalization scheme: a level for every "
                f"quasi-identifier (missing: {', '.join(missing)}) or a scheme's degree."
            )
        levels = scheme
    seed = new_seed() if criterion.seed is None else int(criterion.seed)
    sample = sample_rows(rows, criterion.beta, seed)
    if not sample.any():
        raise EngineError(
            f"The sample drawn with β={criterion.beta:.4f} holds no rows: the data has too few "
            "rows for this ε."
        )
    model = PrivacyModel(
        criteria=list(config.model.criteria),
        suppression_limit=1.0,
        population=config.model.population,
    )
    prepared = replace(config, model=model, research_subset=ResearchSubset(sample), levels=levels)
    return prepared, SafePubRun(criterion, seed, sample)


def loss_score(
    enc: EncodedData,
    model: PrivacyModel,
    context: DataContext,
    levels: Sequence[int],
    k: int,
) -> float:
    """SafePub's Loss score of a transformation (higher is better): minus the sum over the
    quasi-identifiers of the released rows' domain shares and of one per row suppressed or not
    sampled, divided by the sensitivity (the number of quasi-identifiers, times k - 1)."""
    table, _ = enc.rollup(enc.base, tuple(int(v) for v in levels), with_sensitive=False)
    judged = model.evaluate(table.classes(), context, None)
    kept, _ = enc.share_sums(table, judged.fails)
    d = max(len(enc.attributes), 1)
    unsampled = (enc.population_rows or enc.n) - enc.n
    total = float(kept.sum()) + d * (judged.suppressed + unsampled)
    score = -total / d
    return score / (k - 1) if k > 1 else score


def exponential_search(
    enc: EncodedData,
    model: PrivacyModel,
    context: DataContext,
    lo: Sequence[int],
    hi: Sequence[int],
    run: SafePubRun,
) -> tuple[tuple[int, ...], int]:
    """The levels ARX's data-dependent search releases, and the transformations scored."""
    criterion = run.criterion
    steps = int(criterion.steps or sum(int(b) - int(a) for a, b in zip(lo, hi, strict=True)))
    epsilon_step = criterion.epsilon_search / steps if steps else 0.0
    rng = np.random.default_rng([run.seed, 1])  # a stream of its own beside the sampling's
    k = criterion.k

    def score(levels: tuple[int, ...]) -> float:
        return loss_score(enc, model, context, levels, k)

    pivot = tuple(int(v) for v in hi)
    candidates = {pivot: score(pivot)}
    scored = 1
    best, best_score = pivot, candidates[pivot]
    for _ in range(steps):
        for i in range(len(pivot)):
            if pivot[i] > lo[i]:
                lower = pivot[:i] + (pivot[i] - 1,) + pivot[i + 1 :]
                if lower not in candidates:
                    candidates[lower] = score(lower)
                    scored += 1
        del candidates[pivot]
        if not candidates:
            break
        options = list(candidates)
        exponents = np.array([0.5 * epsilon_step * candidates[o] for o in options])
        weights = np.exp(exponents - exponents.max())
        pivot = options[int(rng.choice(len(options), p=weights / weights.sum()))]
        value = candidates[pivot]
        if value > best_score or (value == best_score and sum(pivot) < sum(best)):
            best, best_score = pivot, value
        if scored >= steps * len(pivot):
            break  # ARX's limit on transformations checked: steps times the quasi-identifiers
    if not math.isfinite(best_score):  # pragma: no cover - scores are finite sums
        raise EngineError("The search's scores are not finite.")
    return best, scored
