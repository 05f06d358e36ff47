"""Downloads of approved releases: checked, then logged (the release report's are the
review's, ``review.services``, which refuses them the same way).

A download is allowed by the lifecycle (``rules``, ``download``: a named recipient or the
requester, an approved release not expired or revoked, its terms accepted). A missing file, or
one whose size is not the approved size, is refused with a clear reason, and the refusal is
logged. Otherwise the download is logged and the file is read once: hashed as it streams
(``verified_stream``), with the last chunk held back until the SHA-256 of everything read is
known. Bytes that are not the approved ones end the stream before its end, and the failure is
logged too.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
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
    request_id: int
    format: str


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


def _changed(stored: ReleaseFile) -> str:
    return (
        f"The stored {stored.get_format_display()} file no longer matches the approved "
        "SHA-256; it is not served."
    )


def problem(stored: ReleaseFile, read: bool = True) -> tuple[str, int] | None:
    """Why a stored file cannot be served (missing, or not the approved bytes). ``read``:
    hash the whole file; else compare its size only (a download hashes what it streams)."""
    label = stored.get_format_display()
    if not storage.exists(stored.path):
        return f"The {label} file of this release is missing from storage.", GONE
    if not read and storage.size(stored.path) != stored.size_bytes:
        return _changed(stored), CONFLICT
    if read and storage.sha256_of(stored.path) != stored.sha256:
        logger.error("%s of request %s does not match its SHA-256", label, stored.request_id)
        return _changed(stored), CONFLICT
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
    found = problem(stored, read=False)
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
        release_request.pk,
        fmt,
    )


class StreamAborted(Exception):
    """The bytes streamed were not the approved ones: the response must not end cleanly."""


def verified_stream(user, prepared: PreparedDownload) -> Iterator[bytes]:
    """The file's bytes, read once and hashed as they go. The last chunk is sent only when the
    SHA-256 of the whole file is the approved one: otherwise the failure is logged and the
    stream stops short, so the client never receives a complete changed file."""
    digest = hashlib.sha256()
    held = b""
    with storage.open_file(prepared.path) as handle:
        while chunk := handle.read(storage.CHUNK_BYTES):
            digest.update(chunk)
            if held:
                yield held
            held = chunk
    if digest.hexdigest() != prepared.sha256:
        logger.error("%s of request %s changed while served", prepared.format, prepared.request_id)
        audit.record(
            AuditEvent.Action.DOWNLOAD_REFUSED,
            user,
            request=ReleaseRequest.objects.get(pk=prepared.request_id),
            file=prepared.format,
            reason=(
                "The bytes read did not match the approved SHA-256; "
                "the download was stopped before its end."
            ),
        )
        raise StreamAborted(prepared.path)
    if held:
        yield held
