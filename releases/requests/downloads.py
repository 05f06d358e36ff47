"""Downloads of approved releases: checked, then logged (the release report's are the
review's, ``review.services``, which refuses them the same way).

A download is allowed by the lifecycle (``rules``, ``download``: a named recipient or the
requester, an approved release not expired or revoked, its terms accepted). The stored file is
then read once to check it is still the bytes approved; only then is the download logged and
the file streamed (by the view, never read into memory). A missing or changed file is refused
with a clear reason and the refusal is logged too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.http import Http404

from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.models import AuditEvent, ReleaseFile, ReleaseRequest
from releases.requests import package, rules, services
from releases.requests.selectors import filename_stem, get_request_for, round_files

logger = logging.getLogger(__name__)

State = ReleaseRequest.State
GONE = 410
CONFLICT = 409


class DownloadUnavailable(Exception):
    """The release or its file cannot be served; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = CONFLICT) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class PreparedDownload:
    """A checked file, ready to stream: its storage name, and what to call it."""

    path: str
    filename: str
    content_type: str
    sha256: str
    size_bytes: int


def refuse(user, release_request: ReleaseRequest, file: str, reason: str, status: int):
    audit.record(
        AuditEvent.Action.DOWNLOAD_REFUSED,
        user,
        request=release_request,
        file=file,
        reason=reason,
    )
    raise DownloadUnavailable(reason, status)


def _check_allowed(user, release_request: ReleaseRequest, file: str) -> None:
    refused = rules.refusal("download", user, release_request)
    if refused is None:
        return
    exception, reason = refused
    if exception is InvalidInput and release_request.effective_state in (
        State.REVOKED,
        State.EXPIRED,
    ):
        if release_request.state == State.APPROVED:
            services.expire_due()  # the date has passed: write the state it is read as
        refuse(user, release_request, file, reason, GONE)
    raise exception(reason)


def problem(stored: ReleaseFile) -> tuple[str, int] | None:
    """Why a stored file cannot be served (missing, or not the approved bytes)."""
    label = stored.get_format_display()
    if not storage.exists(stored.path):
        return f"The {label} file of this release is missing from storage.", GONE
    if storage.sha256_of(stored.path) != stored.sha256:
        logger.error("%s of request %s does not match its SHA-256", label, stored.request_id)
        return (
            f"The stored {label} file no longer matches the approved SHA-256; it is not served.",
            CONFLICT,
        )
    return None


def package_matches(release_request: ReleaseRequest, files: list[ReleaseFile]) -> bool:
    return bool(files) and (
        package.package_digest({f.format: f.sha256 for f in files})
        == release_request.package_sha256
    )


def open_download(user, request_id: int, fmt: str) -> PreparedDownload:
    """Check and log one download of the release's ``fmt`` file; the caller streams it."""
    release_request = get_request_for(user, request_id)
    _check_allowed(user, release_request, fmt)
    files = round_files(release_request)
    stored = next((f for f in files if f.format == fmt), None)
    if stored is None:
        reason = release_request.summary.get("xlsx_refusal") if fmt == "xlsx" else ""
        raise Http404(reason or "This release has no such file.")
    if not package_matches(release_request, files):
        refuse(user, release_request, fmt, "The files no longer match the approved package.", 409)
    found = problem(stored)
    if found is not None:
        refuse(user, release_request, fmt, *found)
    audit.record(
        AuditEvent.Action.DOWNLOAD,
        user,
        request=release_request,
        file=fmt,
        sha256=stored.sha256,
        size_bytes=stored.size_bytes,
    )
    suffix = package.SUFFIXES[fmt]
    return PreparedDownload(
        stored.path,
        f"{filename_stem(release_request)}{suffix}",
        stored.content_type,
        stored.sha256,
        stored.size_bytes,
    )
