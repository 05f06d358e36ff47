"""The dataset feature's Celery tasks: thin wrappers around its jobs (enqueued by name)."""

from celery import shared_task

from releases.datasets import profiling, risk


@shared_task(name="releases.profile_dataset")
def profile_dataset_task(dataset_id: int) -> None:
    profiling.profile_dataset(dataset_id)


@shared_task(name="releases.dataset_risk")
def dataset_risk_task(dataset_id: int) -> None:
    risk.store_risk(dataset_id)
