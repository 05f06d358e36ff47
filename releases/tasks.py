"""Celery tasks: thin wrappers around the services."""

from celery import shared_task

from releases.services import (
    datasets,
    profiling,
    recovery,
    release,
    reproduction,
    review,
    statistics,
)


@shared_task(name="releases.run_release")
def run_release_task(request_id: int) -> None:
    # Recovery and redelivery send this task for any request: a statistics release runs its
    # own body (which spends once per round, however often it is sent).
    if statistics.is_statistics_request(request_id):
        statistics.run_statistics(request_id)
    else:
        release.run_release(request_id)


@shared_task(name="releases.run_statistics")
def run_statistics_task(request_id: int) -> None:
    statistics.run_statistics(request_id)


@shared_task(name="releases.profile_dataset")
def profile_dataset_task(dataset_id: int) -> None:
    profiling.profile_dataset(dataset_id)


@shared_task(name="releases.dataset_risk")
def dataset_risk_task(dataset_id: int) -> None:
    datasets.store_risk(dataset_id)


@shared_task(name="releases.notify_requester")
def notify_requester_task(review_id: int) -> None:
    review.notify_requester(review_id)


@shared_task(name="releases.sweep_work")
def sweep_work_task() -> None:
    recovery.sweep()


@shared_task(name="releases.reproduce_release")
def reproduce_release_task(reproduction_id: int) -> None:
    reproduction.reproduce(reproduction_id)


#: The tasks by name, for ``services.dispatch``.
BY_NAME = {
    task.name: task
    for task in (
        run_release_task,
        run_statistics_task,
        profile_dataset_task,
        dataset_risk_task,
        notify_requester_task,
        reproduce_release_task,
    )
}
