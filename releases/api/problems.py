"""Errors of the API as ``application/problem+json`` (RFC 9457): type, title, status, detail."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.http import HttpResponse, JsonResponse
from ninja import Schema

CONTENT_TYPE = "application/problem+json"


class Problem(Schema):
    """What every refusal of the API holds (``errors``: each field's messages, on a 400)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: dict[str, list[str]] | None = None


class ApiError(Exception):
    """Raised by an endpoint to answer ``status`` with ``detail`` (and the fields' errors)."""

    def __init__(
        self, status: int, detail: str, errors: dict[str, list[str]] | None = None
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors


def problem(
    status: int, detail: str, errors: dict[str, list[str]] | None = None, **headers: str
) -> HttpResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = errors
    response = JsonResponse(body, status=status, content_type=CONTENT_TYPE)
    response["Cache-Control"] = "no-store"
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def form_errors(form) -> dict[str, list[str]]:
    """A Django form's errors by field (``__all__`` for the form's own)."""
    return {
        field: [str(message) for message in messages] for field, messages in form.errors.items()
    }


def first_error(errors: dict[str, list[str]]) -> str:
    """The sentence a 400 leads with: the form's own error, else the first field's."""
    if errors.get("__all__"):
        return errors["__all__"][0]
    for field, messages in errors.items():
        if messages:
            return f"{field}: {messages[0]}"
    return "The request is not valid."
