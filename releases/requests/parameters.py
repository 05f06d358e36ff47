"""How an extract's round is made (stored on the request): the privacy model, the algorithm,
fixed generalization levels, the earlier releases a protecting search keeps safe, and the
utility controls (attribute weights, level limits, microaggregation)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from releases.engine import PrivacyModel
from releases.models import ReleaseRequest

#: The heuristic search's time limit on these pages: its default and its largest (seconds).
DEFAULT_TIME_LIMIT = 10
MAX_TIME_LIMIT = 3600
#: From this many quasi-identifiers on, the request form suggests the heuristic search (the
#: optimal search's lattice grows with the product of the hierarchies' heights).
HEURISTIC_SUGGESTED_FROM = 15


@dataclass(frozen=True, init=False)
class ReleaseParameters:
    """How a round is made: the privacy model (the engine's: criteria, suppression limit,
    population), the algorithm, and generalization levels to apply instead of the optimum
    (a candidate of an earlier round; ``None``: search), and the earlier released extracts
    (request ids) whose joint classes with this one the search keeps at k or more, when the
    model protects earlier releases (``criteria.EarlierReleases``): named here, so that a
    reproduction searches with the same ones."""

    model: PrivacyModel
    algorithm: str = "optimal"
    levels: dict[str, int] | None = None
    earlier_releases: tuple[int, ...] = ()
    #: The utility controls: attribute weights in the Loss, and per quasi-identifier the
    #: lowest and highest level the search may choose (``{column: (min, max)}``, either None).
    weights: dict[str, float] | None = None
    level_limits: dict[str, tuple[int | None, int | None]] | None = None
    #: Microaggregated quasi-identifiers: column -> "mean", "median", "mode" or "interval".
    microaggregate: dict[str, str] | None = None
    #: The heuristic search's time limit in seconds (None for the other algorithms).
    time_limit: float | None = None

    def __init__(
        self,
        model: PrivacyModel | None = None,
        algorithm: str = "optimal",
        levels: dict[str, int] | None = None,
        earlier_releases: tuple[int, ...] | list[int] = (),
        weights: dict[str, float] | None = None,
        level_limits: dict[str, Any] | None = None,
        microaggregate: dict[str, str] | None = None,
        time_limit: float | None = None,
        **keywords,
    ) -> None:
        """``keywords`` build the model with the engine's keyword constructor instead
        (``ReleaseParameters(k=5, suppression_limit=0.05)``)."""
        if model is None:
            model = PrivacyModel(**keywords)
        elif keywords:
            raise TypeError("Give a PrivacyModel or the keywords of one, not both.")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "algorithm", algorithm or "optimal")
        object.__setattr__(self, "levels", dict(levels) if levels else None)
        object.__setattr__(self, "earlier_releases", tuple(int(i) for i in earlier_releases))
        object.__setattr__(
            self, "weights", {k: float(v) for k, v in weights.items()} if weights else None
        )
        limits = {
            k: (None if lo is None else int(lo), None if hi is None else int(hi))
            for k, (lo, hi) in (level_limits or {}).items()
            if lo is not None or hi is not None
        }
        object.__setattr__(self, "level_limits", limits or None)
        object.__setattr__(
            self,
            "microaggregate",
            {str(k): str(v) for k, v in (microaggregate or {}).items()} or None,
        )
        object.__setattr__(self, "time_limit", None if time_limit is None else float(time_limit))

    @classmethod
    def of(cls, release_request: ReleaseRequest) -> ReleaseParameters:
        return cls.from_json(release_request.parameters)

    @classmethod
    def from_json(cls, data: dict) -> ReleaseParameters:
        """From :meth:`to_json` (``EngineError`` when the stored model is not valid)."""
        return cls(
            PrivacyModel.from_spec((data or {}).get("model") or {}),
            (data or {}).get("algorithm") or "optimal",
            (data or {}).get("levels") or None,
            (data or {}).get("earlier_releases") or (),
            (data or {}).get("weights") or None,
            (data or {}).get("level_limits") or None,
            (data or {}).get("microaggregate") or None,
            (data or {}).get("time_limit"),
        )

    def to_json(self) -> dict:
        """What ``ReleaseRequest.parameters`` stores (the earlier releases only when some are
        protected)."""
        out: dict = {
            "model": self.model.to_spec(),
            "algorithm": self.algorithm,
            "levels": self.levels,
        }
        if self.earlier_releases:
            out["earlier_releases"] = list(self.earlier_releases)
        if self.weights:
            out["weights"] = dict(self.weights)
        if self.level_limits:
            out["level_limits"] = {k: list(v) for k, v in self.level_limits.items()}
        if self.microaggregate:
            out["microaggregate"] = dict(self.microaggregate)
        if self.time_limit is not None:
            out["time_limit"] = self.time_limit
        return out

    def with_levels(self, levels: dict[str, int] | None) -> ReleaseParameters:
        return dataclasses.replace(self, levels=levels)

    def min_levels(self) -> dict[str, int]:
        return {k: lo for k, (lo, _) in (self.level_limits or {}).items() if lo is not None}

    def max_levels(self) -> dict[str, int]:
        return {k: hi for k, (_, hi) in (self.level_limits or {}).items() if hi is not None}
