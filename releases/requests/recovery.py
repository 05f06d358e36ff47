"""What the sweeper does for requests (registered from ``ReleasesConfig.ready``): a run (of any
kind), a reproduction or a linkage whose worker died gets another attempt or ends failed with a
reason;
queued work whose message was lost is sent again; approved releases past their expiry date are
marked expired."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from releases.background import leases, outbox, recovery
from releases.core import audit
from releases.events import emit
from releases.models import (
    AttackerFile,
    AuditEvent,
    EquivalenceClass,
    ReleaseRequest,
    Reproduction,
)
from releases.requests import kinds, rules, services
from releases.requests.attacker import LINK_TASK
from releases.requests.reproduction import REPRODUCE_TASK
from releases.requests.run import discard_attempt

logger = logging.getLogger(__name__)

State = ReleaseRequest.State
RState = Reproduction.State


def run_lost_message(attempts: int, cause: str) -> str:
    return (
        f"The worker running this request stopped before it finished, {attempts} "
        f"time{'s' if attempts != 1 else ''} ({cause}). Resubmit the request to run it again, "
        "with fewer quasi-identifiers or shorter hierarchies if it keeps stopping."
    )


def recover_run(release_request: ReleaseRequest) -> str:
    """Give a run whose lease expired another attempt, or fail it; "" when it is alive."""
    lost = ReleaseRequest.objects.filter(
        recovery.silent(),
        pk=release_request.pk,
        state=State.RUNNING,
        attempts=release_request.attempts,
        round=release_request.round,
    )
    retry = release_request.attempts < leases.max_attempts()
    with transaction.atomic():
        if retry:
            done = lost.update(
                state=rules.target(State.RUNNING, "retry_run"),
                progress=0.0,
                stage=recovery.retry_stage(release_request.attempts),
                started_at=None,
                heartbeat_at=None,
            )
        else:
            reason = run_lost_message(
                release_request.attempts,
                recovery.cause(release_request.started_at, release_request.heartbeat_at),
            )
            done = lost.update(
                state=rules.target(State.RUNNING, "fail_run"),
                error=reason,
                stage="Failed",
                finished_at=timezone.now(),
            )
        if not done:
            return ""  # it renewed its lease, finished or was cancelled meanwhile
        emit.transition(
            release_request,
            State.RUNNING,
            rules.target(State.RUNNING, "retry_run" if retry else "fail_run"),
        )
        EquivalenceClass.objects.filter(request=release_request).delete()
        if retry:
            audit.record(
                AuditEvent.Action.RUN_RETRIED,
                None,
                request=release_request,
                round=release_request.round,
                attempt=release_request.attempts,
                worker=release_request.worker,
            )
            outbox.enqueue(kinds.of(release_request).task, release_request.pk)
        else:
            audit.record(
                AuditEvent.Action.RUN_FAILED,
                None,
                request=release_request,
                round=release_request.round,
                attempt=release_request.attempts,
                worker=release_request.worker,
                reason=reason,
            )
    discard_attempt(release_request.pk, release_request.round, release_request.attempts)
    logger.warning(
        "Request %s: worker %s stopped (attempt %s): %s",
        release_request.pk,
        release_request.worker,
        release_request.attempts,
        "retried" if retry else "failed",
    )
    return "retried" if retry else "failed"


def recover_reproduction(reproduction: Reproduction) -> str:
    lost = Reproduction.objects.filter(
        recovery.silent(),
        pk=reproduction.pk,
        state=RState.RUNNING,
        attempts=reproduction.attempts,
    )
    with transaction.atomic():
        if reproduction.attempts < leases.max_attempts():
            if not lost.update(
                state=rules.REPRODUCTION.target(RState.RUNNING, "retry"), heartbeat_at=None
            ):
                return ""
            outbox.enqueue(REPRODUCE_TASK, reproduction.pk)
            return "retried"
        reason = (
            f"The worker re-running this release stopped before it finished, "
            f"{reproduction.attempts} times ({recovery.cause(None, None)}). Ask for another "
            "reproduction to try again."
        )
        failed = rules.REPRODUCTION.target(RState.RUNNING, "fail")
        if not lost.update(state=failed, error=reason, finished_at=timezone.now()):
            return ""
        audit.record(
            AuditEvent.Action.REPRODUCED,
            None,
            request=reproduction.request,
            round=reproduction.round,
            outcome=failed,
            files={},
            reason=reason,
        )
        return "failed"


def recover_linkage(attacker: AttackerFile) -> str:
    lost = AttackerFile.objects.filter(
        recovery.silent(),
        pk=attacker.pk,
        state=AttackerFile.State.RUNNING,
        attempts=attacker.attempts,
    )
    with transaction.atomic():
        if attacker.attempts < leases.max_attempts():
            if not lost.update(
                state=rules.LINKAGE.target(AttackerFile.State.RUNNING, "retry"),
                stage=recovery.retry_stage(attacker.attempts),
                heartbeat_at=None,
            ):
                return ""
            outbox.enqueue(LINK_TASK, attacker.pk)
            return "retried"
        reason = (
            f"The worker linking the attacker file stopped before it finished, "
            f"{attacker.attempts} times ({recovery.cause(None, None)}). Attach the file again "
            "to try again."
        )
        if not lost.update(
            state=rules.LINKAGE.target(AttackerFile.State.RUNNING, "fail"),
            stage="Failed",
            error=reason,
            finished_at=timezone.now(),
        ):
            return ""
        audit.record(
            AuditEvent.Action.LINKED,
            None,
            request=attacker.request,
            round=attacker.request.round,
            attacker_sha256=attacker.sha256,
            reason=reason,
        )
        return "failed"


def waiting_runs() -> list[tuple[str, int]]:
    queued = ReleaseRequest.objects.filter(state=State.QUEUED).order_by("pk")
    return [
        (kinds.named(kind).task, pk)
        for pk, kind in queued.values_list("pk", "kind")[: recovery.SWEEP_BATCH]
    ]


def waiting_reproductions() -> list[tuple[str, int]]:
    return [
        (REPRODUCE_TASK, pk)
        for pk in recovery.pks(Reproduction.objects.filter(state=RState.QUEUED))
    ]


def waiting_linkages() -> list[tuple[str, int]]:
    queued = AttackerFile.objects.filter(state__in=rules.LINKAGE.sources("start"))
    return [(LINK_TASK, pk) for pk in recovery.pks(queued)]


recovery.register(
    recovery.Work("runs", ReleaseRequest, running={"state": State.RUNNING}, recover=recover_run),
    waiting=waiting_runs,
)
recovery.register(
    recovery.Work(
        "reproductions",
        Reproduction,
        running={"state": RState.RUNNING},
        recover=recover_reproduction,
        related=("request__dataset",),
    ),
    waiting=waiting_reproductions,
)
recovery.register(
    recovery.Work(
        "linkages",
        AttackerFile,
        running={"state": AttackerFile.State.RUNNING},
        recover=recover_linkage,
        related=("request",),
    ),
    waiting=waiting_linkages,
)
# Approved releases past their expiry date: already refused, now also marked expired.
recovery.register_periodic(recovery.Periodic("expired_releases", services.expire_due))
