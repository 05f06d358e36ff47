"""The API itself: one NinjaAPI under ``/api/v1/``, bearer tokens on every endpoint, the rate
limit, and every refusal as ``application/problem+json`` with the pages' sentences."""

from __future__ import annotations

import functools
import logging
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Swagger
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError
from ninja.openapi.schema import OpenAPISchema

from releases.api import (
    audit,
    datasets,
    recipes,
    releases,
    requests,
    reviews,
    statistics,
    tokens,
    webhooks,
)
from releases.api.auth import BearerToken, TokenRateThrottle
from releases.api.problems import CONTENT_TYPE, ApiError, problem
from releases.core.errors import InvalidInput

logger = logging.getLogger(__name__)

DOCS_URL = "/docs"
OPENAPI_URL = "/openapi.json"


def _signed_in_or_token(view):
    """The schema and its docs page: for a signed-in person (the browser) or a valid token
    (a client reading the schema). Neither holds data."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token:
            try:
                tokens.authenticate(token.strip())
            except tokens.TokenRefused as exc:
                return problem(401, str(exc))
            return view(request, *args, **kwargs)
        if request.path.endswith(DOCS_URL):
            return redirect_to_login(request.get_full_path())
        return problem(401, "Send an API token as Authorization: Bearer <token>.")

    wrapper.login_required = False  # type: ignore[attr-defined]  # checked here instead
    return wrapper


class Api(NinjaAPI):
    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> OpenAPISchema:
        """The generated schema, with refusals served as problem+json."""
        schema = super().get_openapi_schema(*args, **kwargs)
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if str(status).startswith(("4", "5")) and "application/json" in content:
                        content[CONTENT_TYPE] = content.pop("application/json")
        return schema


api = Api(
    title="Anonymizer API",
    version="1",
    description="Everything the pages do, for pipelines: upload, tag, request, review, "
    "download. Authenticate with a personal access token: `Authorization: Bearer <token>`. "
    "See docs/api.md.",
    auth=BearerToken(),
    throttle=TokenRateThrottle(),
    urls_namespace="api",
    docs=Swagger(),
    docs_url=DOCS_URL,
    openapi_url=OPENAPI_URL,
    docs_decorator=_signed_in_or_token,
)

api.add_router("/datasets", datasets.router)
api.add_router("/", requests.router)
api.add_router("/", reviews.router)
api.add_router("/", releases.router)
api.add_router("/", statistics.router)
api.add_router("/", audit.router)
api.add_router("/", recipes.router)
api.add_router("/", webhooks.router)


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return problem(exc.status, exc.detail, exc.errors)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return problem(401, "Send an API token as Authorization: Bearer <token>.")


@api.exception_handler(Throttled)
def _throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
    return problem(429, "Too many requests with this API token; try again later.")


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return problem(404, str(exc) or "Not found.")


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return problem(403, str(exc) or "You may not do this.")


@api.exception_handler(InvalidInput)
def _invalid(request: HttpRequest, exc: InvalidInput) -> HttpResponse:
    return problem(400, str(exc))


@api.exception_handler(ValidationError)
def _validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors: dict[str, list[str]] = {}
    for error in exc.errors:
        where = ".".join(str(part) for part in error.get("loc", ()))
        errors.setdefault(where or "__all__", []).append(str(error.get("msg", "Not valid.")))
    detail = "; ".join(f"{field}: {messages[0]}" for field, messages in errors.items())
    return problem(400, detail or "The request is not valid.", errors)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return problem(exc.status_code, str(exc))


@api.exception_handler(Exception)
def _fault(request: HttpRequest, exc: Exception) -> HttpResponse:
    # A fault of ours, logged with its stack trace; the client gets no trace.
    logger.exception("API call %s %s failed", request.method, request.path)
    return problem(500, "The server failed to answer; the fault is logged.")
