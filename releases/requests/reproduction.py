"""Reproducing a release: re-run it from the stored input with the stored configuration,
hierarchies and seed, and compare every file's SHA-256 with the approved package.

An officer asks for it (``request_reproduction``); a worker runs it (``reproduce``). The new
files are written to a temporary folder and thrown away: only their hashes are kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from releases.background import jobs, leases, outbox
from releases.core import audit
from releases.core.errors import InvalidInput
from releases.engine import EngineError, PrivacyModel
from releases.models import AuditEvent, ReleaseRequest, Reproduction
from releases.requests import dp_budget, package, rules, run
from releases.requests.parameters import ReleaseParameters

logger = logging.getLogger(__name__)

RState = Reproduction.State
#: The task that re-runs a round.
REPRODUCE_TASK = "releases.reproduce_release"


def request_reproduction(user, request_id: int) -> Reproduction:
    """Queue a re-run of the request's current round (officers)."""
    with transaction.atomic():
        try:
            release_request = (
                ReleaseRequest.objects.select_for_update()
                .select_related("dataset")
                .get(pk=request_id)
            )
        except ReleaseRequest.DoesNotExist:
            raise Http404("No such release request.") from None
        rules.check_reproduce(user, release_request)
        reproduction = Reproduction.objects.create(
            request=release_request, round=release_request.round, requested_by=user
        )
        audit.record(
            AuditEvent.Action.REPRODUCE,
            user,
            request=release_request,
            round=release_request.round,
        )
        outbox.enqueue(REPRODUCE_TASK, reproduction.pk)
    return reproduction


class Reproduce(jobs.Job):
    """Re-run the round and compare; the outcome is stored on the reproduction and audited.
    Its lease is a run's: the request deleted, or the re-run handed to another attempt, it
    stops within a heartbeat."""

    model = Reproduction
    running = RState.RUNNING
    related = ("request__dataset",)
    refusals = (EngineError, InvalidInput)

    def claimable(self):
        return {"state__in": rules.REPRODUCTION.sources("start")}

    def claiming(self, now):
        return {"state": rules.REPRODUCTION.target_of("start")}

    def soft_limit_message(self) -> str:
        return run.soft_limit_message()

    def memory_message(self) -> str:
        return run.memory_message()

    def internal_error_message(self) -> str:
        return "The re-run stopped because of an internal error (see the worker's log)."

    def log_failure(self) -> None:
        logger.exception("Reproduction %s failed", self.pk)

    def stopped(self) -> None:
        logger.info("Reproduction %s stopped: it is no longer this worker's", self.pk)

    def pause(self, stage: str) -> None:
        """A reproduction reports no stages: ``WORK_PAUSE_AT`` may pause it at these (tests,
        the chaos benchmark)."""
        leases.pause_point(stage, self.work_name())

    def body(self) -> None:
        reproduction, release_request = self.row, self.row.request
        self.pause("Re-running the round")
        if release_request.round != reproduction.round:
            raise InvalidInput("The request moved on to another round.")
        expected = {
            f.format: f.sha256 for f in release_request.files.filter(round=reproduction.round)
        }
        got = _rerun(release_request, self.pause)
        self.pause("Comparing the files")
        outcome = {
            fmt: {"expected": expected.get(fmt, ""), "got": got.get(fmt, "")}
            for fmt in sorted(set(expected) | set(got))
        }
        identical = bool(expected) and all(o["expected"] == o["got"] for o in outcome.values())
        self._end("find_identical" if identical else "find_different", outcome)

    def fail(self, reason: str) -> None:
        # No longer this worker's: whoever has it now ends it.
        with contextlib.suppress(jobs.Stopped):
            self._end("fail", {}, reason)

    def _end(self, action: str, outcome: dict, error: str = "") -> None:
        self.outcome = (rules.REPRODUCTION.target_of(action), outcome, error)
        self.finish(
            state=rules.REPRODUCTION.target_of(action),
            outcome=outcome,
            error=error,
            finished_at=timezone.now(),
        )

    def finished(self) -> None:
        state, outcome, error = self.outcome
        audit.record(
            AuditEvent.Action.REPRODUCED,
            None,
            request=self.row.request,
            round=self.row.round,
            outcome=state,
            files=outcome,
            reason=error,
        )


def reproduce(reproduction_id: int) -> Reproduction | None:
    """The Celery task's body: see :class:`Reproduce`; the reproduction as it ends."""
    Reproduce(reproduction_id).run()
    return Reproduction.objects.filter(pk=reproduction_id).first()


def with_drawn_seed(params: ReleaseParameters, summary: dict) -> ReleaseParameters:
    """The round's parameters with the seed its SafePub run drew (kept in its summary) when the
    request gave none: the re-run samples the same rows and searches the same way."""
    seed = (summary.get("safepub") or {}).get("seed")
    spec = params.model.to_spec()
    unseeded = [
        c for c in spec["criteria"] if c.get("model") == dp_budget.SAFEPUB and "seed" not in c
    ]
    if seed is None or not unseeded:
        return params
    for criterion in unseeded:
        criterion["seed"] = int(seed)
    return dataclasses.replace(params, model=PrivacyModel.from_spec(spec))


def _rerun(release_request: ReleaseRequest, pause: Callable[[str], None]) -> dict[str, str]:
    """The SHA-256 of each file a re-run of the round writes (in a temporary folder): batch by
    batch where the run was (the same configuration and order scheme decide), else from the
    rows."""
    params = ReleaseParameters.of(release_request)
    levels = (release_request.summary or {}).get("levels")
    if params.algorithm == ReleaseRequest.Algorithm.HEURISTIC and levels:
        # The search within a time limit stops where the machine's speed has brought it: the
        # re-run applies the levels it chose (the same classes, suppressed rows and order).
        params = dataclasses.replace(
            params, algorithm=ReleaseRequest.Algorithm.OPTIMAL, time_limit=None, levels=levels
        )
    params = with_drawn_seed(params, release_request.summary or {})
    earlier = run.protected_releases(release_request, params)
    prepared = run.prepare_streamed(release_request, params) if earlier is None else None
    if prepared is not None:
        pause("Writing the package of the re-run")
        with tempfile.TemporaryDirectory(dir=settings.FILE_UPLOAD_TEMP_DIR) as folder:
            built_streamed = run.build_streamed(release_request, prepared, Path(folder))
            return {fmt: file.sha256 for fmt, file in built_streamed.files.items()}
    frame, _ = run.load_released(release_request.dataset, release_request.config)
    built = run.build_release(
        frame,
        release_request.config,
        params,
        release_request.shuffle_seed,
        # The order the round was written in (rounds run before the keyed order: numpy's).
        scheme=release_request.shuffle_scheme,
        # The same earlier releases the round protected (its parameters name them).
        earlier_releases=earlier,
    )
    pause("Writing the package of the re-run")
    with tempfile.TemporaryDirectory(dir=settings.FILE_UPLOAD_TEMP_DIR) as folder:
        written = package.write_package(built.data, Path(folder))
        return {fmt: file.sha256 for fmt, file in written.items()}
