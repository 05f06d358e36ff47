"""Releases judged together, the worker's part: every extract run is measured with each earlier
released extract of the same dataset (the joint partition, ``engine.cross_release``), and a
round that asks to protect earlier releases searches with them.

An extract is described by its *membership*: per row of the dataset, its class number in the
extract (-1: not in it). Each run stores its own (a small ``.npy`` file in the round's
folder, named in the summary, deleted with the request's files), so later runs read it back;
a round stored before that is re-applied from its parameters (``release_membership``).

Everything here runs in the worker, never in a web request.
"""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from releases.core import figures, storage
from releases.core.errors import InvalidInput
from releases.datasets import versions
from releases.datasets.services import load_frame
from releases.engine import AnonymizationConfig, AnonymizationResult, EngineError, PrivacyModel
from releases.engine.criteria import EarlierReleases, LDiversity, TCloseness
from releases.engine.cross_release import (
    ASSUMPTION,
    NOT_IN,
    VERSIONS_LINKED,
    VERSIONS_UNLINKED,
    ReleasedColumns,
    align_by_key,
    cross_release_check,
    extract_membership,
    joint_class_sizes,
    linking_evidence,
    release_membership,
    sensitive_context,
    what_constrained,
)
from releases.models import Dataset, ReleaseRequest
from releases.requests.history import released_extracts
from releases.requests.parameters import ReleaseParameters

logger = logging.getLogger(__name__)

#: The summary's key naming the stored membership file of the round.
MEMBERSHIP = "membership_path"

#: The released columns of a stored round and the engine's configuration that re-applies it
#: (its levels fixed): what the run gives for a round stored without its membership.
Loader = Callable[[ReleaseRequest], tuple[pd.DataFrame, AnonymizationConfig]]


def release_name(release_request: ReleaseRequest) -> str:
    """How the pages, checks and the search name an earlier release."""
    return f"request #{release_request.pk}"


# --- Memberships -------------------------------------------------------------------------------


def store_membership(folder: str, membership: np.ndarray) -> str:
    """Write a round's membership into ``folder`` (int32 when it fits); its storage name."""
    small = membership.astype(np.int32) if membership.max(initial=0) < 2**31 else membership
    buffer = io.BytesIO()
    np.save(buffer, small, allow_pickle=False)
    return storage.save_bytes(folder, ".npy", buffer.getvalue())


def stored_membership(release_request: ReleaseRequest) -> np.ndarray | None:
    """The membership the round's run stored, or None (a round stored before runs did)."""
    path = (release_request.summary or {}).get(MEMBERSHIP)
    if not path or not storage.exists(path):
        return None
    with storage.open_file(path) as fh:
        return np.load(io.BytesIO(fh.read()), allow_pickle=False).astype(np.int64)


def reapplying(release_request: ReleaseRequest) -> ReleaseParameters:
    """A stored round's parameters with the levels it applied fixed (full-domain), so that
    re-applying it does not search again."""
    summary = release_request.summary or {}
    params = ReleaseParameters.of(release_request)
    if summary.get("levels"):
        params = params.with_levels({q: int(v) for q, v in summary["levels"].items()})
    return params


def reapplied_membership(release_request: ReleaseRequest, load: Loader) -> np.ndarray:
    """The membership of a round stored without one: its release re-applied to the dataset
    with its own snapshot and parameters."""
    frame, config = load(release_request)
    return release_membership(frame, config)


def membership_of(release_request: ReleaseRequest, load: Loader) -> tuple[np.ndarray, str]:
    """(membership, "stored" or "re-applied")."""
    stored = stored_membership(release_request)
    if stored is not None:
        return stored, "stored"
    return reapplied_membership(release_request, load), "re-applied"


def membership_of_result(
    result: AnonymizationResult, config: AnonymizationConfig, rows: int
) -> np.ndarray:
    """The membership of the extract a run just made (its released rows' classes)."""
    return extract_membership(
        result.data, np.asarray(result.source_rows), rows, list(config.quasi_identifiers)
    )


# --- The protecting search ---------------------------------------------------------------------


def protecting(model: PrivacyModel) -> bool:
    return any(isinstance(c, EarlierReleases) for c in model.criteria)


