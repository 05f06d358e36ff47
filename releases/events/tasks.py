"""The events feature's Celery tasks: thin wrappers (enqueued by name)."""

from celery import shared_task

from releases.events import notifications, webhooks


@shared_task(name="releases.deliver_webhook")
def deliver_webhook_task(delivery_id: int) -> None:
    webhooks.deliver(delivery_id)


@shared_task(name="releases.mail_notification")
def mail_notification_task(notification_id: int) -> None:
    notifications.mail_now(notification_id)


@shared_task(name="releases.send_digests")
def send_digests_task() -> None:
    notifications.send_digests()
