"""The background machinery's Celery tasks, which Celery beat runs
(``CELERY_BEAT_SCHEDULE`` in ``anonymizer_site/settings.py``): the sweep, and the purges that
keep the outbox and the login records from growing forever."""

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from releases.background import outbox, recovery, retention


@shared_task(name="releases.sweep_work")
def sweep_work_task() -> None:
    recovery.sweep()


@shared_task(name="releases.purge_outbox")
def purge_outbox_task() -> None:
    outbox.purge_sent(timedelta(days=settings.OUTBOX_RETENTION_DAYS))


@shared_task(name="releases.purge_login_records")
def purge_login_records_task() -> None:
    retention.purge_login_records(timedelta(days=settings.LOGIN_RECORD_RETENTION_DAYS))
