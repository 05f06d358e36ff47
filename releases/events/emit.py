"""One event per state change of a release request, written in the change's transaction.

:func:`transition` is called by every service and job that moves a request (``requests``,
``review``, ``statistics``): it writes the :class:`~releases.models.RequestEvent`, one
webhook delivery per endpoint that fires and one notification per person told, and enqueues
their sending through the outbox. All of it commits with the change or not at all, so an event
is never lost; each delivery and e-mail is claimed before it is sent, so never sent twice.
"""

from __future__ import annotations

from django.db import transaction
from django.urls import reverse

from releases.background import outbox
from releases.events import selectors
from releases.events.webhooks import WEBHOOK_TASK
from releases.models import Notification, NotificationPreference, ReleaseRequest, RequestEvent

#: The task that e-mails one notification at once.
MAIL_TASK = "releases.mail_notification"

Kind = Notification.Kind
Delivery = NotificationPreference.Delivery

#: The decision e-mail (review.services.notify_requester) is the immediate e-mail of a
#: decision: it keeps being sent per vote, and honours this kind's preference.
SENT_ELSEWHERE = (Kind.REQUEST_DECIDED,)


def transition(release_request: ReleaseRequest, previous_state: str, state: str) -> RequestEvent:
    """Record that ``release_request`` went from ``previous_state`` to ``state`` ("" when it
    was just asked), and fan it out; inside the caller's transaction."""
    with transaction.atomic():
        # Read again: the callers often move the row with a conditional update.
        release_request = ReleaseRequest.objects.select_related("dataset", "requested_by").get(
            pk=release_request.pk
        )
        event = RequestEvent.objects.create(
            request=release_request,
            previous_state=previous_state or "",
            state=state,
            round=release_request.round,
        )
        for endpoint in selectors.endpoints_for(release_request):
            delivery = endpoint.deliveries.create(event=event)
            outbox.enqueue(WEBHOOK_TASK, delivery.pk)
        for user, kind in selectors.told(event):
            notify(user, kind, _text(kind, release_request), release_request, event=event)
    return event


def notify(
    user, kind: str, text: str, release_request: ReleaseRequest, event: RequestEvent | None = None
) -> Notification:
    """Keep ``text`` in ``user``'s list and e-mail it as they chose (in the caller's
    transaction)."""
    chosen = selectors.delivery_of(user, kind)
    if not user.email or chosen == Delivery.OFF:
        mail = Notification.Mail.NONE
    elif chosen == Delivery.DIGEST:
        mail = Notification.Mail.DIGEST
    elif kind in SENT_ELSEWHERE:
        mail = Notification.Mail.NONE
    else:
        mail = Notification.Mail.NOW
    notification = Notification.objects.create(
        user=user,
        kind=kind,
        text=text[:500],
        link=reverse("releases:request_detail", args=[release_request.pk]),
        request=release_request,
        event=event,
        mail=mail,
    )
    if mail == Notification.Mail.NOW:
        outbox.enqueue(MAIL_TASK, notification.pk)
    return notification


def _text(kind: str, release_request: ReleaseRequest) -> str:
    what = f"Release request #{release_request.pk} ({release_request.dataset.name})"
    if kind == Kind.REVIEW_READY:
        return f"{what} is ready for review."
    if kind == Kind.REQUEST_DECIDED:
        return f"{what} was decided: {release_request.get_state_display().lower()}."
    if kind == Kind.REQUEST_FAILED:
        return f"{what} failed: {release_request.error or 'see the request'}"
    if kind == Kind.RELEASE_NAMED:
        return f"{what} was approved and names you as a recipient."
    return what