def protected_model(model: PrivacyModel) -> PrivacyModel:
    """``model`` with "every joint class with each earlier extract holds k rows" added, at the
    model's k (``InvalidInput`` when it asks for no k above 1)."""
    if model.k <= 1:
        raise InvalidInput(
            "Protecting earlier releases needs k-anonymity with k of at least 2: the size "
            "every joint class with an earlier extract must reach."
        )
    return PrivacyModel(
        criteria=[
            *(c for c in model.criteria if not isinstance(c, EarlierReleases)),
            EarlierReleases(k=model.k),
        ],
        suppression_limit=model.suppression_limit,
        population=model.population,
    )


def earlier_for_protection(
    params: ReleaseParameters, release_request: ReleaseRequest, load: Loader
) -> dict[str, np.ndarray]:
    """The memberships of the earlier releases the round protects, by name (as its parameters
    list them, so a reproduction searches with the same ones)."""
    wanted = list(params.earlier_releases or [])
    found = {
        r.pk: r
        for r in ReleaseRequest.objects.filter(
            pk__in=wanted, dataset_id=release_request.dataset_id, kind=ReleaseRequest.Kind.EXTRACT
        )
    }
    out: dict[str, np.ndarray] = {}
    for pk in wanted:
        earlier = found.get(pk)
        if earlier is None or earlier.state not in ReleaseRequest.RELEASED_STATES:
            raise InvalidInput(
                f"Request #{pk}, an earlier release this round protects, is no longer a release "
                "of this dataset. Resubmit to protect the releases there are now."
            )
        out[release_name(earlier)] = membership_of(earlier, load)[0]
    return out


def with_earlier(
    config: AnonymizationConfig, earlier: dict[str, np.ndarray]
) -> AnonymizationConfig:
    return dataclasses.replace(config, earlier_releases=earlier)


def constraint(frame: pd.DataFrame, config: AnonymizationConfig) -> dict[str, Any]:
    """Which earlier releases constrained the protected search (one more, plain search)."""
    try:
        found = what_constrained(frame, config)
    except EngineError as exc:  # the plain model found nothing either: nothing to compare
        return {"unprotected_levels": None, "constrained_by": [], "note": str(exc)}
    return found.as_dict()


# --- The check ---------------------------------------------------------------------------------


def _released_columns(summary: dict) -> ReleasedColumns:
    levels = summary.get("levels") or None
    qis = summary.get("quasi_identifiers") or []
    return ReleasedColumns(
        tuple(summary.get("released_columns") or []),
        {q: (None if levels is None else levels.get(q)) for q in qis},
        tuple(summary.get("sensitive") or []),
    )


def _released_columns_of(
    result: AnonymizationResult, config: AnonymizationConfig
) -> ReleasedColumns:
    levels = result.levels if result.algorithm != "mondrian" else None
    return ReleasedColumns(
        tuple(map(str, result.data.columns)),
        # A microaggregated column has no level: its values are per class, as local recoding's.
        {q: None if levels is None else levels.get(q) for q in config.quasi_identifiers},
        tuple(config.sensitive),
    )


