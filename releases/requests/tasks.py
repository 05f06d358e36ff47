"""The request feature's Celery tasks: thin wrappers around its jobs (enqueued by name)."""

from celery import shared_task

from releases.models import ReleaseRequest
from releases.requests import kinds, linkage, reproduction


@shared_task(name="releases.run_release")
def run_release_task(request_id: int) -> None:
    # Recovery and redelivery of old messages may send this task for any request: each kind
    # runs its own body (a statistics release spends once per round, however often it is sent).
    kind = ReleaseRequest.objects.filter(pk=request_id).values_list("kind", flat=True).first()
    kinds.named(kind or ReleaseRequest.Kind.EXTRACT).run(request_id)


@shared_task(name="releases.reproduce_release")
def reproduce_release_task(reproduction_id: int) -> None:
    reproduction.reproduce(reproduction_id)


@shared_task(name="releases.link_attacker_file")
def link_attacker_file_task(attacker_id: int) -> None:
    linkage.link_attacker_file(attacker_id)
