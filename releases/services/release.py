"""Release requests: making one, running it (the worker's body), reviewing and downloading it."""

from __future__ import annotations

import io
import json
import logging
import time
from dataclasses import dataclass
from pathlib import PurePath

import pandas as pd
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from ..engine import AnonymizationConfig, EngineError, Hierarchy, PrivacyModel, anonymize
from ..engine.export import neutralise_formulas
from ..models import AuditEvent, Dataset, EquivalenceClass, ReleaseRequest, Role
from . import InvalidInput, audit, datasets, roles, storage

logger = logging.getLogger(__name__)

State = ReleaseRequest.State
CLASSES_PER_PAGE = 25
PROGRESS_INTERVAL_SECONDS = 0.5


# --- Making a request --------------------------------------------------------------------


def tagging_snapshot(dataset: Dataset) -> dict:
    """The column roles and hierarchies as they are now, frozen into the request."""
    snapshot: dict = {"identifiers": [], "quasi_identifiers": [], "sensitive": [], "insensitive": []}
    for column in dataset.columns.all():
        if column.role == Role.QUASI_IDENTIFIER:
            snapshot["quasi_identifiers"].append(
                {
                    "name": column.name,
                    "hierarchy": column.hierarchy_source,
                    "hierarchy_filename": column.hierarchy_filename,
                    "hierarchy_text": column.hierarchy_text,
                }
            )
        elif column.role == Role.IDENTIFIER:
            snapshot["identifiers"].append(column.name)
        elif column.role == Role.SENSITIVE:
            snapshot["sensitive"].append(column.name)
        else:
            snapshot["insensitive"].append(column.name)
    return snapshot


def request_release(user, dataset: Dataset, k: int, suppression_limit: float) -> ReleaseRequest:
    """Save a release request and enqueue its run once the transaction has committed."""
    dataset = datasets.get_dataset_for(user, dataset.pk)
    if not isinstance(k, int) or k < 2:
        raise InvalidInput("k must be a whole number of at least 2.")
    if k > dataset.row_count:
        raise InvalidInput(f"k={k} is larger than the dataset's {dataset.row_count} rows.")
    if not 0.0 <= suppression_limit <= 1.0:
        raise InvalidInput("The suppression limit must be between 0% and 100% of the rows.")
    config = tagging_snapshot(dataset)
    if not config["quasi_identifiers"]:
        raise InvalidInput("Tag at least one column as a quasi-identifier before requesting a release.")
    with transaction.atomic():
        release_request = ReleaseRequest.objects.create(
            dataset=dataset,
            requested_by=user,
            k=k,
            suppression_limit=suppression_limit,
            config=config,
            stage="Waiting for a worker",
        )
        audit.record(
            AuditEvent.Action.REQUEST,
            user,
            request=release_request,
            k=k,
            suppression_limit=suppression_limit,
            quasi_identifiers=[q["name"] for q in config["quasi_identifiers"]],
        )
        transaction.on_commit(lambda: _enqueue(release_request.pk))
    return release_request


def _enqueue(request_id: int) -> None:
    from ..tasks import run_release_task

    run_release_task.delay(request_id)


# --- Running a request (called by the Celery task) -----------------------------------------


def engine_config(snapshot: dict, k: int, suppression_limit: float) -> AnonymizationConfig:
    hierarchies: dict[str, Hierarchy | None] = {}
    for qi in snapshot["quasi_identifiers"]:
        # A hierarchy uploaded or built for the column is stored materialized, in ARX format.
        if qi.get("hierarchy_text"):
            hierarchies[qi["name"]] = Hierarchy.from_arx_csv(
                qi["hierarchy_text"], attribute=qi["name"]
            )
        else:
            hierarchies[qi["name"]] = None  # built from the data by the caller
    return AnonymizationConfig(
        quasi_identifiers=hierarchies,  # type: ignore[arg-type]
        model=PrivacyModel(k=k, suppression_limit=suppression_limit),
        sensitive=list(snapshot["sensitive"]),
        identifiers=list(snapshot["identifiers"]),
    )


class _ProgressReporter:
    """Writes the engine's progress to the request row, at most twice a second."""

    def __init__(self, request_id: int) -> None:
        self.request_id = request_id
        self.last = 0.0

    def __call__(self, fraction: float, stage: str) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL_SECONDS and fraction < 1.0:
            return
        self.last = now
        # Running work spans 10%..90%: loading comes before it, writing after.
        ReleaseRequest.objects.filter(pk=self.request_id).update(
            progress=0.1 + 0.8 * max(0.0, min(1.0, fraction)), stage=stage[:200]
        )


