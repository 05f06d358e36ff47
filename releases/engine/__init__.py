"""Anonymization engine: k-anonymity, l-diversity and t-closeness on pandas DataFrames.

Pure Python on pandas and numpy; nothing here imports Django. Entry point: :func:`anonymize`.
"""

from .api import anonymize, validate_config
from .hierarchy import Hierarchy
from .types import (
    SUPPRESSED_VALUE,
    AnonymizationConfig,
    AnonymizationResult,
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
    "SUPPRESSED_VALUE",
    "AnonymizationConfig",
    "AnonymizationResult",
    "EngineError",
    "Hierarchy",
    "HierarchyError",
    "PrivacyModel",
    "ProgressCallback",
    "RiskSummary",
    "anonymize",
    "automatic",
    "categorical",
    "dates",
    "from_arx_csv",
    "intervals",
    "masking",
    "validate_config",
]
