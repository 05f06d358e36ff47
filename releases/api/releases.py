"""Releases over the API: what a recipient (or the requester) receives, the terms' acceptance,
and the download, streamed and hashed as it goes with the approved SHA-256 in
``X-Content-SHA256`` (the page's ``downloads`` service: the same checks and audit rows)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, StreamingHttpResponse
from django.utils.http import content_disposition_header
from ninja import Query, Router

from releases.api.common import ERRORS, page, refused_as, user_of
from releases.api.problems import ApiError, Problem
from releases.api.schemas import PageParams, ReleaseOut, ReleasePage, TermsOut
from releases.models import ReleaseFile, ReleaseRequest
from releases.requests import downloads, selectors, services

router = Router(tags=["releases"])

DOWNLOAD_RESPONSES = {
    "responses": {
        200: {
            "description": "The file's bytes; its SHA-256 in X-Content-SHA256.",
            "headers": {
                "X-Content-SHA256": {
                    "schema": {"type": "string"},
                    "description": "The approved SHA-256 of the file (hex).",
                }
            },
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    }
}


def release_out(user, release_request: ReleaseRequest) -> dict[str, Any]:
    return {
        "id": release_request.pk,
        "kind": release_request.kind,
        "state": release_request.effective_state,
        "state_label": release_request.effective_state_label,
        "decided_at": release_request.decided_at,
        "expires_at": release_request.expires_at,
        "terms": release_request.terms,
        "terms_accepted": selectors.terms_acceptance(user, release_request) is not None,
        "files": [
            {
                "format": f.format,
                "size_bytes": f.size_bytes,
                "sha256": f.sha256,
                "content_type": f.content_type,
            }
            for f in selectors.round_files(release_request)
        ],
    }


def _released(user, request_id: int) -> ReleaseRequest:
    """A release the caller receives or requested (as the release list has them)."""
    release_request = selectors.releases_for(user).filter(pk=request_id).first()
    if release_request is None:
        raise ApiError(404, "No such release.")
    return release_request


@router.get("/releases", response={200: ReleasePage, ERRORS: Problem})
def list_releases(request: HttpRequest, params: Query[PageParams]):
    """Approved releases the caller receives or requested (also once revoked or expired)."""
    user = user_of(request)
    return page(selectors.releases_for(user), params, lambda r: release_out(user, r))


@router.get("/releases/{request_id}", response={200: ReleaseOut, ERRORS: Problem})
def release_detail(request: HttpRequest, request_id: int):
    """A release's state, terms (accepted or not) and files with their SHA-256."""
    user = user_of(request)
    return release_out(user, _released(user, request_id))


@router.post("/releases/{request_id}/terms", response={200: TermsOut, ERRORS: Problem})
def accept_terms(request: HttpRequest, request_id: int):
    """Accept the release's terms of use (needed once before the first download)."""
    user = user_of(request)
    selectors.get_request_for(user, request_id)
    with refused_as(409):
        acceptance = services.accept_terms(user, request_id)
    return {
        "request_id": request_id,
        "terms_sha256": acceptance.terms_sha256,
        "accepted_at": acceptance.accepted_at,
    }


@router.get(
    "/releases/{request_id}/files/{fmt}",
    response={ERRORS | {410}: Problem},
    openapi_extra=DOWNLOAD_RESPONSES,
)
def download(request: HttpRequest, request_id: int, fmt: str):
    """Download one file of the release (``csv``, ``xlsx`` or ``parquet``), streamed."""
    user = user_of(request)
    if fmt not in ReleaseFile.Format.values:
        raise ApiError(404, "This release has no such file.")
    try:
        with refused_as(409):  # not now: the state, or the terms not yet accepted
            prepared = downloads.open_download(user, request_id, fmt)
    except downloads.DownloadUnavailable as exc:
        raise ApiError(exc.status, str(exc)) from None
    response = StreamingHttpResponse(
        downloads.verified_stream(user, prepared), content_type=prepared.content_type
    )
    response["Content-Disposition"] = content_disposition_header(True, prepared.filename)
    response["Content-Length"] = str(prepared.size_bytes)
    response["X-Content-SHA256"] = prepared.sha256
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response
