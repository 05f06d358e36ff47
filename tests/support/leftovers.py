"""What dead or cancelled work may leave in storage: files no row names (the fault tests and
the chaos benchmark look for them)."""

from __future__ import annotations

from pathlib import Path

from releases.datasets import column_store
from releases.models import Dataset, ReleaseFile, ReleaseRequest
from releases.requests import cross_release


def stored_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file())


def unreferenced_files(root: Path) -> list[str]:
    """Files under ``root`` (MEDIA_ROOT) that no row names: a release's files, the membership
    its round's run stored (named by its summary), a dataset's upload and column store."""
    named = set(ReleaseFile.objects.values_list("path", flat=True))
    for summary in ReleaseRequest.objects.exclude(summary={}).values_list("summary", flat=True):
        if (summary or {}).get(cross_release.MEMBERSHIP):
            named.add(summary[cross_release.MEMBERSHIP])
    for dataset in Dataset.objects.exclude(file_path=""):
        named |= {dataset.file_path, column_store.name_of(dataset)}
    return [name for name in stored_files(root) if name not in named]
