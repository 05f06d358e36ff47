"""Anonymization engine: k-anonymity, l-diversity, t-closeness, δ-disclosure, β-likeness and
re-identification risk models on pandas DataFrames.

Pure Python on pandas, numpy and scipy; nothing here imports Django. Entry point:
:func:`anonymize`; the privacy models are defined in :mod:`.criteria`.
"""

from .api import anonymize, parse_levels, validate_config
from .criteria import POPULATION_PARAMS, REGISTRY, Check, Criterion, ParamSpec, checks
from .hierarchy import Hierarchy
from .risk import PopulationModel
from .subset import ResearchSubset
from .types import (
    SUPPRESSED_VALUE,
    AnonymizationConfig,
    AnonymizationResult,
    Candidate,
    EngineError,
    HierarchyError,
    PrivacyModel,
    ProgressCallback,
    RiskSummary,
)

#: Hierarchy builders, also available as ``Hierarchy.<name>``.
intervals = Hierarchy.intervals
dates = Hierarchy.dates
masking = Hierarchy.masking
categorical = Hierarchy.categorical
automatic = Hierarchy.automatic
from_arx_csv = Hierarchy.from_arx_csv

__all__ = [
    "POPULATION_PARAMS",
    "REGISTRY",
    "SUPPRESSED_VALUE",
    "AnonymizationConfig",
    "AnonymizationResult",
    "Candidate",
    "Check",
    "Criterion",
    "EngineError",
    "Hierarchy",
    "HierarchyError",
    "ParamSpec",
    "PopulationModel",
    "PrivacyModel",
    "ProgressCallback",
    "ResearchSubset",
    "RiskSummary",
    "anonymize",
    "checks",
    "parse_levels",
    "automatic",
    "categorical",
    "dates",
    "from_arx_csv",
    "intervals",
    "masking",
    "validate_config",
]
