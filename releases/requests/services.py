"""Release requests: making one, resubmitting, re-running or cancelling it, and who receives a
release (recipients named at approval, acceptance of the terms of use, revocation, expiry).

Every change of state goes through :mod:`releases.requests.rules`, which says who may do it
and from which state; each change is audited in the same transaction. Running a round is the
worker's (:mod:`releases.requests.run`).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from releases.background import outbox
from releases.core import audit, roles, storage
from releases.core.errors import InvalidInput
from releases.datasets import versions
from releases.datasets.selectors import ensure_ready, get_dataset_for
from releases.engine import EngineError, PrivacyModel
from releases.engine import parse_levels as parse_engine_levels
from releases.engine.criteria import Classes, DataContext, EarlierReleases
from releases.events import emit
from releases.models import (
    RELEASED_ROLES,
    UNCHANGED_ROLES,
    AuditEvent,
    Dataset,
    EquivalenceClass,
    ReleaseFile,
    ReleaseRequest,
    ReleaseRound,
    Role,
    ShuffleScheme,
    TermsAcceptance,
)
from releases.requests import dp_budget, package, rules
from releases.requests.parameters import MAX_TIME_LIMIT, ReleaseParameters
from releases.requests.selectors import ROLE_GROUPS, locked

#: The task that runs an extract's round.
RUN_TASK = "releases.run_release"


@dataclass(frozen=True)
class Sharing:
    """Who receives a release and on which terms: named recipients and groups, the data sharing
    agreement they accept before downloading (the site's default when ``None``), and the last
    day it can be downloaded."""

    recipients: list = field(default_factory=list)
    recipient_groups: list = field(default_factory=list)
    terms: str | None = None
    expires_at: datetime.date | None = None


def default_terms(dataset: Dataset | None = None) -> str:
    """The dataset's project's terms of use, or the site's (``DEFAULT_DATA_SHARING_TERMS``)."""
    if dataset is not None and dataset.project.default_terms.strip():
        return dataset.project.default_terms
    return settings.DEFAULT_DATA_SHARING_TERMS


def validate_sharing(sharing: Sharing) -> None:
    """Recipients must hold the recipient role; no staff group; an expiry date not past."""
    for user in sharing.recipients:
        if not roles.is_recipient(user):
            raise InvalidInput(
                f"{user.get_username()} is not a recipient: only people holding the "
                "recipient role in a project (any project) can be named on a release."
            )
    for group in sharing.recipient_groups:
        if group.name in ROLE_GROUPS:
            raise InvalidInput(
                f"A release cannot be shared with the whole {group.name} group: name the "
                "recipients, or a group made for this purpose."
            )
    if sharing.expires_at is not None and sharing.expires_at < timezone.localdate():
        raise InvalidInput("The expiry date has passed: choose today or a later day.")
    if sharing.terms is not None and not sharing.terms.strip():
        raise InvalidInput("Write the terms of use recipients accept, or keep the default.")


# --- Making and resubmitting a request -------------------------------------------------------


def tagging_snapshot(dataset: Dataset, justifications: dict[str, str] | None = None) -> dict:
    """The column roles and hierarchies as they are now, frozen into the request's round.

    ``roles`` records every column's role ("" for none); ``released`` lists the extract's
    columns in the dataset's order. Only quasi-identifiers, sensitive and "released as is"
    columns are released; identifiers, withheld columns and columns without a role are not.
    """
    justifications = {k: (v or "").strip() for k, v in (justifications or {}).items()}
    snapshot: dict = {
        "identifiers": [],
        "quasi_identifiers": [],
        "sensitive": [],
        "sensitive_hierarchies": {},
        "insensitive": [],
        "withheld": [],
        "unroled": [],
        "released": [],
        "roles": {},
        "types": {},
        "suggested": {},
        "justifications": {},
    }
    for column in dataset.columns.all():
        if column.name == dataset.key_column and column.role in RELEASED_ROLES:
            column.role = Role.WITHHELD  # the lineage's key column is never released
        snapshot["roles"][column.name] = column.role
        snapshot["types"][column.name] = column.column_type
        if column.suggested_role:
            snapshot["suggested"][column.name] = {
                "role": column.suggested_role,
                "reason": column.suggestion_reason,
            }
        if column.role in RELEASED_ROLES:
            snapshot["released"].append(column.name)
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
        elif column.role == Role.INSENSITIVE:
            snapshot["insensitive"].append(column.name)
        elif column.role == Role.WITHHELD:
            snapshot["withheld"].append(column.name)
        else:
            snapshot["unroled"].append(column.name)
        if (
            column.role in UNCHANGED_ROLES
            and column.suggested_role == Role.IDENTIFIER
            and justifications.get(column.name)
        ):
            snapshot["justifications"][column.name] = justifications[column.name]
    return snapshot


def _validate(params: ReleaseParameters, dataset: Dataset, snapshot: dict) -> None:
    if snapshot.get("unroled"):
        names = ", ".join(snapshot["unroled"])
        raise InvalidInput(
            "Give every column a role before requesting a release: nothing leaves without a "
            f"decision. No role yet: {names}."
        )
    unjustified = [
        name
        for name in snapshot.get("released", [])
        if snapshot["suggested"].get(name, {}).get("role") == Role.IDENTIFIER
        and snapshot["roles"].get(name) in UNCHANGED_ROLES
        and not snapshot["justifications"].get(name)
    ]
    if unjustified:
        raise InvalidInput(
            "These columns look like direct identifiers and would be released as they are: "
            f"{', '.join(unjustified)}. Drop or withhold them, or write why each must be "
            "released unchanged."
        )
    model = params.model
    try:
        model.validate()
    except EngineError as exc:
        raise InvalidInput(str(exc)) from None
    if params.algorithm not in ReleaseRequest.Algorithm.values:
        raise InvalidInput(f"Unknown algorithm {params.algorithm!r}.")
    if not snapshot["quasi_identifiers"]:
        raise InvalidInput(
            "Tag at least one column as a quasi-identifier before requesting a release."
        )
    if not model.criteria:
        raise InvalidInput("Choose at least one privacy model.")
    if any(isinstance(c, EarlierReleases) for c in model.criteria) != bool(params.earlier_releases):
        raise InvalidInput(
            "Protecting earlier releases needs the earlier releases to protect, and they are "
            "protected only by that privacy model."
        )
    if _protects_nothing(model):
        raise InvalidInput(
            f"{model.describe_criteria()} holds even when every record is alone in its class: "
            "ask for k of at least 2, or for another privacy model."
        )
    if model.k > dataset.row_count:
        raise InvalidInput(f"k={model.k} is larger than the dataset's {dataset.row_count} rows.")
    population = model.population
    if population is not None and population.size(dataset.row_count) < dataset.row_count:
        raise InvalidInput(
            f"The population ({population.size(dataset.row_count):,}) is smaller than the "
            f"dataset ({dataset.row_count:,} rows)."
        )
    for criterion in model.criteria:
        if criterion.needs_sensitive and not snapshot["sensitive"]:
            raise InvalidInput(
                f"The privacy model {criterion.label} needs at least one sensitive column: tag "
                "one on the dataset page."
            )
        if criterion.requires_hierarchy():
            missing = [
                s for s in snapshot["sensitive"] if s not in snapshot["sensitive_hierarchies"]
            ]
            if missing:
                raise InvalidInput(
                    f"{criterion.describe()} needs a hierarchy for the sensitive column "
                    f"{missing[0]!r}: upload one on the dataset page."
                )
        if params.algorithm == ReleaseRequest.Algorithm.MONDRIAN and not criterion.local_recoding:
            raise InvalidInput(
                f"The privacy model {criterion.label} cannot be enforced by Mondrian (local "
                "recoding): choose the optimal search."
            )
    if params.algorithm == ReleaseRequest.Algorithm.HEURISTIC:
        limit = params.time_limit
        if limit is None or not 1 <= limit <= MAX_TIME_LIMIT:
            raise InvalidInput(
                "The search within a time limit needs the time limit, in seconds (1 to "
                f"{MAX_TIME_LIMIT:,})."
            )
    elif params.time_limit is not None:
        raise InvalidInput("A time limit applies to the search within a time limit only.")
    if params.levels:
        if params.algorithm != ReleaseRequest.Algorithm.OPTIMAL:
            raise InvalidInput(
                "Fixed levels apply to the optimal search, not to "
                f"{ReleaseRequest.Algorithm(params.algorithm).label}."
            )
        qis = {q["name"] for q in snapshot["quasi_identifiers"]}
        unknown = sorted(set(params.levels) - qis)
        if unknown:
            raise InvalidInput(f"{unknown[0]!r} is not a quasi-identifier of this release.")
    dp_budget.check_fits(dataset, model)


def _protects_nothing(model: PrivacyModel) -> bool:
    """Whether records alone in their class satisfy every model asked for (k=1, a highest
    risk of 100 %...). Models of sensitive values or of the population always protect."""
    singles = Classes(np.ones(1, dtype=np.int64))
    context = DataContext(1)
    for criterion in model.criteria:
        if criterion.needs_sensitive or criterion.needs_population:
            return False
        if criterion.scope == "class" and criterion.class_fails(singles, context).any():
            return False
        if criterion.scope == "dataset" and not criterion.fulfilled(singles.sizes, context):
            return False
    return True


def request_release(
    user,
    dataset: Dataset,
    params: ReleaseParameters,
    sharing: Sharing | None = None,
    justifications: dict[str, str] | None = None,
) -> ReleaseRequest:
    """Save a release request and enqueue its run once the transaction has committed."""
    dataset = get_dataset_for(user, dataset.pk)
    ensure_ready(dataset)
    versions.check_request(dataset)
    sharing = sharing or Sharing()
    snapshot = tagging_snapshot(dataset, justifications)
    _validate(params, dataset, snapshot)
    validate_sharing(sharing)
    with transaction.atomic():
        release_request = ReleaseRequest.objects.create(
            dataset=dataset,
            requested_by=user,
            config=snapshot,
            stage="Waiting for a worker",
            shuffle_seed=package.new_seed(),
            terms=(sharing.terms if sharing.terms is not None else default_terms(dataset)).strip(),
            expires_at=sharing.expires_at,
            parameters=params.to_json(),
        )
        release_request.recipients.set(sharing.recipients)
        release_request.recipient_groups.set(sharing.recipient_groups)
        audit.record(
            AuditEvent.Action.REQUEST,
            user,
            request=release_request,
            model=release_request.model_description,
            privacy_model=params.model.to_spec(),
            algorithm=params.algorithm,
            quasi_identifiers=[q["name"] for q in snapshot["quasi_identifiers"]],
            released_as_is=[*snapshot["sensitive"], *snapshot["insensitive"]],
            withheld=snapshot["withheld"],
            justifications=snapshot["justifications"],
            recipients=[u.get_username() for u in sharing.recipients],
            recipient_groups=[g.name for g in sharing.recipient_groups],
            expires_at=sharing.expires_at.isoformat() if sharing.expires_at else None,
        )
        emit.transition(release_request, "", release_request.state)
        outbox.enqueue(RUN_TASK, release_request.pk)
    return release_request


def _round_files(release_request: ReleaseRequest):
    return release_request.files.filter(round=release_request.round)


def resubmit(
    user,
    request_id: int,
    params: ReleaseParameters,
    response: str,
    justifications: dict[str, str] | None = None,
) -> ReleaseRequest:
    """Answer a "changes requested" (or a failed or cancelled run) and start a new round."""
    response = (response or "").strip()
    with transaction.atomic():
        release_request = locked(request_id)
        rules.check_resubmit(user, release_request)
        if not response:
            raise InvalidInput("Answer the reviewers' comments before resubmitting.")
        dataset = get_dataset_for(user, release_request.dataset_id)
        versions.check_request(dataset)
        snapshot = tagging_snapshot(dataset, justifications)
        _validate(params, dataset, snapshot)
        _new_round(user, release_request, "resubmit", params, snapshot, response)
        audit.record(
            AuditEvent.Action.RESUBMIT,
            user,
            request=release_request,
            round=release_request.round,
            comment=response,
            model=release_request.model_description,
            privacy_model=params.model.to_spec(),
            justifications=snapshot["justifications"],
        )
    return release_request


def parse_levels(text: str) -> dict[str, int]:
    """A candidate's levels as a person types or a page posts them (``age=2,sex=0``)."""
    try:
        return parse_engine_levels(text)
    except EngineError as exc:
        raise InvalidInput(str(exc)) from None


def candidate_levels(summary: dict, levels: dict[str, int]) -> dict | None:
    """The stored candidate (or optimum) of a result with exactly these levels, or None."""
    wanted = {str(q): int(v) for q, v in (levels or {}).items()}
    for candidate in [*(summary.get("candidates") or []), summary.get("optimum") or {}]:
        if candidate and {q: int(v) for q, v in candidate["levels"].items()} == wanted:
            return candidate
    return None


def rerun_with_levels(user, request_id: int, levels: dict[str, int]) -> ReleaseRequest:
    """Start a new round with one of the result's candidates: the same privacy model and
    tagging, the candidate's generalization levels instead of the optimum's. Choosing the
    optimum itself goes back to searching."""
    with transaction.atomic():
        release_request = locked(request_id)
        rules.check_rerun(user, release_request)
        summary = release_request.summary or {}
        candidate = candidate_levels(summary, levels)
        if candidate is None:
            raise InvalidInput("Choose one of the candidates listed for this result.")
        if candidate["levels"] == summary.get("levels"):
            raise InvalidInput("This round already applies these levels.")
        fixed = None if candidate.get("optimum") else dict(candidate["levels"])
        params = ReleaseParameters.of(release_request).with_levels(fixed)
        # The candidate's levels belong to this round's quasi-identifiers and hierarchies.
        snapshot = release_request.config
        _validate(params, release_request.dataset, snapshot)
        shown = ", ".join(f"{q}={v}" for q, v in candidate["levels"].items())
        what = "the optimum" if fixed is None else "a candidate"
        response = f"Re-run with {what} of round {release_request.round}: {shown}."
        _new_round(user, release_request, "rerun", params, snapshot, response)
        audit.record(
            AuditEvent.Action.RESUBMIT,
            user,
            request=release_request,
            round=release_request.round,
            comment=response,
            model=release_request.model_description,
            levels=fixed,
            candidate={k: candidate[k] for k in ("loss", "highest_risk", "suppressed")},
        )
    return release_request


def _new_round(
    user,
    release_request: ReleaseRequest,
    action: str,
    params: ReleaseParameters,
    snapshot: dict,
    response: str,
) -> None:
    """Archive the current round (its parameters, result, files' digests, answer) and queue
    the next one with ``params``; the old files go once the transaction commits."""
    old_files = list(_round_files(release_request))
    ReleaseRound.objects.create(
        request=release_request,
        number=release_request.round,
        parameters={
            **release_request.parameters,
            "config": release_request.config,
            "shuffle_seed": release_request.shuffle_seed,
            "shuffle_scheme": release_request.shuffle_scheme,
            "package_sha256": release_request.package_sha256,
            "files": [
                {"format": f.format, "sha256": f.sha256, "size_bytes": f.size_bytes}
                for f in old_files
            ],
        },
        outcome=release_request.state,
        summary=release_request.summary,
        error=release_request.error,
        extract_sha256=release_request.extract_sha256,
        submitted_at=release_request.submitted_at,
        response=response,
    )
    EquivalenceClass.objects.filter(request=release_request).delete()
    # The previous round's files can never be downloaded: their rows go now, the files
    # once committed.
    old_paths = [f.path for f in old_files] + [release_request.extract_path]
    # The round's membership (for the releases judged with it later) goes with its files.
    old_paths.append((release_request.summary or {}).get("membership_path") or "")
    ReleaseFile.objects.filter(pk__in=[f.pk for f in old_files]).delete()
    release_request.parameters = params.to_json()
    release_request.config = snapshot
    release_request.shuffle_seed = package.new_seed()
    release_request.shuffle_scheme = ShuffleScheme.KEYED
    was = release_request.state
    open_round(release_request, action)
    release_request.save()
    emit.transition(release_request, was, release_request.state)
    transaction.on_commit(lambda: delete_files(old_paths))
    outbox.enqueue(RUN_TASK, release_request.pk)


def delete_files(paths: list[str]) -> None:
    """Remove a round's files once the transaction that replaced them has committed."""
    for path in paths:
        storage.delete_quietly(path)


def open_round(release_request: ReleaseRequest, action: str) -> None:
    """Start the next round of a request (extract or statistics), unsaved: queued for a worker,
    with nothing of the previous round's run, result or files."""
    release_request.round += 1
    release_request.state = rules.target(release_request.state, action)
    release_request.progress = 0.0
    release_request.stage = "Waiting for a worker"
    release_request.error = ""
    release_request.summary = {}
    release_request.extract_path = ""
    release_request.extract_sha256 = ""
    release_request.package_sha256 = ""
    release_request.submitted_at = timezone.now()
    release_request.started_at = None
    release_request.heartbeat_at = None
    release_request.finished_at = None
    release_request.attempts = 0
    release_request.worker = ""


def cancel(user, request_id: int, reason: str = "") -> ReleaseRequest:
    """Stop a queued or running request: a running one stops within a heartbeat (its lease,
    ``background.leases``) and keeps nothing."""
    with transaction.atomic():
        release_request = locked(request_id)
        rules.check_cancel(user, release_request)
        was = release_request.state
        release_request.state = rules.target(was, "cancel")
        release_request.stage = "Cancelled"
        release_request.finished_at = timezone.now()
        release_request.save(update_fields=["state", "stage", "finished_at"])
        audit.record(
            AuditEvent.Action.CANCEL,
            user,
            request=release_request,
            round=release_request.round,
            was=was,
            reason=(reason or "").strip(),
        )
        emit.transition(release_request, was, release_request.state)
    return release_request


# --- Who receives a release ------------------------------------------------------------------


@dataclass(frozen=True)
class Additions:
    """What an approving officer adds: recipients, groups, and an expiry date."""

    recipients: list = field(default_factory=list)
    recipient_groups: list = field(default_factory=list)
    expires_at: datetime.date | None = None

    def __bool__(self) -> bool:
        return bool(self.recipients or self.recipient_groups or self.expires_at)


def add(user, release_request: ReleaseRequest, additions: Additions) -> None:
    """Name more recipients (never fewer) and set the expiry date; audited. Called by the
    review service inside its transaction, once the approval is allowed."""
    if not additions:
        return
    validate_sharing(
        Sharing(
            recipients=additions.recipients,
            recipient_groups=additions.recipient_groups,
            expires_at=additions.expires_at,
        )
    )
    release_request.recipients.add(*additions.recipients)
    release_request.recipient_groups.add(*additions.recipient_groups)
    if additions.expires_at is not None:
        release_request.expires_at = additions.expires_at
        release_request.save(update_fields=["expires_at"])
    audit.record(
        AuditEvent.Action.RECIPIENTS,
        user,
        request=release_request,
        added_recipients=[u.get_username() for u in additions.recipients],
        added_groups=[g.name for g in additions.recipient_groups],
        expires_at=additions.expires_at.isoformat() if additions.expires_at else None,
    )


def accept_terms(user, request_id: int) -> TermsAcceptance:
    """Record that ``user`` accepts the release's terms (exactly this text, by its SHA-256)."""
    try:
        with transaction.atomic():
            release_request = locked(request_id)
            rules.check_accept_terms(user, release_request)
            acceptance = TermsAcceptance.objects.create(
                request=release_request, user=user, terms_sha256=release_request.terms_sha256
            )
            audit.record(
                AuditEvent.Action.TERMS_ACCEPTED,
                user,
                request=release_request,
                terms_sha256=release_request.terms_sha256,
            )
    except IntegrityError:
        raise InvalidInput("You have accepted these terms.") from None
    return acceptance


def revoke(user, request_id: int, reason: str) -> ReleaseRequest:
    """Withdraw an approved release at once: nobody can download it any more."""
    reason = (reason or "").strip()
    with transaction.atomic():
        release_request = locked(request_id)
        rules.check_revoke(user, release_request)
        if not reason:
            raise InvalidInput("Give the reason for revoking this release.")
        was = release_request.state
        release_request.state = rules.target(release_request.state, "revoke")
        release_request.revoked_at = timezone.now()
        release_request.revoked_by = user
        release_request.revocation_reason = reason
        release_request.save(
            update_fields=["state", "revoked_at", "revoked_by", "revocation_reason"]
        )
        audit.record(
            AuditEvent.Action.REVOKE,
            user,
            request=release_request,
            round=release_request.round,
            reason=reason,
        )
        emit.transition(release_request, was, release_request.state)
    return release_request


def expire_due() -> int:
    """Write the expired state of approved releases whose expiry date has passed (pages and
    downloads already treat them as expired); returns how many."""
    expired = 0
    due = ReleaseRequest.objects.filter(
        state__in=rules.sources("expire"), expires_at__lt=timezone.localdate()
    ).values_list("pk", flat=True)
    for request_id in due:
        with transaction.atomic():
            release_request = locked(request_id)
            if rules.refusal("expire", None, release_request) is not None:
                continue
            was = release_request.state
            release_request.state = rules.target(release_request.state, "expire")
            release_request.save(update_fields=["state"])
            audit.record(
                AuditEvent.Action.EXPIRE,
                None,
                request=release_request,
                round=release_request.round,
                expires_at=cast(datetime.date, release_request.expires_at).isoformat(),
            )
            emit.transition(release_request, was, release_request.state)
            expired += 1
    return expired
