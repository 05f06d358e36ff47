"""What the sweeper does for datasets (registered from ``ReleasesConfig.ready``): a profiling
whose worker died gets another attempt or the file is refused with a reason, a dataset still
waiting for a worker long after its message went out is sent again, and a large dataset whose
risk figures are missing gets a worker asked for them."""

from __future__ import annotations

import logging

from django.db import transaction

from releases.background import leases, outbox, recovery
from releases.core import audit
from releases.datasets import profiling, risk, rules
from releases.datasets.selectors import PROFILE_TASK
from releases.models import AuditEvent, Dataset

logger = logging.getLogger(__name__)


def profiling_lost_message(attempts: int, cause: str) -> str:
    return (
        f"The worker reading this file stopped before it finished, {attempts} "
        f"time{'s' if attempts != 1 else ''} ({cause}). Upload the file again, or a smaller "
        "one (fewer rows or columns) if it keeps stopping."
    )


def recover_profiling(dataset: Dataset) -> str:
    """Give a profiling whose lease expired another attempt, or refuse the file."""
    still = {"attempts": dataset.attempts, "status": Dataset.Status.PROFILING}
    if dataset.attempts >= leases.max_attempts():
        reason = profiling_lost_message(dataset.attempts, recovery.cause(None, None))
        silent = Dataset.objects.filter(recovery.silent(), pk=dataset.pk, **still).exists()
        if silent and profiling.refuse(dataset, reason, **still, heartbeat_at=dataset.heartbeat_at):
            logger.warning("Dataset %s: worker %s stopped: refused", dataset.pk, dataset.worker)
            return "failed"
        return ""
    with transaction.atomic():
        done = Dataset.objects.filter(recovery.silent(), pk=dataset.pk, **still).update(
            status=rules.target(Dataset.Status.PROFILING, "retry_profiling"),
            progress=0.0,
            stage=recovery.retry_stage(dataset.attempts),
            heartbeat_at=None,
        )
        if not done:
            return ""
        audit.record(
            AuditEvent.Action.PROFILING_RETRIED,
            None,
            dataset=dataset,
            dataset_name=dataset.name,
            attempt=dataset.attempts,
            worker=dataset.worker,
        )
        outbox.enqueue(PROFILE_TASK, dataset.pk)
    logger.warning("Dataset %s: worker %s stopped: retried", dataset.pk, dataset.worker)
    return "retried"


def waiting_profilings() -> list[tuple[str, int]]:
    return [
        (PROFILE_TASK, pk)
        for pk in recovery.pks(Dataset.objects.filter(status=Dataset.Status.PENDING))
    ]


recovery.register(
    recovery.Work(
        "profilings",
        Dataset,
        running={"status": Dataset.Status.PROFILING},
        recover=recover_profiling,
    ),
    waiting=waiting_profilings,
)
recovery.register_periodic(recovery.Periodic("risks_asked", risk.ask_missing_risks))
