"""Work left unfinished by a worker that died (killed, out of memory, machine restarted).

A starting worker calls :func:`fail_stale_work`: a release run or a profiling that has shown no
sign of life for a while cannot still be running, so it is marked failed with a reason the
requester can act on (resubmit the request, upload the file again) instead of spinning forever.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..models import AuditEvent, Dataset, EquivalenceClass, ReleaseRequest
from . import audit, lifecycle, profiling

logger = logging.getLogger(__name__)

RUN_LOST = (
    "The worker running this request stopped before it finished (it may have run out of "
    "memory or been restarted). Resubmit the request to run it again."
)
PROFILING_LOST = (
    "The worker reading this file stopped before it finished (it may have run out of memory "
    "or been restarted). Upload the file again."
)


def fail_stale_work(older_than: timedelta | None = None) -> tuple[int, int]:
    """Mark runs and profilings silent for ``older_than`` as failed; return how many of each."""
    if older_than is None:
        older_than = timedelta(seconds=settings.STALE_WORK_SECONDS)
    cutoff = timezone.now() - older_than
    silent = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True)
    runs = 0
    running = lifecycle.sources("fail_run")
    for release_request in ReleaseRequest.objects.filter(silent, state__in=running):
        with transaction.atomic():
            # Conditional update: a run that wrote a heartbeat meanwhile is left alone.
            if not ReleaseRequest.objects.filter(
                silent, pk=release_request.pk, state=release_request.state
            ).update(
                state=lifecycle.target(release_request.state, "fail_run"),
                error=RUN_LOST,
                stage="Failed",
                finished_at=timezone.now(),
            ):
                continue
            EquivalenceClass.objects.filter(request=release_request).delete()
            audit.record(
                AuditEvent.Action.RUN_FAILED,
                None,
                request=release_request,
                round=release_request.round,
                reason=RUN_LOST,
            )
        runs += 1
    stale = Dataset.objects.filter(silent, status=Dataset.Status.PROFILING)
    for dataset in stale:
        profiling.refuse(dataset, PROFILING_LOST)
    profilings = len(stale)
    if runs or profilings:
        logger.warning("Marked %s stale runs and %s stale profilings failed", runs, profilings)
    return runs, profilings


def sweep() -> dict[str, int]:
    """The periodic sweep (Celery beat): send what the broker missed, end what died, expire
    releases past their date."""
    from . import dispatch
    from .sharing import expire_due

    sent, waiting = dispatch.deliver_waiting()
    runs, profilings = fail_stale_work()
    # Approved releases past their expiry date: already refused, now also marked expired.
    expired = expire_due()
    return {
        "sent": sent,
        "waiting": waiting,
        "failed_runs": runs,
        "failed_profilings": profilings,
        "expired_releases": expired,
    }
