"""Errors a feature raises for the person who acted.

Each operation checks the acting user's permission itself, raising ``PermissionDenied`` (403)
for a forbidden action and ``Http404`` for an object outside the user's reach;
``InvalidInput`` carries a message meant for the person who gave the input.
"""


class InvalidInput(Exception):
    """Input that cannot be accepted; the message says why, for the user."""
