"""Data the release workflow keeps: datasets, their column tags, release requests, results.

Models hold data and small invariants; the workflow itself lives in the feature packages (``releases.datasets``, ``releases.requests``,
``releases.review``, ``releases.statistics``).
"""

from .attacker import AttackerFile
from .audit import AuditEvent
from .datasets import RELEASED_ROLES, UNCHANGED_ROLES, Dataset, DatasetColumn, Role
from .events import (
    Notification,
    NotificationPreference,
    RequestEvent,
    WebhookDelivery,
    WebhookEndpoint,
)
from .logins import UsernameLock
from .outbox import OutboxMessage
from .package import ReleaseFile, Reproduction, TermsAcceptance
from .privacy_budget import BudgetEntry, PrivacyBudget
from .projects import Membership, Project, SsoIdentity
from .recipes import Recipe
from .requests import EquivalenceClass, ReleaseRequest, ReleaseRound, Review, ShuffleScheme
from .tokens import ApiToken

__all__ = [
    "ApiToken",
    "AttackerFile",
    "AuditEvent",
    "BudgetEntry",
    "Dataset",
    "DatasetColumn",
    "EquivalenceClass",
    "Notification",
    "NotificationPreference",
    "Membership",
    "OutboxMessage",
    "PrivacyBudget",
    "Project",
    "RELEASED_ROLES",
    "UNCHANGED_ROLES",
    "Recipe",
    "ReleaseFile",
    "ReleaseRequest",
    "ReleaseRound",
    "RequestEvent",
    "Reproduction",
    "Review",
    "Role",
    "ShuffleScheme",
    "SsoIdentity",
    "TermsAcceptance",
    "UsernameLock",
    "WebhookDelivery",
    "WebhookEndpoint",
]
