"""Downloads of approved extracts and their release reports: checked and logged."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import PurePath

from django.core.exceptions import PermissionDenied

from ..models import AuditEvent, ReleaseRequest, Review
from . import audit, roles, storage
from .release import get_request_for

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Download:
    filename: str
    content: bytes
    content_type: str


class ExtractTampered(Exception):
    """The stored extract's bytes no longer match the SHA-256 that was reviewed."""


def can_download(user, release_request: ReleaseRequest) -> bool:
    return release_request.state == ReleaseRequest.State.APPROVED and (
        release_request.requested_by_id == user.pk or roles.is_recipient(user)
    )


def _approved_for(user, request_id: int) -> ReleaseRequest:
    release_request = get_request_for(user, request_id)
    if release_request.state != ReleaseRequest.State.APPROVED:
        raise PermissionDenied("Only an approved release can be downloaded.")
    if not can_download(user, release_request):
        raise PermissionDenied("Only the requester and recipients can download a release.")
    return release_request


def _stem(filename: str) -> str:
    return PurePath(filename).stem or "dataset"


def download_extract(user, request_id: int) -> Download:
    """The approved extract, exactly the bytes that were reviewed; the download is logged."""
    release_request = _approved_for(user, request_id)
    content = storage.read_bytes(release_request.extract_path)
    if storage.sha256_hex(content) != release_request.extract_sha256:
        logger.error("Extract of request %s does not match its SHA-256", release_request.pk)
        raise ExtractTampered("The stored extract does not match the reviewed one.")
    audit.record(
        AuditEvent.Action.DOWNLOAD,
        user,
        request=release_request,
        file="extract",
        sha256=release_request.extract_sha256,
    )
    stem = _stem(release_request.dataset.original_filename)
    return Download(f"{stem}-release-{release_request.pk}.csv", content, "text/csv; charset=utf-8")


def release_report(release_request: ReleaseRequest) -> dict:
    """What a recipient should know about an approved extract."""
    summary = dict(release_request.summary)
    for bulky in ("distributions", "sample", "examples"):
        summary.pop(bulky, None)
    approvals = release_request.reviews.filter(
        round=release_request.round,
        decision=Review.Decision.APPROVE,
        extract_sha256=release_request.extract_sha256,
    ).select_related("reviewer")
    return {
        "release": release_request.pk,
        "round": release_request.round,
        "dataset": release_request.dataset.name,
        "dataset_sha256": release_request.dataset.sha256,
        "extract_sha256": release_request.extract_sha256,
        "requested_by": release_request.requested_by.get_username(),
        "approved_by": [r.reviewer.get_username() for r in approvals],
        "approved_at": release_request.decided_at.isoformat()
        if release_request.decided_at
        else None,
        "privacy_model": release_request.model_description,
        "algorithm": release_request.algorithm,
        "identifiers_dropped": release_request.config.get("identifiers", []),
        "quasi_identifiers": [
            q["name"] for q in release_request.config.get("quasi_identifiers", [])
        ],
        "sensitive": release_request.config.get("sensitive", []),
        "summary": summary,
    }


def download_report(user, request_id: int) -> Download:
    release_request = _approved_for(user, request_id)
    audit.record(AuditEvent.Action.DOWNLOAD, user, request=release_request, file="report")
    content = json.dumps(release_report(release_request), indent=2).encode("utf-8")
    stem = _stem(release_request.dataset.original_filename)
    return Download(f"{stem}-release-{release_request.pk}-report.json", content, "application/json")