def _set_progress(release_request: ReleaseRequest, fraction: float, stage: str) -> None:
    ReleaseRequest.objects.filter(pk=release_request.pk).update(progress=fraction, stage=stage)


def run_release(request_id: int) -> None:
    """Anonymize a queued request: write its extract, summary and equivalence classes."""
    with transaction.atomic():
        release_request = (
            ReleaseRequest.objects.select_for_update().select_related("dataset").get(pk=request_id)
        )
        if release_request.state != State.QUEUED:
            logger.info("Request %s is %s, not queued: nothing to run.", request_id, release_request.state)
            return
        release_request.state = State.RUNNING
        release_request.started_at = timezone.now()
        release_request.progress = 0.02
        release_request.stage = "Loading the dataset"
        release_request.save(update_fields=["state", "started_at", "progress", "stage"])
        audit.record(AuditEvent.Action.RUN_START, None, request=release_request)

    extract_path = ""
    try:
        frame = datasets.load_frame(release_request.dataset)
        config = engine_config(release_request.config, release_request.k, release_request.suppression_limit)
        for name, hierarchy in list(config.quasi_identifiers.items()):
            if hierarchy is None:
                config.quasi_identifiers[name] = Hierarchy.automatic(frame[name].unique())
        _set_progress(release_request, 0.1, "Searching for the best generalization")
        result = anonymize(frame, config, progress=_ProgressReporter(release_request.pk))
        _set_progress(release_request, 0.92, "Writing the extract")
        buffer = io.StringIO()
        neutralise_formulas(result.data).to_csv(buffer, index=False)
        extract = buffer.getvalue().encode("utf-8")
        extract_path = storage.save_bytes("extracts", ".csv", extract)
        summary = _summary(result, release_request)
        qi_names = list(config.quasi_identifiers)
        with transaction.atomic():
            EquivalenceClass.objects.bulk_create(
                (
                    EquivalenceClass(
                        request=release_request,
                        values={name: str(row[name]) for name in qi_names},
                        size=int(row["size"]),
                    )
                    for row in result.classes.sort_values("size", kind="stable").to_dict("records")
                ),
                batch_size=1000,
            )
            ReleaseRequest.objects.filter(pk=release_request.pk).update(
                state=State.READY,
                progress=1.0,
                stage="Ready for review",
                finished_at=timezone.now(),
                extract_path=extract_path,
                extract_sha256=storage.sha256_hex(extract),
                summary=summary,
            )
            audit.record(
                AuditEvent.Action.RUN_END,
                None,
                request=release_request,
                rows_out=result.rows_out,
                suppressed=result.suppressed,
                k_achieved=result.achieved_k,
                sha256=storage.sha256_hex(extract),
            )
    except (EngineError, InvalidInput) as exc:
        storage.delete_quietly(extract_path)
        _fail(release_request, str(exc))
    except Exception:
        logger.exception("Release request %s failed", request_id)
        storage.delete_quietly(extract_path)
        _fail(
            release_request,
            "The run stopped because of an internal error. The administrators can find the "
            "details in the worker's log.",
        )


def _summary(result, release_request: ReleaseRequest) -> dict:
    report = result.report()
    report["k_requested"] = release_request.k
    report["suppression_limit"] = release_request.suppression_limit
    report["quasi_identifiers"] = list(result.heights)
    return report


def _fail(release_request: ReleaseRequest, reason: str) -> None:
    with transaction.atomic():
        EquivalenceClass.objects.filter(request=release_request).delete()
        ReleaseRequest.objects.filter(pk=release_request.pk).update(
            state=State.FAILED, error=reason, stage="Failed", finished_at=timezone.now()
        )
        audit.record(AuditEvent.Action.RUN_FAILED, None, request=release_request, reason=reason)


# --- Seeing requests -------------------------------------------------------------------------


def visible_requests(user) -> QuerySet[ReleaseRequest]:
    """Requests the user may see: their own, all for officers, approved ones for recipients."""
    condition = Q(requested_by=user) if roles.is_steward(user) else Q(pk__in=[])
    if roles.is_officer(user):
        condition |= ~Q(pk__in=[])
    if roles.is_recipient(user):
        condition |= Q(state=State.APPROVED)
    return ReleaseRequest.objects.filter(condition).select_related("dataset", "requested_by")


def get_request_for(user, request_id: int) -> ReleaseRequest:
    try:
        return visible_requests(user).get(pk=request_id)
    except ReleaseRequest.DoesNotExist:
        raise Http404("No such release request.") from None


def review_queue(user) -> QuerySet[ReleaseRequest]:
    roles.require(user, roles.OFFICERS, "review release requests")
    return (
        ReleaseRequest.objects.filter(state=State.READY)
        .select_related("dataset", "requested_by")
        .order_by("finished_at", "id")
    )


