"""The privacy models, by name: the one list the request form, the command line, the stored
JSON, the search and the review checks are generated from.

A new model is a module of this package (a :class:`.base.Criterion`), its tests, and one line
in :data:`REGISTRY` below (with its import). Models that need more than their parameters (the
earlier releases a release is judged with) are in :data:`LINKED`: stored and read back like the
others, never offered as a choice of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import EngineError
from .average_risk import AverageRisk
from .base import Criterion
from .beta_likeness import BetaLikeness
from .delta_disclosure import DeltaDisclosure
from .delta_presence import DeltaPresence
from .earlier_releases import EarlierReleases
from .highest_risk import HighestRisk
from .k_anonymity import KAnonymity
from .k_map import KMap
from .l_diversity import LDiversity
from .population_uniqueness import PopulationUniqueness
from .safepub import SafePub
from .t_closeness import TCloseness

__all__ = ["LINKED", "REGISTRY", "criterion_from_spec"]


def _by_name(*models: type[Criterion]) -> dict[str, type[Criterion]]:
    names = [m.name for m in models]
    if len(set(names)) != len(names) or not all(names):
        raise RuntimeError(f"privacy model names must be set and distinct: {names}")
    return dict(zip(names, models, strict=True))


#: Every privacy model, by name, in the order forms and help list them.
REGISTRY: dict[str, type[Criterion]] = _by_name(
    KAnonymity,
    LDiversity,
    TCloseness,
    DeltaDisclosure,
    BetaLikeness,
    HighestRisk,
    AverageRisk,
    PopulationUniqueness,
    KMap,
    DeltaPresence,
    SafePub,
)

#: Models built from the data of earlier releases, by name (not offered in forms or options).
LINKED: dict[str, type[Criterion]] = _by_name(
    EarlierReleases,
)


def criterion_from_spec(spec: Mapping[str, Any]) -> Criterion:
    """A criterion from ``{"model": name, **parameters}``."""
    if not isinstance(spec, Mapping) or "model" not in spec:
        raise EngineError("Each privacy model needs its name ('model').")
    kind = REGISTRY.get(str(spec["model"])) or LINKED.get(str(spec["model"]))
    if kind is None:
        raise EngineError(f"Unknown privacy model {spec['model']!r}.")
    return kind(**{k: v for k, v in spec.items() if k != "model"})
