"""Values the whole engine shares. Imports nothing: with :mod:`.errors`, the bottom layer."""

from __future__ import annotations

__all__ = ["SUPPRESSED_VALUE"]

#: The value of a fully generalized cell (top level of every hierarchy).
SUPPRESSED_VALUE = "*"
