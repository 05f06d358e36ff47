"""The reads of events: who is told of a transition, which endpoints fire, and the pages."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from releases.core import roles
from releases.models import (
    Notification,
    NotificationPreference,
    Project,
    ReleaseRequest,
    RequestEvent,
    WebhookDelivery,
    WebhookEndpoint,
)

State = ReleaseRequest.State
Kind = Notification.Kind
Delivery = NotificationPreference.Delivery

#: The states a review decides (``request_decided``).
DECIDED = (State.APPROVED, State.CHANGES_REQUESTED, State.REJECTED)


def endpoints_for(release_request: ReleaseRequest) -> QuerySet[WebhookEndpoint]:
    """The one place that decides which endpoints fire for a request: the active endpoints of
    the dataset's owner, unfiltered or filtered to this dataset, and only while the owner is
    still a steward of the dataset's project (a steward who left it hears nothing more) and the
    project allows webhooks (none fires for a project that turned them off)."""
    dataset = release_request.dataset
    return (
        WebhookEndpoint.objects.filter(active=True, owner_id=dataset.owner_id)
        .filter(Q(dataset__isnull=True) | Q(dataset_id=dataset.pk))
        .filter(
            owner__memberships__project_id=dataset.project_id,
            owner__memberships__role=roles.STEWARD,
            owner__memberships__project__webhooks_allowed=True,
        )
        .distinct()
    )


def officers(project_id: int):
    """The privacy officers of the project (active accounts): they alone review its requests."""
    return (
        get_user_model()
        .objects.filter(
            is_active=True, memberships__project_id=project_id, memberships__role=roles.OFFICER
        )
        .distinct()
    )


def named_recipients(release_request: ReleaseRequest):
    """The recipients named on the release, directly or through a group, holding the role (in
    any project: a release may name recipients from outside its own)."""
    return (
        get_user_model()
        .objects.filter(is_active=True, memberships__role=roles.RECIPIENT)
        .filter(
            Q(pk__in=release_request.recipients.values("pk"))
            | Q(groups__in=release_request.recipient_groups.all())
        )
        .distinct()
    )


def told(event: RequestEvent) -> list[tuple[object, str]]:
    """The one place that decides who is told of a transition: (user, kind) pairs."""
    release_request = event.request
    out: list[tuple[object, str]] = []
    if event.state == State.READY:
        out += [
            (officer, Kind.REVIEW_READY)
            for officer in officers(release_request.dataset.project_id).exclude(
                pk=release_request.requested_by_id
            )
        ]
    if event.state in DECIDED and event.previous_state == State.READY:
        out.append((release_request.requested_by, Kind.REQUEST_DECIDED))
    if event.state == State.FAILED:
        out.append((release_request.requested_by, Kind.REQUEST_FAILED))
    if event.state == State.APPROVED:
        out += [(user, Kind.RELEASE_NAMED) for user in named_recipients(release_request)]
    return out


def delivery_of(user, kind: str) -> str:
    """How ``user`` wants ``kind`` e-mailed (immediately unless they chose otherwise)."""
    chosen = (
        NotificationPreference.objects.filter(user=user, kind=kind)
        .values_list("delivery", flat=True)
        .first()
    )
    return chosen or Delivery.IMMEDIATELY


def preferences_of(user) -> dict[str, str]:
    """Every kind with ``user``'s choice for it."""
    chosen = dict(NotificationPreference.objects.filter(user=user).values_list("kind", "delivery"))
    return {kind: chosen.get(kind, Delivery.IMMEDIATELY) for kind in Kind.values}


def notifications_of(user) -> QuerySet[Notification]:
    return Notification.objects.filter(user=user).order_by("-id")


def unread_count(user) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


def endpoints_of(user) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(owner=user).select_related("dataset").order_by("id")


def projects_without_webhooks(user) -> QuerySet[Project]:
    """The projects where ``user`` is a steward and which do not allow webhooks."""
    return Project.objects.filter(
        pk__in=roles.projects_where(user, roles.STEWARD), webhooks_allowed=False
    ).order_by("name", "id")


def recent_deliveries(user, limit: int = 50) -> QuerySet[WebhookDelivery]:
    return (
        WebhookDelivery.objects.filter(endpoint__owner=user)
        .select_related("endpoint", "event")
        .order_by("-id")[:limit]
    )
