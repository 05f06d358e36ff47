"""Dataclasses the engine speaks: a privacy model and configuration in, a result out.

This module is the engine's public contract: the Celery task, the services layer and the
``anonymize`` management command build an :class:`AnonymizationConfig` and read an
:class:`AnonymizationResult`. Nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from .hierarchy import Hierarchy

#: The value of a fully generalized cell (top level of every hierarchy).
SUPPRESSED_VALUE = "*"

LDiversityVariant = Literal["distinct", "entropy", "recursive"]
TDistance = Literal["equal", "ordered", "hierarchical"]
Algorithm = Literal["optimal", "mondrian"]

#: ``progress(fraction, stage)``: fraction in [0, 1], stage a short human-readable label.
ProgressCallback = Callable[[float, str], None]


class EngineError(ValueError):
    """Bad input or configuration. The message is written for the person who gave it."""


class HierarchyError(EngineError):
    """A generalization hierarchy is malformed or does not cover the data."""


@dataclass(frozen=True)
class PrivacyModel:
    """The privacy models a release must satisfy, in any combination.

    ``k``: every equivalence class has at least k rows.
    ``l`` (with ``l_variant`` and, for recursive (c,l)-diversity, ``c``): each class holds
    well-represented values of every sensitive attribute.
    ``t`` (with ``t_distance``): the distribution of every sensitive attribute in each class
    is within Earth Mover's Distance t of its distribution in the whole table.
    ``suppression_limit``: the share of input rows (0 to 1) that may be removed.
    """

    k: int = 1
    l: float | None = None  # noqa: E741 - the field's own name for it
    l_variant: LDiversityVariant = "distinct"
    c: float | None = None
    t: float | None = None
    t_distance: TDistance = "equal"
    suppression_limit: float = 0.0

    def validate(self) -> None:
        if int(self.k) != self.k or self.k < 1:
            raise EngineError(f"k must be a whole number of at least 1, not {self.k!r}.")
        if not 0.0 <= self.suppression_limit <= 1.0:
            raise EngineError(
                "The suppression limit is a share of rows between 0 and 1, "
                f"not {self.suppression_limit!r}."
            )
        if self.l is not None:
            if self.l_variant not in ("distinct", "entropy", "recursive"):
                raise EngineError(f"Unknown l-diversity variant {self.l_variant!r}.")
            if self.l < 1 or (self.l_variant != "entropy" and int(self.l) != self.l):
                raise EngineError(f"l must be a whole number of at least 1, not {self.l!r}.")
            if self.l_variant == "recursive" and (self.c is None or self.c <= 0):
                raise EngineError("Recursive (c,l)-diversity needs a positive c.")
        if self.t is not None:
            if not 0.0 <= self.t <= 1.0:
                raise EngineError(f"t must be between 0 and 1, not {self.t!r}.")
            if self.t_distance not in ("equal", "ordered", "hierarchical"):
                raise EngineError(f"Unknown t-closeness distance {self.t_distance!r}.")


@dataclass
class AnonymizationConfig:
    """What to release and under which privacy model.

    Columns named in ``identifiers`` are dropped; ``quasi_identifiers`` (in this order) are
    generalized with their hierarchies; ``sensitive`` columns are checked by l-diversity and
    t-closeness and released unchanged; every other column is released unchanged.
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
    #: Seconds after which a too-large lattice search falls back to a reported heuristic.
    time_limit: float | None = None


@dataclass(frozen=True)
class RiskSummary:
    """Re-identification risk under the prosecutor model (formulas in ``risk.py``)."""

    highest: float
    average: float
    records_at_risk: float
    sample_uniques: float
    threshold: float = 0.2

    def as_dict(self) -> dict[str, float]:
        return {
            "highest": self.highest,
            "average": self.average,
            "records_at_risk": self.records_at_risk,
            "sample_uniques": self.sample_uniques,
            "threshold": self.threshold,
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
    ``S:distinct_l``, ``S:entropy_l`` and ``S:t``; ``fails`` holds the names of the models the
    class fails (empty string when none; only non-empty for classes of a heuristic result).
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
    source_rows: np.ndarray | None = None

    def report(self) -> dict[str, Any]:
        """A JSON-serialisable summary (the command line's ``--report`` and the stored summary)."""
        return {
            "algorithm": self.algorithm,
            "heuristic": self.heuristic,
            "levels": self.levels,
            "heights": self.heights,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "suppressed": self.suppressed,
            "classes": int(len(self.classes)),
            "achieved": {"k": self.achieved_k, "l": self.achieved_l, "t": self.achieved_t},
            "metrics": self.metrics,
            "risk_before": self.risk_before.as_dict(),
            "risk_after": self.risk_after.as_dict(),
            "transformations_checked": self.transformations_checked,
            "seconds": self.seconds,
        }
