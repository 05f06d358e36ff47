"""Release requests: making one, resubmitting it, and running it (the worker's body)."""

from __future__ import annotations

import io
import logging
import math
import time
from dataclasses import asdict, dataclass

import pandas as pd
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from ..engine import AnonymizationConfig, EngineError, Hierarchy, PrivacyModel, anonymize
from ..engine.export import neutralise_formulas
from ..models import (
    AuditEvent,
    Dataset,
    EquivalenceClass,
    ReleaseRequest,
    ReleaseRound,
    Role,
)
from . import InvalidInput, audit, datasets, dispatch, roles, storage

logger = logging.getLogger(__name__)

State = ReleaseRequest.State
PROGRESS_INTERVAL_SECONDS = 0.5
SAMPLE_ROWS = 12
#: A class within this share of the t threshold, or exactly at k or l, "only just passes".
T_BORDERLINE_SHARE = 0.9


@dataclass(frozen=True)
class ReleaseParameters:
    """The privacy model and algorithm a steward asks for."""

    k: int
    suppression_limit: float
    l_diversity: float | None = None
    l_variant: str = "distinct"
    c: float | None = None
    t_closeness: float | None = None
    t_distance: str = "equal"
    algorithm: str = "optimal"

    @classmethod
    def of(cls, release_request: ReleaseRequest) -> ReleaseParameters:
        return cls(
            k=release_request.k,
            suppression_limit=release_request.suppression_limit,
            l_diversity=release_request.l_diversity,
            l_variant=release_request.l_variant,
            c=release_request.c,
            t_closeness=release_request.t_closeness,
            t_distance=release_request.t_distance,
            algorithm=release_request.algorithm,
        )

    def privacy_model(self) -> PrivacyModel:
        return PrivacyModel(
            k=self.k,
            l=self.l_diversity,
            l_variant=self.l_variant,
            c=self.c,
            t=self.t_closeness,
            t_distance=self.t_distance,
            suppression_limit=self.suppression_limit,
        )


# --- Making and resubmitting a request -------------------------------------------------------


def tagging_snapshot(dataset: Dataset) -> dict:
    """The column roles and hierarchies as they are now, frozen into the request's round."""
    snapshot: dict = {
        "identifiers": [],
        "quasi_identifiers": [],
        "sensitive": [],
        "sensitive_hierarchies": {},
        "insensitive": [],
    }
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
            if column.hierarchy_text:
                snapshot["sensitive_hierarchies"][column.name] = column.hierarchy_text
        else:
            snapshot["insensitive"].append(column.name)
    return snapshot


def _validate(params: ReleaseParameters, dataset: Dataset, snapshot: dict) -> None:
    if not isinstance(params.k, int) or params.k < 1:
        raise InvalidInput("k must be a whole number of at least 1.")
    if params.k > dataset.row_count:
        raise InvalidInput(f"k={params.k} is larger than the dataset's {dataset.row_count} rows.")
    if not 0.0 <= params.suppression_limit <= 1.0:
        raise InvalidInput("The suppression limit must be between 0% and 100% of the rows.")
    if params.algorithm not in ReleaseRequest.Algorithm.values:
        raise InvalidInput(f"Unknown algorithm {params.algorithm!r}.")
    if not snapshot["quasi_identifiers"]:
        raise InvalidInput(
            "Tag at least one column as a quasi-identifier before requesting a release."
        )
    if params.k < 2 and params.l_diversity is None and params.t_closeness is None:
        raise InvalidInput("Ask for k of at least 2, or for l-diversity or t-closeness.")
    if (params.l_diversity is not None or params.t_closeness is not None) and not snapshot[
        "sensitive"
    ]:
        raise InvalidInput("l-diversity and t-closeness need at least one sensitive column.")
    if params.t_closeness is not None and params.t_distance == "hierarchical":
        missing = [s for s in snapshot["sensitive"] if s not in snapshot["sensitive_hierarchies"]]
        if missing:
            raise InvalidInput(
                "t-closeness with hierarchical distance needs a hierarchy for the sensitive "
                f"column {missing[0]!r}: upload one on the dataset page."
            )
    try:
        params.privacy_model().validate()
    except EngineError as exc:
        raise InvalidInput(str(exc)) from None


