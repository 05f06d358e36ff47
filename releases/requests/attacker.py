"""Attacker files: an identified external file (a voter list, a population register) attached
to a release request by an officer or its steward, which a worker links to the extract before
the decision (``requests.linkage``).

The file is read with the bounds and readers of a dataset upload (``MAX_UPLOAD_BYTES`` while it
is stored, then ``datasets.originals.read_limits`` while every row is read once to check it) and
held like an original: in private storage, never shown, never offered for download, deleted
with its request and when another file replaces it. Only officers and the requester see that it
exists and what the linkage found.
"""

from __future__ import annotations

from pathlib import PurePath

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.files import File
from django.db import transaction
from django.http import Http404

from releases.background import outbox
from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.datasets import originals
from releases.datasets import services as datasets
from releases.engine import tabular
from releases.models import AttackerFile, AuditEvent, ReleaseFile, ReleaseRequest
from releases.requests import rules
from releases.requests.selectors import get_request_for, stalled

AState = AttackerFile.State
#: The task that links an attacker file to its request's extract.
LINK_TASK = "releases.link_attacker_file"
#: Request states whose current round has an extract to link to.
WITH_EXTRACT = frozenset({ReleaseRequest.State.READY, ReleaseRequest.State.CHANGES_REQUESTED})


def folder_of(request_id: int) -> str:
    """Where a request's attacker files are stored (removed with the request)."""
    return f"attackers/{request_id}"


def _check_table(path: str, filename: str) -> tabular.TableScan:
    """Read every row of the stored file once, within the upload bounds; ``TableError`` says
    what is wrong. Returns the finished scan (its header and row count)."""
    with storage.local_path(path) as local:
        scan = tabular.open_table(local, None, filename, originals.read_limits())
        for _ in scan.batches():
            pass
    return scan


def _has_extract(release_request: ReleaseRequest) -> bool:
    return (
        release_request.state in WITH_EXTRACT
        and ReleaseFile.objects.filter(
            request=release_request,
            round=release_request.round,
            format__in=[ReleaseFile.Format.PARQUET, ReleaseFile.Format.CSV],
        ).exists()
    )


def refuse_oversized(user, request_id: int) -> str:
    """An attacker file whose upload is larger than the limit, refused before its body is
    read; the message for the page."""
    rules.check_attach_attacker_file(user, get_request_for(user, request_id))
    return f"The attacker file was refused: {datasets.limit_message()}"


def attach_attacker_file(user, request_id: int, uploaded: File) -> AttackerFile:
    """Attach ``uploaded`` to the request (replacing the file it had); its linkage is queued
    when the round has an extract, else it waits for the run. A refused file stores nothing."""
    release_request = get_request_for(user, request_id)
    rules.check_attach_attacker_file(user, release_request)
    filename = PurePath(uploaded.name or "attacker.csv").name
    path = ""
    try:
        if uploaded.size is not None and uploaded.size > settings.MAX_UPLOAD_BYTES:
            raise InvalidInput(datasets.limit_message())
        uploaded.seek(0)
        file_format = tabular.sniff_format(uploaded.read(tabular.SNIFF_BYTES), filename)
        path, digest, size, _ = datasets.store_stream(
            uploaded, datasets.SUFFIXES[file_format], folder_of(release_request.pk)
        )
        scan = _check_table(path, filename)
    except (InvalidInput, tabular.TableError) as exc:
        storage.delete_quietly(path)
        raise InvalidInput(f"The attacker file was refused: {exc}") from None
    replaced = ""
    try:
        with transaction.atomic():
            release_request = ReleaseRequest.objects.select_for_update().get(pk=release_request.pk)
            rules.check_attach_attacker_file(user, release_request)
            old = AttackerFile.objects.filter(request=release_request).first()
            if old is not None:
                replaced = old.path
                old.delete()  # a linkage under way loses its lease and keeps nothing
            queue = _has_extract(release_request)
            attacker = AttackerFile.objects.create(
                request=release_request,
                uploaded_by=user,
                name=filename,
                path=path,
                sha256=digest,
                size_bytes=size,
                file_format=scan.format.file_format,
                rows=scan.rows,
                columns=list(scan.columns),
                state=rules.LINKAGE.target_of("queue") if queue else AState.WAITING,
                stage="Waiting for a worker" if queue else "",
            )
            audit.record(
                AuditEvent.Action.ATTACKER_FILE,
                user,
                request=release_request,
                round=release_request.round,
                filename=filename,
                sha256=digest,
                size_bytes=size,
                rows=scan.rows,
                columns=len(scan.columns),
                replaced=bool(replaced),
            )
            if queue:
                outbox.enqueue(LINK_TASK, attacker.pk)
    except BaseException:
        storage.delete_quietly(path)  # the row did not commit: its file goes too
        raise
    storage.delete_quietly(replaced)
    return attacker


