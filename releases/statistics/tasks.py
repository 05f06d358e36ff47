"""The statistics feature's Celery tasks: thin wrappers around its jobs (enqueued by name)."""

from celery import shared_task

from releases.statistics import run


@shared_task(name="releases.run_statistics")
def run_statistics_task(request_id: int) -> None:
    run.run_statistics(request_id)
