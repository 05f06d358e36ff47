"""Celery application: the broker is Redis (REDIS_URL); tasks live in ``releases.tasks``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")

app = Celery("anonymizer_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