def request_release(user, dataset: Dataset, params: ReleaseParameters) -> ReleaseRequest:
    """Save a release request and enqueue its run once the transaction has committed."""
    dataset = datasets.get_dataset_for(user, dataset.pk)
    datasets.ensure_ready(dataset)
    snapshot = tagging_snapshot(dataset)
    _validate(params, dataset, snapshot)
    with transaction.atomic():
        release_request = ReleaseRequest.objects.create(
            dataset=dataset,
            requested_by=user,
            config=snapshot,
            stage="Waiting for a worker",
            **asdict(params),
        )
        audit.record(
            AuditEvent.Action.REQUEST,
            user,
            request=release_request,
            model=release_request.model_description,
            algorithm=params.algorithm,
            quasi_identifiers=[q["name"] for q in snapshot["quasi_identifiers"]],
        )
        dispatch.enqueue("releases.run_release", release_request.pk)
    return release_request


def resubmit(user, request_id: int, params: ReleaseParameters, response: str) -> ReleaseRequest:
    """Answer a "changes requested" (or a failed run) and start a new round."""
    response = (response or "").strip()
    if not response:
        raise InvalidInput("Answer the reviewers' comments before resubmitting.")
    with transaction.atomic():
        try:
            release_request = (
                ReleaseRequest.objects.select_for_update()
                .select_related("dataset")
                .get(pk=request_id)
            )
        except ReleaseRequest.DoesNotExist:
            raise Http404("No such release request.") from None
        if release_request.requested_by_id != user.pk:
            if not visible_requests(user).filter(pk=request_id).exists():
                raise Http404("No such release request.")
            raise PermissionDenied("Only the requester can resubmit a release request.")
        if release_request.state not in (State.CHANGES_REQUESTED, State.FAILED):
            raise InvalidInput(
                f"This request is {release_request.get_state_display().lower()}; only a request "
                "with changes requested, or whose run failed, can be resubmitted."
            )
        dataset = datasets.get_dataset_for(user, release_request.dataset_id)
        snapshot = tagging_snapshot(dataset)
        _validate(params, dataset, snapshot)
        ReleaseRound.objects.create(
            request=release_request,
            number=release_request.round,
            parameters={
                **asdict(ReleaseParameters.of(release_request)),
                "config": release_request.config,
            },
            outcome=release_request.state,
            summary=release_request.summary,
            error=release_request.error,
            extract_sha256=release_request.extract_sha256,
            submitted_at=release_request.submitted_at,
            response=response,
        )
        old_extract = release_request.extract_path
        EquivalenceClass.objects.filter(request=release_request).delete()
        for field, value in asdict(params).items():
            setattr(release_request, field, value)
        release_request.round += 1
        release_request.config = snapshot
        release_request.state = State.QUEUED
        release_request.progress = 0.0
        release_request.stage = "Waiting for a worker"
        release_request.error = ""
        release_request.summary = {}
        release_request.extract_path = ""
        release_request.extract_sha256 = ""
        release_request.submitted_at = timezone.now()
        release_request.started_at = None
        release_request.heartbeat_at = None
        release_request.finished_at = None
        release_request.save()
        audit.record(
            AuditEvent.Action.RESUBMIT,
            user,
            request=release_request,
            round=release_request.round,
            comment=response,
            model=release_request.model_description,
        )
        # The previous round's extract can never be downloaded: remove it once committed.
        transaction.on_commit(lambda: storage.delete_quietly(old_extract))
        dispatch.enqueue("releases.run_release", release_request.pk)
    return release_request


# --- Running a request (called by the Celery task) ---------------------------------------------


