"""Dataclasses the engine speaks: a privacy model and configuration in, a result out.

This module is the engine's public contract: the Celery task, the services layer and the
``anonymize`` management command build an :class:`AnonymizationConfig` and read an
:class:`AnonymizationResult`. Nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from .arrays import IntArray
from .constants import SUPPRESSED_VALUE
from .criteria import PrivacyModel
from .errors import EngineError, HierarchyError
from .hierarchy import Hierarchy
from .risk import PopulationModel, RiskSummary
from .subset import ResearchSubset

__all__ = [
    "SUPPRESSED_VALUE",
    "AnonymizationConfig",
    "AnonymizationResult",
    "Candidate",
    "EngineError",
    "HierarchyError",
    "PopulationModel",
    "PrivacyModel",
    "ProgressCallback",
    "ResearchSubset",
    "RiskSummary",
]

Algorithm = Literal["optimal", "mondrian", "heuristic"]

#: ``progress(fraction, stage)``: fraction in [0, 1], stage a short human-readable label.
ProgressCallback = Callable[[float, str], None]


@dataclass
class AnonymizationConfig:
    """What to release and under which privacy model.

    Columns named in ``identifiers`` are dropped; ``quasi_identifiers`` (in this order) are
    generalized with their hierarchies; ``sensitive`` columns are checked by the models on
    sensitive attributes (l-diversity, t-closeness, δ-disclosure, β-likeness) and released
    unchanged; every other column is released unchanged.
    """

    quasi_identifiers: dict[str, Hierarchy]
    model: PrivacyModel = field(default_factory=PrivacyModel)
    sensitive: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)
    #: Hierarchies of sensitive attributes, needed for hierarchical-distance t-closeness.
    sensitive_hierarchies: dict[str, Hierarchy] = field(default_factory=dict)
    algorithm: Algorithm = "optimal"
    #: Optional per-quasi-identifier bounds on the generalization level (optimal search only).
    min_levels: dict[str, int] = field(default_factory=dict)
    max_levels: dict[str, int] = field(default_factory=dict)
    #: Attribute weights in the Loss, per quasi-identifier (ARX's: one given none weighs 0.5,
    #: and each is divided by the largest; see :func:`.metrics.loss_weights`). Empty: equal.
    weights: dict[str, float] = field(default_factory=dict)
    #: Microaggregated quasi-identifiers: column -> "mean", "median", "mode" or "interval"
    #: (:mod:`.microaggregation`). Such a column is not generalized (its hierarchy is not
    #: used): the other quasi-identifiers form the classes, and each released value is its
    #: class's aggregate, as ARX does without clustering. Optimal search only.
    microaggregate: dict[str, str] = field(default_factory=dict)
    #: Seconds after which a too-large lattice search falls back to a reported heuristic; for
    #: ``algorithm="heuristic"`` (:mod:`.lightning`), the seconds it keeps improving.
    time_limit: float | None = None
    #: For ``algorithm="heuristic"``: stop after this many transformations evaluated (None: no
    #: such limit). Unlike the time limit, the result then does not depend on the machine.
    step_limit: int | None = None
    #: Apply these levels (per quasi-identifier; the others are searched) instead of the
    #: optimum, e.g. a candidate of an earlier run. The optimum is still searched, to compare.
    levels: dict[str, int] | None = None
    #: The released rows as a subset of the input, which is then the population table (for
    #: k-map counted in the population and δ-presence). Only these rows are released; the
    #: suppression limit, the suppressed rows, the classes and the metrics refer to them.
    research_subset: ResearchSubset | None = None
    #: Earlier releases of the same rows, by name: each input row's class in that release
    #: (-1 when the release left it out; see :mod:`.cross_release`). Used by the model
    #: :class:`.criteria.EarlierReleases` (every joint class with each of them holds k rows;
    #: with a research subset, only the subset's rows are counted).
    earlier_releases: dict[str, IntArray] = field(default_factory=dict)

    def utility(self) -> dict[str, Any]:
        """The utility controls given (for the report): weights, level limits and
        microaggregation."""
        out: dict[str, Any] = {}
        if self.weights:
            out["weights"] = {q: float(w) for q, w in self.weights.items()}
        if self.microaggregate:
            out["microaggregate"] = dict(self.microaggregate)
        limited = [
            q for q in self.quasi_identifiers if q in self.min_levels or q in self.max_levels
        ]
        if limited:
            out["level_limits"] = {
                q: [
                    int(self.min_levels.get(q, 0)),
                    int(self.max_levels.get(q, self.quasi_identifiers[q].height - 1)),
                ]
                for q in limited
            }
        return out


@dataclass(frozen=True)
class Candidate:
    """A transformation the search evaluated that satisfies the privacy model."""

    levels: dict[str, int]
    loss: float
    highest_risk: float
    suppressed: int
    optimum: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "levels": dict(self.levels),
            "loss": self.loss,
            "highest_risk": self.highest_risk,
            "suppressed": self.suppressed,
            "optimum": self.optimum,
        }


@dataclass
class AnonymizationResult:
    """The extract and everything a privacy officer needs to judge it.

    ``data``: the released rows (identifiers dropped, suppressed rows removed, quasi-identifiers
    generalized), other columns in their original order and unchanged.
    ``source_rows``: for each row of ``data``, its position in the input, so that a released
    row can be shown next to its original.
    ``classes``: one row per equivalence class of the extract: a column per quasi-identifier
    (released value), ``size``, and for each sensitive attribute S the columns
    ``S:distinct_l``, ``S:entropy_l`` and ``S:t`` (the model's distance, equal by default),
    then the models' own per-class measures (see :mod:`.criteria`); ``fails`` holds the names
    of the models the class fails and ``borderline`` those it only just passes (comma
    separated, empty string when none).
    ``models``: per privacy model, its spec, description and achieved values (what the review
    checks read, :func:`.criteria.checks`).
    ``candidates``: the Pareto front (Loss, highest risk, suppressed rows) of the valid
    transformations the search evaluated, lowest Loss first, the optimum flagged;
    ``optimum``: the optimal transformation (differs from ``levels`` when levels were fixed).
    """

    data: pd.DataFrame
    algorithm: str
    levels: dict[str, int] | None
    heights: dict[str, int]
    rows_in: int
    rows_out: int
    suppressed: int
    classes: pd.DataFrame
    achieved_k: int
    achieved_l: dict[str, float]
    achieved_t: dict[str, float]
    metrics: dict[str, Any]
    risk_before: RiskSummary
    risk_after: RiskSummary
    transformations_checked: int
    seconds: float
    heuristic: bool = False
    source_rows: IntArray | None = None
    model: PrivacyModel | None = None
    models: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    optimum: Candidate | None = None
    levels_fixed: bool = False
    warnings: list[str] = field(default_factory=list)
    #: Sizes of the input's equivalence classes on the quasi-identifiers (what the risk
    #: before release is measured on), for the class-size chart's "before".
    class_sizes_before: IntArray | None = None
    #: With a research subset: the rows of the population table (``rows_in`` counts the
    #: subset's rows, which alone are released).
    population_rows: int | None = None
    #: The utility controls the search ran under: ``weights`` (per quasi-identifier, as given)
    #: ``level_limits`` (``{column: [min, max]}``) and ``microaggregate`` (``{column:
    #: function}``, columns not generalized and absent from ``levels``); empty when none.
    utility: dict[str, Any] = field(default_factory=dict)
    #: For the heuristic search: its limits, the transformations it evaluated, why it stopped,
    #: whether its result is proven optimal and, when the optimum is known, the Loss gap
    #: (see :func:`.api.heuristic_summary`); empty for the other algorithms.
    search: dict[str, Any] = field(default_factory=dict)
    #: With SafePub: ε, δ, k, β, the search mode and ε_search, the seed, the input's rows and
    #: the rows sampled (see :mod:`.safepub`); None otherwise.
    safepub: dict[str, Any] | None = None

    def report(self) -> dict[str, Any]:
        """A JSON-serialisable summary (the command line's ``--report`` and the stored summary)."""
        return {
            "algorithm": self.algorithm,
            "heuristic": self.heuristic,
            "levels": self.levels,
            "heights": self.heights,
            "rows_in": self.rows_in,
            "population_rows": self.population_rows,
            "rows_out": self.rows_out,
            "suppressed": self.suppressed,
            "classes": int(len(self.classes)),
            "achieved": {"k": self.achieved_k, "l": self.achieved_l, "t": self.achieved_t},
            "privacy_model": None if self.model is None else self.model.to_spec(),
            "description": None if self.model is None else self.model.describe(),
            "models": self.models,
            "metrics": self.metrics,
            "risk_before": self.risk_before.as_dict(),
            "risk_after": self.risk_after.as_dict(),
            "levels_fixed": self.levels_fixed,
            "optimum": None if self.optimum is None else self.optimum.as_dict(),
            "candidates": [c.as_dict() for c in self.candidates],
            "transformations_checked": self.transformations_checked,
            "seconds": self.seconds,
            "warnings": list(self.warnings),
            "utility": self.utility,
            "search": self.search,
            "safepub": self.safepub,
        }
