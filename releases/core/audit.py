"""The audit log: who did what, and when. Events are only ever appended."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from releases.models import AuditEvent, Dataset, ReleaseRequest


def record(
    action: str,
    actor=None,
    *,
    dataset: Dataset | None = None,
    request: ReleaseRequest | None = None,
    **detail: Any,
) -> AuditEvent:
    if request is not None and dataset is None:
        dataset = request.dataset
    return AuditEvent.objects.create(
        action=action, actor=actor, dataset=dataset, request=request, detail=detail
    )


def events_for_request(release_request: ReleaseRequest) -> QuerySet[AuditEvent]:
    """The request's own events and its dataset's upload and tagging before it was made."""
    return (
        AuditEvent.objects.filter(
            Q(request=release_request)
            | Q(
                dataset=release_request.dataset_id,
                request__isnull=True,
                created_at__lte=release_request.created_at,
            )
        )
        .select_related("actor")
        .order_by("created_at", "id")
    )
