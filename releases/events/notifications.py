"""E-mailing notifications: at once, in the daily digest, and the expiry reminders.

Each e-mail is claimed before it is sent (``mailed_at`` set where it is empty), so a repeated
message or a second sweeper sends nothing twice; a failed send gives the claim back, and the
next sweep or digest run sends it again.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from releases.background import outbox
from releases.events import emit, selectors
from releases.models import Notification, ReleaseRequest

logger = logging.getLogger(__name__)

Kind = Notification.Kind
Mail = Notification.Mail


def _link(notification: Notification) -> str:
    return settings.SITE_URL + notification.link if notification.link else ""


def mail_now(notification_id: int) -> bool:
    """E-mail one notification its person wanted at once; False when not sent now."""
    claimed = Notification.objects.filter(
        pk=notification_id, mail=Mail.NOW, mailed_at__isnull=True
    ).update(mailed_at=timezone.now())
    if not claimed:
        return False
    notification = Notification.objects.select_related("user").get(pk=notification_id)
    body = notification.text
    if notification.link:
        body += f"\n\nSee {_link(notification)}"
    try:
        send_mail(
            f"[Anonymizer] {notification.get_kind_display()}",
            body,
            None,
            [notification.user.email],
        )
    except Exception:  # the mail server's errors vary: never lose the e-mail for one
        Notification.objects.filter(pk=notification_id).update(mailed_at=None)
        logger.exception("Could not e-mail notification %s", notification_id)
        return False
    return True


def resend_waiting(older_than: timedelta = timedelta(minutes=2)) -> int:
    """Immediate e-mails a failed send gave back: enqueue them again (the sweeper's step)."""
    waiting = Notification.objects.filter(
        mail=Mail.NOW, mailed_at__isnull=True, created__lt=timezone.now() - older_than
    ).values_list("pk", flat=True)[:200]
    for pk in waiting:
        outbox.enqueue(emit.MAIL_TASK, pk)
    return len(waiting)


def send_digest(user_id: int) -> int:
    """One e-mail with ``user_id``'s digest notifications not yet sent; how many it held."""
    pending = list(
        Notification.objects.filter(
            user_id=user_id, mail=Mail.DIGEST, mailed_at__isnull=True
        ).values_list("pk", flat=True)
    )
    if not pending:
        return 0
    # The claim: a conditional update, then what it stamped (a second runner stamps none).
    now = timezone.now()
    Notification.objects.filter(pk__in=pending, mailed_at__isnull=True).update(mailed_at=now)
    claimed = list(Notification.objects.filter(pk__in=pending, mailed_at=now).order_by("id"))
    if not claimed:
        return 0
    user = get_user_model().objects.get(pk=user_id)
    lines = [f"{len(claimed)} notification(s) since the last digest:", ""]
    for notification in claimed:
        lines.append(f"- {notification.text}")
        if notification.link:
            lines.append(f"  {_link(notification)}")
    try:
        send_mail("[Anonymizer] Your daily digest", "\n".join(lines), None, [user.email])
    except Exception:  # give every claim back: the next digest run sends them
        Notification.objects.filter(pk__in=[n.pk for n in claimed]).update(mailed_at=None)
        logger.exception("Could not e-mail the digest of user %s", user_id)
        return 0
    return len(claimed)


def send_digests() -> int:
    """Every user's digest (Celery beat runs it once a day); the notifications sent."""
    users = (
        Notification.objects.filter(mail=Mail.DIGEST, mailed_at__isnull=True)
        .values_list("user_id", flat=True)
        .distinct()
    )
    return sum(send_digest(user_id) for user_id in list(users))


def remind_expiring() -> int:
    """Tell each named recipient, once, that an approved release expires within
    ``RELEASE_EXPIRY_REMINDER_DAYS`` (the sweeper's periodic step); reminders written."""
    today = timezone.localdate()
    horizon = today + timedelta(days=settings.RELEASE_EXPIRY_REMINDER_DAYS)
    expiring = ReleaseRequest.objects.filter(
        state=ReleaseRequest.State.APPROVED, expires_at__gte=today, expires_at__lte=horizon
    ).select_related("dataset")
    written = 0
    for release_request in expiring[:200]:
        for user in selectors.named_recipients(release_request):
            if Notification.objects.filter(
                user=user, request=release_request, kind=Kind.RELEASE_EXPIRING
            ).exists():
                continue
            text = (
                f"Release request #{release_request.pk} ({release_request.dataset.name}) "
                f"expires on {release_request.expires_at:%Y-%m-%d}."
            )
            try:
                with transaction.atomic():
                    emit.notify(user, Kind.RELEASE_EXPIRING, text, release_request)
            except IntegrityError:  # another sweeper wrote it meanwhile: once is enough
                continue
            written += 1
    return written
