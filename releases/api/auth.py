"""Who calls the API: a personal access token in ``Authorization: Bearer <token>``, never a
session cookie (so no CSRF: nothing is authenticated by what a browser sends by itself), and
how often a token may call it."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from ninja.security import HttpBearer
from ninja.throttling import AnonRateThrottle, AuthRateThrottle

from releases.accounts.throttle import client_address
from releases.api import tokens
from releases.api.problems import ApiError
from releases.models import ApiToken

#: Methods that only read; any other needs a token of the write scope.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class BearerToken(HttpBearer):
    """The token's owner acts, with exactly their roles; a read-only token only reads.

    Calls without a valid token are counted per address at ``API_RATE_LIMIT`` too: past it
    they get 429 instead of 401 (guessing tokens is throttled like using them)."""

    def __call__(self, request: HttpRequest) -> ApiToken | None:
        try:
            row = super().__call__(request)
        except ApiError as exc:
            if exc.status == 401:
                _refused_call(request)
            raise
        if row is None:
            _refused_call(request)
        return row

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken:
        try:
            row = tokens.authenticate(token.strip())
        except tokens.TokenRefused as exc:
            raise ApiError(401, str(exc)) from None
        if request.method not in READ_METHODS and not row.can_write:
            tokens.refuse_write(row, request.method or "", request.path)
            raise ApiError(
                403, "This API token is read-only; a write needs a token of the write scope."
            )
        # Whatever the session says, the API acts as the token's owner.
        request.user = row.user
        return row


def _refused_call(request: HttpRequest) -> None:
    if not RefusedCallThrottle().allow_request(request):
        raise ApiError(429, "Too many requests without a valid API token; try again later.")


class ByClientAddress:
    """The caller's address as the sign-in throttle takes it (``accounts.throttle``): the
    socket's, or behind ``BEHIND_TLS_PROXY`` the one the proxy appended; never a client's own
    X-Forwarded-For, which would let it pick a fresh address for each call."""

    def get_ident(self, request: HttpRequest) -> str | None:
        return client_address(request)


class TokenRateThrottle(ByClientAddress, AuthRateThrottle):
    """At most ``API_RATE_LIMIT`` requests per token (per address without a valid token),
    the rate read from the settings at each request."""

    def __init__(self) -> None:
        super().__init__(rate=settings.API_RATE_LIMIT)

    def allow_request(self, request: HttpRequest) -> bool:
        self.rate = settings.API_RATE_LIMIT
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request)


class RefusedCallThrottle(ByClientAddress, AnonRateThrottle):
    """Calls refused for want of a valid token, per address."""

    scope = "api_refused"

    def __init__(self) -> None:
        super().__init__(rate=settings.API_RATE_LIMIT)

    def get_cache_key(self, request: HttpRequest) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
