"""The four-eyes rule's number: how many officers must approve a round. Who may vote, and when,
is the request's lifecycle (``requests.rules``); nobody reviews their own request."""

from __future__ import annotations

from django.conf import settings


def required_approvals() -> int:
    return max(1, int(getattr(settings, "REQUIRED_APPROVALS", 1)))
