"""What the sweeper does for events: webhook retries whose backoff passed, immediate e-mails a
failed send gave back, and the reminders of releases about to expire (registered at start)."""

from releases.background import recovery
from releases.events import notifications, webhooks

recovery.register_periodic(recovery.Periodic("webhook_retries", webhooks.retry_due))
recovery.register_periodic(recovery.Periodic("notification_mails", notifications.resend_waiting))
recovery.register_periodic(recovery.Periodic("expiry_reminders", notifications.remind_expiring))
