"""The review feature's Celery tasks: thin wrappers around its services (enqueued by name)."""

from celery import shared_task

from releases.review import services


@shared_task(name="releases.notify_requester")
def notify_requester_task(review_id: int) -> None:
    services.notify_requester(review_id)
