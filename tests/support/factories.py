"""Datasets for tests: uploaded and profiled synchronously, without a Celery worker."""

from __future__ import annotations

import random
from unittest import mock

from django.core.files.uploadedfile import SimpleUploadedFile

from releases.models import Dataset
from releases.services import datasets, profiling


def upload(content: str | bytes, filename: str = "data.csv") -> SimpleUploadedFile:
    raw = content.encode("utf-8") if isinstance(content, str) else content
    return SimpleUploadedFile(filename, raw, content_type="application/octet-stream")


def make_dataset(
    user, content: str | bytes, filename: str = "data.csv", sheet: str = ""
) -> Dataset:
    """Upload ``content`` and profile it in this process (the task's body, called directly).

    Raises ``InvalidInput`` when the upload is refused outright; a file refused by profiling
    comes back with ``status == "failed"`` and its reason in ``error``.
    """
    # No task is queued: a worker running in the same test must not profile it a second time.
    with mock.patch.object(datasets, "enqueue_profiling"):
        dataset = datasets.create_dataset(user, upload(content, filename), sheet=sheet)
    profiling.profile_dataset(dataset.pk)
    dataset.refresh_from_db()
    return dataset


def synthetic_csv(rows: int = 300, seed: int = 7) -> str:
    """People with a name, an age, a zip code, a sex and a diagnosis (one a formula)."""
    rng = random.Random(seed)
    lines = ["name,age,zip,sex,diagnosis"]
    for i in range(rows):
        lines.append(
            f"Person {i},{rng.randint(18, 90)},{rng.choice(['02139', '02141', '02142', '02138'])},"
            f"{rng.choice(['F', 'M'])},{rng.choice(['flu', 'asthma', 'diabetes', '=cmd|calc'])}"
        )
    return "\n".join(lines) + "\n"