def queue_after_run(release_request: ReleaseRequest) -> None:
    """Inside the run's final transaction: a new extract of the round, so the attacker file
    (if any) is linked again (a linkage of an earlier round under way loses its lease)."""
    attacker = AttackerFile.objects.filter(request=release_request).first()
    if attacker is None:
        return
    AttackerFile.objects.filter(pk=attacker.pk, state__in=rules.LINKAGE.sources("queue")).update(
        state=rules.LINKAGE.target_of("queue"),
        stage="Waiting for a worker",
        error="",
        linkage={},
        linked_round=None,
        finished_at=None,
        heartbeat_at=None,
    )
    outbox.enqueue(LINK_TASK, attacker.pk)


# --- Reads ---------------------------------------------------------------------------------------


def current_linkage(release_request: ReleaseRequest) -> dict | None:
    """The linkage of the round on view (its figures), or None when there is none yet."""
    attacker = AttackerFile.objects.filter(request=release_request).first()
    if (
        attacker is None
        or attacker.state != AState.DONE
        or attacker.linked_round != release_request.round
    ):
        return None
    return attacker.linkage or None


def linkage_context(user, release_request: ReleaseRequest) -> dict:
    """What the request page's linkage card shows ``user`` (officers and the requester; nobody
    else reaches the page that shows it)."""
    if not rules.can_see_original(user, release_request):
        return {}
    attacker = AttackerFile.objects.filter(request=release_request).first()
    linkage = current_linkage(release_request)
    generalized = {q["name"] for q in release_request.config.get("quasi_identifiers", [])}
    return {
        "attacker": attacker,
        "attach_button": rules.buttons(user, release_request).get("attach_attacker_file"),
        "linkage": linkage,
        # Shared columns the extract holds as they are: matched by equality.
        "linkage_unchanged": [
            c for c in (linkage or {}).get("matched_columns", []) if c not in generalized
        ],
        "linkage_under_way": attacker is not None and attacker.state in rules.LINKAGE_UNDER_WAY,
        "linkage_stalled": stalled(attacker) if attacker is not None else None,
    }


def linkage_for(user, request_id: int) -> tuple[ReleaseRequest, dict]:
    """(the request, its linkage card's context) for the polled card; a recipient or anybody
    else who may not see the original is refused."""
    release_request = get_request_for(user, request_id)
    if not rules.can_see_original(user, release_request):
        raise PermissionDenied("Only privacy officers and the requester see the linkage attack.")
    if release_request.kind not in rules.ACTIONS["attach_attacker_file"].kinds:
        raise Http404("This kind of release has no rows to link an attacker file to.")
    return release_request, linkage_context(user, release_request)


def report_entry(release_request: ReleaseRequest) -> dict | None:
    """The release report's linkage section (officers and the requester only)."""
    attacker = AttackerFile.objects.filter(request=release_request).first()
    linkage = current_linkage(release_request)
    if attacker is None or linkage is None:
        return None
    return {
        "attacker_file": attacker.name,
        "attacker_sha256": attacker.sha256,
        "linked_at": attacker.finished_at.isoformat() if attacker.finished_at else None,
        **linkage,
    }