def approved_releases(user) -> QuerySet[ReleaseRequest]:
    if not (roles.is_recipient(user) or roles.is_steward(user)):
        raise PermissionDenied("Only recipients and data stewards can download releases.")
    return visible_requests(user).filter(state=State.APPROVED).order_by("-decided_at")


def classes_page(release_request: ReleaseRequest, page_number) -> Page:
    """Equivalence classes, smallest first."""
    paginator = Paginator(release_request.classes.order_by("size", "id"), CLASSES_PER_PAGE)
    return paginator.get_page(page_number)


def can_decide(user, release_request: ReleaseRequest) -> bool:
    return (
        roles.is_officer(user)
        and release_request.state == State.READY
        and release_request.requested_by_id != user.pk
    )


def can_download(user, release_request: ReleaseRequest) -> bool:
    return release_request.state == State.APPROVED and (
        release_request.requested_by_id == user.pk or roles.is_recipient(user)
    )


# --- Deciding ------------------------------------------------------------------------------


def decide(user, request_id: int, approve: bool, reason: str = "") -> ReleaseRequest:
    """Approve, or reject with a reason, a request that is ready for review."""
    roles.require(user, roles.OFFICERS, "approve or reject releases")
    reason = (reason or "").strip()
    if not approve and not reason:
        raise InvalidInput("Give a reason for rejecting the release.")
    with transaction.atomic():
        try:
            release_request = ReleaseRequest.objects.select_for_update().get(pk=request_id)
        except ReleaseRequest.DoesNotExist:
            raise Http404("No such release request.") from None
        if release_request.requested_by_id == user.pk:
            raise PermissionDenied("Nobody can decide on a release they requested themselves.")
        if release_request.state != State.READY:
            raise InvalidInput(
                f"This request is {release_request.get_state_display().lower()}; only a request "
                "that is ready for review can be decided."
            )
        release_request.state = State.APPROVED if approve else State.REJECTED
        release_request.decided_by = user
        release_request.decided_at = timezone.now()
        release_request.decision_reason = reason
        release_request.save(update_fields=["state", "decided_by", "decided_at", "decision_reason"])
        audit.record(
            AuditEvent.Action.APPROVE if approve else AuditEvent.Action.REJECT,
            user,
            request=release_request,
            reason=reason,
            sha256=release_request.extract_sha256,
        )
    return release_request


# --- Downloading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Download:
    filename: str
    content: bytes
    content_type: str


class ExtractTampered(Exception):
    """The stored extract's bytes no longer match the SHA-256 that was reviewed."""


def _check_download(user, request_id: int) -> ReleaseRequest:
    release_request = get_request_for(user, request_id)
    if release_request.state != State.APPROVED:
        raise PermissionDenied("Only an approved release can be downloaded.")
    if not can_download(user, release_request):
        raise PermissionDenied("Only the requester and recipients can download a release.")
    return release_request


def download_extract(user, request_id: int) -> Download:
    """The approved extract, exactly the bytes that were reviewed; the download is logged."""
    release_request = _check_download(user, request_id)
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
    return {
        "release": release_request.pk,
        "dataset": release_request.dataset.name,
        "dataset_sha256": release_request.dataset.sha256,
        "extract_sha256": release_request.extract_sha256,
        "requested_by": release_request.requested_by.get_username(),
        "approved_by": release_request.decided_by.get_username() if release_request.decided_by else None,
        "approved_at": release_request.decided_at.isoformat() if release_request.decided_at else None,
        "privacy_model": {"k": release_request.k, "suppression_limit": release_request.suppression_limit},
        "identifiers_dropped": release_request.config.get("identifiers", []),
        "quasi_identifiers": [q["name"] for q in release_request.config.get("quasi_identifiers", [])],
        "summary": release_request.summary,
    }


def download_report(user, request_id: int) -> Download:
    release_request = _check_download(user, request_id)
    audit.record(AuditEvent.Action.DOWNLOAD, user, request=release_request, file="report")
    content = json.dumps(release_report(release_request), indent=2).encode("utf-8")
    stem = _stem(release_request.dataset.original_filename)
    return Download(f"{stem}-release-{release_request.pk}-report.json", content, "application/json")


def _stem(filename: str) -> str:
    return PurePath(filename).stem or "dataset"


def extract_preview(release_request: ReleaseRequest, rows: int = 10) -> pd.DataFrame | None:
    if not release_request.extract_path:
        return None
    return pd.read_csv(
        io.BytesIO(storage.read_bytes(release_request.extract_path)),
        dtype=str,
        keep_default_na=False,
        nrows=rows,
    )
