"""Celery application: the broker is Redis (REDIS_URL); tasks live in ``releases.tasks``."""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")

app = Celery("anonymizer_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def fail_work_lost_by_dead_workers(**_kwargs) -> None:
    """Whatever a dead worker left running will never finish: say so instead of spinning.
    Releases past their expiry date get the expired state written (they already cannot be
    downloaded)."""
    from releases.services.recovery import fail_stale_work
    from releases.services.sharing import expire_due

    fail_stale_work()
    expire_due()
