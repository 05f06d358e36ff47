"""Datasets and their columns' roles and hierarchies."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    """A column's role in a release."""

    IDENTIFIER = "identifier", "Direct identifier (dropped)"
    QUASI_IDENTIFIER = "quasi", "Quasi-identifier (generalized)"
    SENSITIVE = "sensitive", "Sensitive"
    INSENSITIVE = "insensitive", "Insensitive (kept as is)"


class Dataset(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="datasets"
    )
    name = models.CharField(max_length=255)
    original_filename = models.CharField(max_length=255)
    # Relative to MEDIA_ROOT; never exposed through a URL.
    file_path = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    encoding = models.CharField(max_length=32)
    delimiter = models.CharField(max_length=4)
    row_count = models.PositiveIntegerField()
    preview = models.JSONField(default=list, help_text="The first rows, as lists of strings.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def delimiter_name(self) -> str:
        return {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}.get(self.delimiter, "")


class DatasetColumn(models.Model):
    class HierarchySource(models.TextChoices):
        AUTOMATIC = "auto", "Automatic"
        UPLOADED = "uploaded", "Uploaded (ARX format)"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="columns")
    position = models.PositiveIntegerField()
    name = models.CharField(max_length=255)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.INSENSITIVE)
    hierarchy_source = models.CharField(
        max_length=16, choices=HierarchySource.choices, default=HierarchySource.AUTOMATIC
    )
    hierarchy_filename = models.CharField(max_length=255, blank=True)
    # The uploaded hierarchy in ARX format (validated against the column on upload).
    hierarchy_text = models.TextField(blank=True)
    hierarchy_height = models.PositiveSmallIntegerField(null=True, blank=True)
    distinct_values = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "position"], name="unique_column_position"),
        ]

    def __str__(self) -> str:
        return self.name
