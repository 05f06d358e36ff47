"""Celery application: the broker is Redis (REDIS_URL); autodiscovery finds the tasks through
``releases.tasks``, which imports each feature's."""

import logging
import os
import resource
import tempfile

from celery import Celery
from celery.signals import worker_process_init, worker_ready
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")

app = Celery("anonymizer_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger(__name__)


@worker_ready.connect
def sweep_at_start(**_kwargs) -> None:
    """A starting worker sweeps at once (beat may not run yet, or not at all): what a dead
    worker left running gets another attempt or a reason, lost messages go out again."""
    # Imported when the signal fires: this module loads with the settings, before Django's
    # app registry (which the sweeper's models need) is ready.
    from releases.background.recovery import sweep

    try:
        sweep()
    except Exception:  # the database may not be reachable yet: beat sweeps again soon
        logger.exception("The sweep at worker start failed")


def limit_memory(megabytes: int) -> None:
    """A ceiling on this process's data segment (heap and anonymous mappings, RLIMIT_DATA):
    an allocation past it fails with MemoryError (numpy, pandas, Arrow and Python alike) that
    the task reports, where an address-space limit (RLIMIT_AS) would refuse the virtual
    memory that Arrow's allocator and thread stacks reserve without using."""
    if megabytes <= 0:
        return
    limit = megabytes * 1024 * 1024
    _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


@worker_process_init.connect
def prepare_pool_process(**_kwargs) -> None:
    """Each pool process: its memory ceiling, and a temporary folder of its own (the folders of
    processes killed with -9 are removed here, as the process replacing them starts)."""
    # Imported when the signal fires, after Django's setup (see ``sweep_at_start``).
    from releases.background.recovery import use_process_work_dir

    limit_memory(settings.WORKER_MEMORY_LIMIT_MB)
    try:
        folder = str(use_process_work_dir())
    except OSError:
        logger.exception("Could not make this worker process's temporary folder")
        return
    settings.FILE_UPLOAD_TEMP_DIR = folder
    tempfile.tempdir = folder