def engine_config(
    snapshot: dict, params: ReleaseParameters, frame: pd.DataFrame
) -> AnonymizationConfig:
    """The engine's configuration for a round: stored hierarchies, or automatic ones."""
    hierarchies: dict[str, Hierarchy] = {}
    for qi in snapshot["quasi_identifiers"]:
        name = qi["name"]
        # A hierarchy uploaded or built for the column is stored materialized, in ARX format.
        if qi.get("hierarchy_text"):
            hierarchies[name] = Hierarchy.from_arx_csv(qi["hierarchy_text"], attribute=name)
        else:
            hierarchies[name] = Hierarchy.automatic(frame[name].unique(), attribute=name)
    sensitive_hierarchies = {
        name: Hierarchy.from_arx_csv(text, attribute=name)
        for name, text in snapshot.get("sensitive_hierarchies", {}).items()
    }
    return AnonymizationConfig(
        quasi_identifiers=hierarchies,
        model=params.privacy_model(),
        sensitive=list(snapshot["sensitive"]),
        identifiers=list(snapshot["identifiers"]),
        sensitive_hierarchies=sensitive_hierarchies,
        algorithm=params.algorithm,
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
        # The search spans 10%..90%: loading comes before it, writing after.
        ReleaseRequest.objects.filter(pk=self.request_id).update(
            progress=0.1 + 0.8 * max(0.0, min(1.0, fraction)),
            stage=stage[:200].capitalize(),
            heartbeat_at=timezone.now(),
        )


def _set_progress(request_id: int, fraction: float, stage: str) -> None:
    ReleaseRequest.objects.filter(pk=request_id).update(
        progress=fraction, stage=stage, heartbeat_at=timezone.now()
    )


def run_release(request_id: int) -> None:
    """Anonymize a queued request: write its extract, summary and equivalence classes."""
    with transaction.atomic():
        release_request = (
            ReleaseRequest.objects.select_for_update().select_related("dataset").get(pk=request_id)
        )
        if release_request.state != State.QUEUED:
            logger.info("Request %s is %s: nothing to run.", request_id, release_request.state)
            return
        release_request.state = State.RUNNING
        release_request.started_at = release_request.heartbeat_at = timezone.now()
        release_request.progress = 0.02
        release_request.stage = "Loading the dataset"
        release_request.save(
            update_fields=["state", "started_at", "heartbeat_at", "progress", "stage"]
        )
        audit.record(
            AuditEvent.Action.RUN_START, None, request=release_request, round=release_request.round
        )

    extract_path = ""
    try:
        params = ReleaseParameters.of(release_request)
        frame = datasets.load_frame(release_request.dataset)
        config = engine_config(release_request.config, params, frame)
        _set_progress(release_request.pk, 0.1, "Searching for the best generalization")
        result = anonymize(frame, config, progress=_ProgressReporter(release_request.pk))
        _set_progress(release_request.pk, 0.92, "Writing the extract")
        buffer = io.StringIO()
        neutralise_formulas(result.data).to_csv(buffer, index=False)
        extract = buffer.getvalue().encode("utf-8")
        digest = storage.sha256_hex(extract)
        extract_path = storage.save_bytes("extracts", ".csv", extract)
        summary = _summary(result, release_request, frame, config)
        classes = _classes(
            release_request, result, params, list(config.quasi_identifiers), config.sensitive
        )
        with transaction.atomic():
            EquivalenceClass.objects.filter(request=release_request).delete()
            EquivalenceClass.objects.bulk_create(classes, batch_size=1000)
            ReleaseRequest.objects.filter(pk=release_request.pk).update(
                state=State.READY,
                progress=1.0,
                stage="Ready for review",
                finished_at=timezone.now(),
                extract_path=extract_path,
                extract_sha256=digest,
                summary=summary,
            )
            audit.record(
                AuditEvent.Action.RUN_END,
                None,
                request=release_request,
                round=release_request.round,
                rows_out=result.rows_out,
                suppressed=result.suppressed,
                k_achieved=result.achieved_k,
                sha256=digest,
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


def _finite(value):
    """JSON has no infinity: an unbounded l (a class of one value in entropy l) is None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _distribution(values: pd.Series, limit: int = 12) -> list[list]:
    counts = values.value_counts()
    top = [[str(v), int(c)] for v, c in counts.head(limit).items()]
    if len(counts) > limit:
        top.append(["(other values)", int(counts.iloc[limit:].sum())])
    return top


def _summary(result, release_request: ReleaseRequest, frame: pd.DataFrame, config) -> dict:
    report = result.report()
    report["achieved"]["l"] = {k: _finite(v) for k, v in report["achieved"]["l"].items()}
    report["quasi_identifiers"] = list(config.quasi_identifiers)
    report["sensitive"] = list(config.sensitive)
    # Per column, the original and the released distribution, side by side on the page.
    released = result.data
    report["distributions"] = {
        name: {
            "original": _distribution(frame[name]),
            "released": _distribution(released[name]) if name in released else [],
        }
        for name in [*config.quasi_identifiers, *config.sensitive]
    }
    # A sample of released rows next to the same rows before release.
    shown = [c for c in frame.columns if c not in config.identifiers]
    positions = list(result.source_rows[:SAMPLE_ROWS])
    report["sample"] = {
        "columns": shown,
        "original": frame.iloc[positions][shown].values.tolist(),
        "released": released.head(SAMPLE_ROWS)[shown].values.tolist(),
    }
    report["examples"] = _examples(result, frame, config)
    class_sizes = result.classes["size"].astype(int)
    report["class_size_histogram"] = _size_histogram(class_sizes.tolist())
    return report


def _examples(result, frame: pd.DataFrame, config, per_attribute: int = 4) -> dict:
    """Per quasi-identifier, a few original values and what they became in the extract."""
    kept = frame.iloc[result.source_rows[:2000]]
    out: dict[str, list[list[str]]] = {}
    for name in config.quasi_identifiers:
        pairs = zip(kept[name].tolist(), result.data[name].head(2000).tolist(), strict=True)
        out[name] = [list(pair) for pair in dict.fromkeys(pairs)][:per_attribute]
    return out


def _size_histogram(sizes: list[int], bins: int = 20) -> list[list[int]]:
    """[[low, high, classes], ...] over class sizes, for the size distribution chart."""
    if not sizes:
        return []
    low, high = min(sizes), max(sizes)
    if high - low < bins:
        counts: dict[int, int] = {}
        for size in sizes:
            counts[size] = counts.get(size, 0) + 1
        return [[s, s, counts.get(s, 0)] for s in range(low, high + 1)]
    width = math.ceil((high - low + 1) / bins)
    out = [[low + i * width, low + (i + 1) * width - 1, 0] for i in range(bins)]
    for size in sizes:
        out[min((size - low) // width, bins - 1)][2] += 1
    return [b for b in out if b[0] <= high]


def _classes(
    release_request: ReleaseRequest,
    result,
    params: ReleaseParameters,
    qis: list[str],
    sensitive: list[str],
) -> list[EquivalenceClass]:
    """EquivalenceClass rows with, per sensitive attribute, its value counts and checks."""
    table = result.classes
    counts: dict[str, dict[tuple, dict[str, int]]] = {}
    for name in sensitive:
        grouped = result.data.groupby(qis, sort=False, dropna=False)[name].value_counts()
        per_class: dict[tuple, dict[str, int]] = {}
        for key, count in grouped.items():
            *class_key, value = key
            per_class.setdefault(tuple(class_key), {})[str(value)] = int(count)
        counts[name] = per_class
    rows = []
    for record in table.to_dict("records"):
        key = tuple(record[q] for q in qis)
        size = int(record["size"])
        fails = [m for m in str(record.get("fails") or "").split(",") if m]
        borderline = []
        if size == params.k:
            borderline.append("k")
        per_sensitive = {}
        for name in sensitive:
            distinct_l = _finite(float(record[f"{name}:distinct_l"]))
            entropy_l = _finite(float(record[f"{name}:entropy_l"]))
            t_value = float(record[f"{name}:t"])
            per_sensitive[name] = {
                "values": counts[name].get(key, {}),
                "distinct_l": distinct_l,
                "entropy_l": entropy_l,
                "t": t_value,
            }
            if params.l_diversity is not None:
                achieved = entropy_l if params.l_variant == "entropy" else distinct_l
                if achieved is not None and math.isclose(
                    achieved, params.l_diversity, abs_tol=1e-9
                ):
                    borderline.append(f"l ({name})")
            if (
                params.t_closeness is not None
                and t_value >= T_BORDERLINE_SHARE * params.t_closeness
            ):
                borderline.append(f"t ({name})")
        rows.append(
            EquivalenceClass(
                request=release_request,
                values={q: str(record[q]) for q in qis},
                size=size,
                risk=1.0 / size if size else 0.0,
                sensitive=per_sensitive,
                fails=fails,
                borderline=[] if fails else borderline,
            )
        )
    return rows


def _fail(release_request: ReleaseRequest, reason: str) -> None:
    with transaction.atomic():
        EquivalenceClass.objects.filter(request=release_request).delete()
        ReleaseRequest.objects.filter(pk=release_request.pk).update(
            state=State.FAILED, error=reason, stage="Failed", finished_at=timezone.now()
        )
        audit.record(
            AuditEvent.Action.RUN_FAILED,
            None,
            request=release_request,
            round=release_request.round,
            reason=reason,
        )


# --- Which requests a user sees ------------------------------------------------------------------


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


def approved_releases(user) -> QuerySet[ReleaseRequest]:
    if not (roles.is_recipient(user) or roles.is_steward(user)):
        raise PermissionDenied("Only recipients and data stewards can download releases.")
    return visible_requests(user).filter(state=State.APPROVED).order_by("-decided_at")
