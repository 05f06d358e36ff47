"""Data the release workflow keeps: datasets, their column tags, release requests, results.

Models hold data and small invariants; the workflow itself lives in ``releases.services``.
"""

from .audit import AuditEvent
from .datasets import Dataset, DatasetColumn, Role
from .outbox import OutboxMessage
from .requests import EquivalenceClass, ReleaseRequest, ReleaseRound, Review

__all__ = [
    "AuditEvent",
    "Dataset",
    "DatasetColumn",
    "EquivalenceClass",
    "OutboxMessage",
    "ReleaseRequest",
    "ReleaseRound",
    "Review",
    "Role",
]
