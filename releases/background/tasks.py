"""The background machinery's Celery tasks: the sweep, which Celery beat runs."""

from celery import shared_task

from releases.background import recovery


@shared_task(name="releases.sweep_work")
def sweep_work_task() -> None:
    recovery.sweep()
