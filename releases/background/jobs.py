"""The one skeleton of every background job: the extract run, the statistics run, a
reproduction and a profiling are :class:`Job` subclasses.

A job (:meth:`Job.run`):

1. **claims** its row (:meth:`Job.claim`): one conditional update takes it for this process
   (the state change the subclass names, one more attempt, this worker, a heartbeat); nothing
   is done when the row is gone, cancelled or already taken (a message delivered twice);
2. works (:meth:`Job.body`) under a **lease** (``background.leases``): a thread renews the
   heartbeat, and when the row is no longer this worker's (cancelled, deleted, handed to
   another attempt) the lease is lost and the work is interrupted with :class:`Stopped`, as
   :meth:`Job.progress` does when its conditional update finds nothing;
3. ends in **one except ladder**: stopped -> :meth:`Job.stopped` (clean up, keep nothing);
   Celery's soft time limit -> :meth:`Job.fail` with the soft limit's sentence; ``MemoryError``
   -> the memory ceiling's sentence; the job's own refusals (``refusals``: the engine's, the
   input's) -> their message; anything else -> logged, the internal error's sentence;
4. **finishes** (:meth:`Job.finish`): the lease stops, then one transaction writes the result
   on condition that the row is still this worker's (else :class:`Stopped`) and records what
   goes with it (:meth:`Job.finished`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from celery.exceptions import SoftTimeLimitExceeded
from django.db import models, transaction
from django.db.models import F
from django.utils import timezone

from releases.background import leases

logger = logging.getLogger(__name__)


class Stopped(Exception):
    """The row left this worker while it worked (cancelled, deleted, or given to another
    attempt): stop, and keep nothing."""


class Job:
    """One piece of background work on one row of ``model``."""

    model: ClassVar[type[models.Model]]
    #: The field holding the row's state ("state" or "status").
    state_field: ClassVar[str] = "state"
    #: The state a worker holds the row in.
    running: ClassVar[str]
    #: Exceptions that refuse the work with a message for the person (engine, input).
    refusals: ClassVar[tuple[type[BaseException], ...]] = ()
    #: Related rows read with the claimed row.
    related: ClassVar[tuple[str, ...]] = ()

    def __init__(self, pk: int) -> None:
        self.pk = pk
        self.worker = leases.worker_id()
        self.row: Any = None
        self.lease: leases.Lease | None = None

    def __str__(self) -> str:
        return f"{self.model.__name__} {self.pk}"

    # --- What a job says -----------------------------------------------------------------------

    def soft_limit_message(self) -> str:
        raise NotImplementedError

    def memory_message(self) -> str:
        raise NotImplementedError

    def internal_error_message(self) -> str:
        raise NotImplementedError

    # --- What a job does -----------------------------------------------------------------------

    def claimable(self) -> Mapping[str, Any]:
        """The fields a row must have to be taken (its waiting state)."""
        raise NotImplementedError

    def claiming(self, now) -> Mapping[str, Any]:
        """The fields the claim writes (at ``now``) besides the attempt, the worker and the
        heartbeat: the state the table's start action leads to, and what goes with it."""
        raise NotImplementedError

    def claimed(self) -> None:
        """Inside the claim's transaction, once the row is taken (``self.row``): audit it."""

    def body(self) -> None:
        raise NotImplementedError

    def finished(self) -> None:
        """Inside the final write's transaction, once the row is still this worker's."""

    def stopped(self) -> None:
        """The row left this worker: remove what this attempt wrote."""

    def fail(self, reason: str) -> None:
        raise NotImplementedError

    def log_failure(self) -> None:
        logger.exception("%s failed", self)

    # --- The skeleton -------------------------------------------------------------------------

    def ours(self) -> dict[str, Any]:
        """The fields of the row while it is this worker's."""
        return {self.state_field: self.running, "worker": self.worker}

    def claim(self) -> Any:
        """Take the row for this process; the row (``self.row``), or None when there is nothing
        to do (gone, cancelled, already taken)."""
        now = timezone.now()
        with transaction.atomic():
            taken = self.model._default_manager.filter(pk=self.pk, **self.claimable()).update(
                **self.claiming(now),
                heartbeat_at=now,
                attempts=F("attempts") + 1,
                worker=self.worker,
            )
            if not taken:
                logger.info("%s: nothing to do (gone, not waiting, or taken)", self)
                return None
            self.row = self.model._default_manager.select_related(*self.related).get(pk=self.pk)
            self.claimed()
        return self.row

    def progress(self, stage: str, **fields: Any) -> None:
        """Report progress (and renew the lease) on condition that the row is still this
        worker's; :class:`Stopped` when it is not. ``WORK_PAUSE_AT`` may pause here (tests)."""
        ours = self.model._default_manager.filter(pk=self.pk, **self.ours()).update(
            stage=stage[:200], heartbeat_at=timezone.now(), **fields
        )
        if not ours:
            raise Stopped()
        leases.pause_point(stage, self.work_name())

    def work_name(self) -> str:
        """How ``WORK_PAUSE_AT`` names this work ("request 12", "dataset 3")."""
        return str(self)

    def finish(self, **fields: Any) -> None:
        """Stop the lease, then write the result in one transaction, on condition that the row
        is still this worker's (:class:`Stopped` otherwise); :meth:`finished` records what goes
        with it in the same transaction."""
        if self.lease is not None:
            self.lease.stop()  # from here the conditional write decides: nothing interrupts it
        with transaction.atomic():
            if not self.model._default_manager.filter(pk=self.pk, **self.ours()).update(**fields):
                raise Stopped()
            self.finished()

    def start_stage(self) -> str:
        """The stage the claim wrote, where ``WORK_PAUSE_AT`` may pause first ("" for none)."""
        return ""

    def run(self) -> None:
        """Claim, work under the lease, and end in a final state whatever happens."""
        if self.claim() is None:
            return
        self.lease = leases.Lease(self.model, self.pk, interrupt=Stopped, **self.ours())
        try:
            with self.lease:
                if self.start_stage():
                    leases.pause_point(self.start_stage(), self.work_name())
                self.body()
        except Stopped:
            self.stopped()
        except SoftTimeLimitExceeded:
            self.fail(self.soft_limit_message())
        except MemoryError:
            logger.warning("%s ran out of memory", self)
            self.fail(self.memory_message())
        except self.refusals as exc:
            self.fail(str(exc))
        except Exception:
            self.log_failure()
            self.fail(self.internal_error_message())
