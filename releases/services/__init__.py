"""Business operations of the release workflow (moving to the feature packages)."""

from releases.core.errors import InvalidInput

__all__ = ["InvalidInput"]
