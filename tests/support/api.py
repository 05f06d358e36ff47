"""Calling the HTTP API in tests: a token for a person, a client that sends it, and the work
the API queues run at once (eager Celery, on commit) as a worker would."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.test import Client

from anonymizer_site.celery import app as celery_app
from releases.api import tokens
from releases.models import ApiToken


def token_for(user, scope: str = ApiToken.Scope.WRITE, **kwargs) -> str:
    return tokens.create_token(user, f"{user.get_username()} {scope}", scope, **kwargs).token


def client_for(token: str) -> Client:
    """A client that sends ``token`` as a bearer token (no session, no CSRF token)."""
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token}")


@contextlib.contextmanager
def eager_celery() -> Iterator[None]:
    """Tasks sent through the outbox run in this process when sent."""
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = before