def judge(
    release_request: ReleaseRequest,
    result: AnonymizationResult,
    config: AnonymizationConfig,
    frame: pd.DataFrame,
    new: np.ndarray,
    load: Loader,
) -> list[dict[str, Any]]:
    """Per earlier released extract of the dataset, the joint partition of the new extract
    (``result`` of ``config``, its membership ``new``) with it, measured
    (``summary["cross_release"]``)."""
    model = config.model
    k = max(model.k, 1)
    ell = next((c for c in model.criteria if isinstance(c, LDiversity)), None)
    tee = next((c for c in model.criteria if isinstance(c, TCloseness)), None)
    context = None
    if config.sensitive and (ell is not None or tee is not None):
        context = sensitive_context(frame, config.sensitive, config.sensitive_hierarchies)
    mine = _released_columns_of(result, config)
    entries = []
    dataset = release_request.dataset
    earlier_ones = [
        *earlier_versions_released(dataset),
        *released_extracts(dataset, exclude=release_request.pk),
    ]
    keys: dict[int, list[str]] = {}

    def keys_of(version: Dataset) -> list[str]:
        if version.pk not in keys:
            keys[version.pk] = load_frame(version, [dataset.key_column])[
                dataset.key_column
            ].tolist()
        return keys[version.pk]

    for earlier in earlier_ones:
        try:
            membership, source = membership_of(earlier, load)
            if earlier.dataset_id != dataset.pk:
                membership = align_by_key(membership, keys_of(earlier.dataset), keys_of(dataset))
                source = f"{source}, linked by {dataset.key_column}"
        except (EngineError, InvalidInput, KeyError, ValueError) as exc:
            entries.append(_unmeasured(earlier, f"it could not be re-applied: {exc}"))
            continue
        if len(membership) != len(new):
            entries.append(
                _unmeasured(
                    earlier,
                    f"it describes {len(membership):,} rows and this dataset has {len(new):,}",
                )
            )
            continue
        check = cross_release_check(
            new,
            membership,
            k,
            sensitive=context,
            entropy=ell is not None and ell.variant == "entropy",
            t_distance=None if tee is None else tee.distance,
            l_required=None if ell is None else ell.l,
            t_required=None if tee is None else tee.t,
        )
        evidence = linking_evidence(mine, _released_columns(earlier.summary or {}))
        entries.append(
            {
                **_described(earlier),
                **_finite(check.as_dict()),
                "measured": True,
                "membership": source,
                "evidence": evidence.as_dict(),
                "joint_sizes": figures.size_counts(joint_class_sizes(new, membership)),
            }
        )
    return entries


def has_earlier(release_request: ReleaseRequest) -> bool:
    """Whether a new extract of the request's dataset has earlier released ones to be judged
    with (:func:`judge`)."""
    dataset = release_request.dataset
    return bool(earlier_versions_released(dataset)) or (
        released_extracts(dataset, exclude=release_request.pk).exists()
    )


def earlier_versions_released(dataset: Dataset) -> list[ReleaseRequest]:
    """The released extracts of the lineage's earlier versions, oldest first: judged with a new
    extract as releases of the same source, when a key column links the versions' rows
    (without one, they are not linked: see :func:`summary_part`)."""
    if not dataset.key_column:
        return []
    earlier = versions.lineage(dataset).filter(version__lt=dataset.version)
    return list(
        ReleaseRequest.objects.filter(
            dataset__in=earlier,
            kind=ReleaseRequest.Kind.EXTRACT,
            state__in=ReleaseRequest.RELEASED_STATES,
        )
        .select_related("dataset", "requested_by")
        .order_by("dataset__version", "decided_at", "id")
    )


def _finite(figures_: dict) -> dict:
    """JSON has no infinity: an unbounded entropy l is None."""

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, float) and not np.isfinite(value):
            return None
        return value

    return clean(figures_)


def _described(earlier: ReleaseRequest) -> dict[str, Any]:
    return {
        "request": earlier.pk,
        "name": release_name(earlier),
        "dataset": earlier.dataset_id,
        "version": earlier.dataset.version,
        "description": earlier.model_description,
        "state": earlier.effective_state,
        "approved_at": earlier.decided_at.isoformat() if earlier.decided_at else None,
        "requested_by": earlier.requested_by.get_username(),
    }


def _unmeasured(earlier: ReleaseRequest, reason: str) -> dict[str, Any]:
    logger.warning("Cross-release check with request %s not measured: %s", earlier.pk, reason)
    return {**_described(earlier), "measured": False, "passed": False, "reason": reason}


def summary_part(
    entries: Sequence[dict[str, Any]], dataset: Dataset | None = None
) -> dict[str, Any]:
    """What the run adds to the summary beside the entries: the assumption, and for a version
    of a lineage how releases of its other versions are judged."""
    assumption = ASSUMPTION
    if dataset is not None and (dataset.version > 1 or dataset.next_versions.exists()):
        assumption += " " + (
            VERSIONS_LINKED.format(key=dataset.key_column)
            if dataset.key_column
            else VERSIONS_UNLINKED
        )
    return {"cross_release": list(entries), "cross_release_assumption": assumption}


__all__ = [
    "MEMBERSHIP",
    "NOT_IN",
    "constraint",
    "earlier_for_protection",
    "has_earlier",
    "judge",
    "membership_of",
    "membership_of_result",
    "reapplying",
    "protected_model",
    "protecting",
    "store_membership",
    "summary_part",
    "with_earlier",
]
