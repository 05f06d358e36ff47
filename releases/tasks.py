"""Celery's autodiscovery imports this module (``<app>.tasks`` of every installed app): it
imports each feature's tasks, which registers them with Celery by name.

Nothing else imports a tasks module: work is enqueued by name through the outbox
(``background.outbox``). The sweep is Celery beat's (``anonymizer_site/settings.py``).
"""

from releases.background import tasks as background
from releases.datasets import tasks as datasets
from releases.events import tasks as events
from releases.requests import tasks as requests
from releases.review import tasks as review
from releases.statistics import tasks as statistics

#: The tasks the outbox sends (the features' work), by name.
BY_NAME = {
    task.name: task
    for task in (
        requests.run_release_task,
        statistics.run_statistics_task,
        datasets.profile_dataset_task,
        datasets.dataset_risk_task,
        review.notify_requester_task,
        requests.reproduce_release_task,
        requests.link_attacker_file_task,
        events.deliver_webhook_task,
        events.mail_notification_task,
    )
}

__all__ = ["BY_NAME", "background"]
