"""Data the release workflow keeps: datasets, their column tags, release requests, results.

Models hold data and small invariants; the workflow itself lives in the feature packages (``releases.datasets``, ``releases.requests``,
``releases.review``, ``releases.statistics``).
"""

from .attacker import AttackerFile
from .audit import AuditEvent
from .datasets import RELEASED_ROLES, UNCHANGED_ROLES, Dataset, DatasetColumn, Role
from .logins import UsernameLock
from .outbox import OutboxMessage
from .package import ReleaseFile, Reproduction, TermsAcceptance
from .privacy_budget import BudgetEntry, PrivacyBudget
from .projects import Membership, Project, SsoIdentity
from .requests import EquivalenceClass, ReleaseRequest, ReleaseRound, Review
from .tokens import ApiToken

__all__ = [
    "ApiToken",
    "AttackerFile",
    "AuditEvent",
    "BudgetEntry",
    "Dataset",
    "DatasetColumn",
    "EquivalenceClass",
    "Membership",
    "OutboxMessage",
    "PrivacyBudget",
    "Project",
    "RELEASED_ROLES",
    "UNCHANGED_ROLES",
    "ReleaseFile",
    "ReleaseRequest",
    "ReleaseRound",
    "Reproduction",
    "Review",
    "Role",
    "SsoIdentity",
    "TermsAcceptance",
    "UsernameLock",
]
