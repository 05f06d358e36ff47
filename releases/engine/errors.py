"""The engine's errors: messages are written for the person who gave the input."""

from __future__ import annotations


class EngineError(ValueError):
    """Bad input or configuration. The message is written for the person who gave it."""


class HierarchyError(EngineError):
    """A generalization hierarchy is malformed or does not cover the data."""
