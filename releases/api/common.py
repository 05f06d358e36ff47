"""What the API's routers share: a page of a list, a request as the API shows it, the people a
release names (by user name, as the form's choices), and turning a refusal into its status."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest

from releases.api.problems import ApiError
from releases.api.schemas import PageParams
from releases.core.errors import InvalidInput
from releases.models import ReleaseRequest
from releases.requests import selectors as request_selectors

#: The refusals every endpoint may answer (problem+json), besides its own.
ERRORS = frozenset({400, 401, 403, 404, 409, 429})


def user_of(request: HttpRequest):
    """The token's owner (set by the authentication, whatever a session cookie says)."""
    return request.auth.user  # type: ignore[attr-defined]


def page(queryset: QuerySet | list, params: PageParams, convert) -> dict[str, Any]:
    items = queryset[params.offset : params.offset + params.limit]
    count = queryset.count() if isinstance(queryset, QuerySet) else len(queryset)
    return {
        "count": count,
        "limit": params.limit,
        "offset": params.offset,
        "items": [convert(item) for item in items],
    }


def request_out(release_request: ReleaseRequest) -> dict[str, Any]:
    flags = request_selectors.status_flags(release_request)
    return {
        "id": release_request.pk,
        "kind": release_request.kind,
        "dataset_id": release_request.dataset_id,
        "state": release_request.effective_state,
        "state_label": release_request.effective_state_label,
        "round": release_request.round,
        "stage": release_request.stage,
        "progress": release_request.progress,
        "error": release_request.error,
        "requested_by": release_request.requested_by.get_username(),
        "created_at": release_request.created_at,
        "submitted_at": release_request.submitted_at,
        "decided_at": release_request.decided_at,
        "expires_at": release_request.expires_at,
        **flags,
    }


def recipient_ids(field: str, usernames: list[str]) -> list[str]:
    """The form's values for people named by user name; an unknown name is refused (400)."""
    chosen = {u.get_username(): str(u.pk) for u in request_selectors.recipient_choices()}
    unknown = [name for name in usernames if name not in chosen]
    if unknown:
        raise ApiError(
            400,
            f"{', '.join(unknown)}: not a recipient who can be named on a release.",
            {field: ["Unknown recipient: " + ", ".join(unknown)]},
        )
    return [chosen[name] for name in usernames]


def group_ids(field: str, names: list[str]) -> list[str]:
    chosen = {g.name: str(g.pk) for g in request_selectors.recipient_group_choices()}
    unknown = [name for name in names if name not in chosen]
    if unknown:
        raise ApiError(
            400,
            f"{', '.join(unknown)}: not a group a release can be shared with.",
            {field: ["Unknown group: " + ", ".join(unknown)]},
        )
    return [chosen[name] for name in names]


@contextlib.contextmanager
def refused_as(status: int) -> Iterator[None]:
    """A service's ``InvalidInput`` answered with ``status``: 409 for an action the request's
    state or conditions do not allow now, 400 for input that cannot be accepted."""
    try:
        yield
    except InvalidInput as exc:
        raise ApiError(status, str(exc)) from None
