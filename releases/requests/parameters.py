"""How an extract's round is made (stored on the request): the privacy model, the algorithm,
fixed generalization levels, and the earlier releases a protecting search keeps safe."""

from __future__ import annotations

from dataclasses import dataclass

from releases.engine import PrivacyModel
from releases.models import ReleaseRequest


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

    def __init__(
        self,
        model: PrivacyModel | None = None,
        algorithm: str = "optimal",
        levels: dict[str, int] | None = None,
        earlier_releases: tuple[int, ...] | list[int] = (),
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
        return out

    def with_levels(self, levels: dict[str, int] | None) -> ReleaseParameters:
        return ReleaseParameters(self.model, self.algorithm, levels, self.earlier_releases)
