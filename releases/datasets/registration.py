"""Registering a dataset whose original stays where it is (a server folder, object storage, a
PostgreSQL table or query) instead of being uploaded: ``manage.py register_dataset`` and
``POST /api/v1/datasets/register``.

The cheap checks run first (``sources.inspect``: the source is there, readable, within the size,
column and, for a database, row bounds); a refusal writes no dataset. The dataset, its audit
event and its profiling's queueing are then written in one transaction; the profiling job reads
the source in place (``originals.scan_original``), checks every bound an upload is checked
against, and refuses it with the reason, as it does an upload.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from releases.background import outbox
from releases.core import audit, storage
from releases.core.errors import InvalidInput
from releases.datasets import budget, rules, sources
from releases.datasets.originals import read_limits
from releases.datasets.selectors import PROFILE_TASK
from releases.models import AuditEvent, Dataset, Project

#: What the audit row says of the source (its key: the dataset's field written with it).
AUDITED_SOURCE = {
    "source": "source_kind",
    "locator": "source_locator",
    "version": "source_version",
    "sha256": "sha256",
    "size_bytes": "size_bytes",
    "format": "file_format",
}


def register_dataset(
    actor: User | None,
    source: str,
    project: str,
    owner: User,
    name: str = "",
) -> Dataset:
    """Register ``source`` as a dataset of ``owner`` in the project named ``project`` (its short
    name) and queue its profiling. ``actor`` None: the command line on the server."""
    into = Project.objects.filter(slug=(project or "").strip()).first()
    if into is None:
        raise InvalidInput(f"No such project: {project}.")
    # Who may register this kind of source is checked before the source is looked at.
    rules.check_register(actor, owner, into, sources.kind_of(source))
    locator = sources.parse(source)
    found = sources.inspect(locator, read_limits(), settings.MAX_UPLOAD_BYTES)
    with transaction.atomic():
        dataset = Dataset.objects.create(
            owner=owner,
            project=into,
            name=(name or "").strip() or locator.filename,
            original_filename=locator.filename,
            # Nothing is stored under this name: it anchors the column store.
            file_path=storage.new_name("datasets", ""),
            sha256=found.sha256,
            size_bytes=found.size_bytes,
            file_format=found.file_format,
            row_count=found.row_count,
            source_kind=locator.kind,
            source_locator=locator.text,
            source_version=found.version,
            status=rules.UPLOADED,
            stage="Waiting for a worker",
        )
        budget.apply_project_default(dataset)
        audit.record(
            AuditEvent.Action.REGISTERED,
            actor,
            dataset=dataset,
            dataset_name=dataset.name,
            owner=owner.username,
            **{key: getattr(dataset, name) for key, name in AUDITED_SOURCE.items()},
            via="api" if actor is not None else "manage.py register_dataset",
        )
        outbox.enqueue(PROFILE_TASK, dataset.pk)
    return dataset
