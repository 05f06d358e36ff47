"""Datasets and their columns' profiles, roles and hierarchies."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    """A column's role in a release. A column with no role yet ("") is withheld."""

    IDENTIFIER = "identifier", "Direct identifier (dropped)"
    QUASI_IDENTIFIER = "quasi", "Quasi-identifier (generalized)"
    SENSITIVE = "sensitive", "Sensitive (released as is, checked by l / t)"
    INSENSITIVE = "insensitive", "Released as is"
    WITHHELD = "withheld", "Withheld: not released"


#: Roles whose column is in the extract; the other roles (and no role) keep it out.
RELEASED_ROLES = frozenset({Role.QUASI_IDENTIFIER, Role.SENSITIVE, Role.INSENSITIVE})
#: Roles whose column is in the extract with its values unchanged.
UNCHANGED_ROLES = frozenset({Role.SENSITIVE, Role.INSENSITIVE})


class Dataset(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for a worker"
        PROFILING = "profiling", "Profiling"
        READY = "ready", "Ready"
        FAILED = "failed", "Rejected"

    class Format(models.TextChoices):
        CSV = "csv", "CSV"
        TSV = "tsv", "TSV"
        XLSX = "xlsx", "Excel (.xlsx)"
        PARQUET = "parquet", "Parquet"
        DATABASE = "database", "Database table or query"

    class SourceKind(models.TextChoices):
        UPLOAD = "upload", "Uploaded file"
        FOLDER = "folder", "Server folder"
        S3 = "s3", "Object storage (S3)"
        POSTGRES = "postgres", "PostgreSQL"

    FINAL_STATUSES = frozenset({Status.READY, Status.FAILED})

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="datasets"
    )
    project = models.ForeignKey(
        "releases.Project", on_delete=models.PROTECT, related_name="datasets"
    )
    name = models.CharField(max_length=255)
    original_filename = models.CharField(max_length=255)
    # Relative to MEDIA_ROOT; never exposed through a URL. Empty once a rejected file is removed.
    # A registered source (not an upload) stores nothing there: the name only anchors its
    # column store (``<file_path>.columns.parquet``).
    file_path = models.CharField(max_length=500)
    #: Where the original is read from: an upload (in private storage) or a source registered
    #: in place (``datasets.sources``), read where it stays each time the original is needed.
    source_kind = models.CharField(
        max_length=16, choices=SourceKind.choices, default=SourceKind.UPLOAD
    )
    #: The registered source: a resolved path, ``s3://bucket/key`` or
    #: ``postgres://NAME?table=...`` / ``?query=...`` ("" for an upload).
    source_locator = models.TextField(blank=True)
    #: What a read must find: an S3 object's ETag (and version id), a database source's
    #: content digest (recorded by its first read); "" for an upload or a folder file (their
    #: SHA-256 is ``sha256``).
    source_version = models.CharField(max_length=255, blank=True)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    file_format = models.CharField(max_length=16, choices=Format.choices, default=Format.CSV)
    sheet_name = models.CharField(max_length=255, blank=True, help_text="Excel: the sheet read.")
    encoding = models.CharField(max_length=32, blank=True)
    delimiter = models.CharField(max_length=4, blank=True)
    row_count = models.PositiveIntegerField(default=0)
    preview = models.JSONField(default=list, help_text="The first rows, as lists of strings.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    progress = models.FloatField(default=0.0)
    stage = models.CharField(max_length=200, blank=True)
    #: Last sign of life from the worker profiling it (its lease: see background.leases).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    #: Profilings started; the sweeper retries a lost one up to WORK_MAX_ATTEMPTS.
    attempts = models.PositiveSmallIntegerField(default=0)
    #: The process holding the lease ("host:pid"), for operators.
    worker = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    profiled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: The re-identification risk on the quasi-identifiers it names, as a worker computed it
    #: for large datasets (pages read it; see datasets.risk.reidentification_risk).
    risk = models.JSONField(default=dict, blank=True)
    #: A version: the dataset it follows (None for a first upload), its number in the lineage
    #: (1 for the first), and the lineage's first dataset (None for the first itself).
    previous = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="next_versions"
    )
    version = models.PositiveIntegerField(default=1)
    root = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="later_versions"
    )
    #: The lineage's key column: the same in every version, never released; the cross-release
    #: check links the rows of different versions by it ("" for none).
    key_column = models.CharField(max_length=255, blank=True)
    #: How the schema differs from the previous version's, once profiled: {"new": [...],
    #: "missing": [...], "retyped": [{"name", "was", "now"}]} (empty for a first upload).
    schema_changes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def delimiter_name(self) -> str:
        return {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}.get(self.delimiter, "")

    @property
    def lineage_id(self) -> int:
        """The id of the lineage's first dataset (its own for a first upload)."""
        return self.root_id or self.pk

    @property
    def is_registered(self) -> bool:
        """Read in place from a registered source, not from an upload."""
        return self.source_kind != self.SourceKind.UPLOAD

    @property
    def is_ready(self) -> bool:
        return self.status == self.Status.READY

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL_STATUSES

    @property
    def progress_percent(self) -> int:
        return round(self.progress * 100)


class ColumnType(models.TextChoices):
    INTEGER = "integer", "Integer"
    DECIMAL = "decimal", "Decimal"
    DATE = "date", "Date"
    CATEGORICAL = "categorical", "Categorical"
    TEXT = "text", "Free text"


class DateOrder(models.TextChoices):
    ISO = "ymd", "Year-month-day (ISO)"
    DMY = "dmy", "Day/month/year"
    MDY = "mdy", "Month/day/year"


class DatasetColumn(models.Model):
    class HierarchySource(models.TextChoices):
        AUTOMATIC = "auto", "Automatic"
        UPLOADED = "uploaded", "Uploaded (ARX format)"
        INTERVALS = "intervals", "Numeric intervals"
        DATES = "dates", "Date granularity"
        MASKING = "masking", "Masking"
        CATEGORICAL = "categorical", "Categorical to *"

    #: The warnings of a hierarchy file just attached (``datasets.services.set_hierarchy_file``
    #: sets it on the column it returns); not stored.
    hierarchy_warnings: list[str]

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="columns")
    position = models.PositiveIntegerField()
    name = models.CharField(max_length=255)
    # No role yet (""): the column is withheld, and no release can be requested until it has one.
    role = models.CharField(max_length=16, choices=Role.choices, blank=True, default="")
    hierarchy_source = models.CharField(
        max_length=16, choices=HierarchySource.choices, default=HierarchySource.AUTOMATIC
    )
    hierarchy_filename = models.CharField(max_length=255, blank=True)
    # The chosen hierarchy, materialized in ARX format on the column's values (empty: automatic).
    hierarchy_text = models.TextField(blank=True)
    hierarchy_height = models.PositiveSmallIntegerField(null=True, blank=True)
    # The builder's parameters, e.g. {"widths": [5, 10, 20]} or {"dayfirst": true}.
    hierarchy_params = models.JSONField(default=dict, blank=True)
    distinct_values = models.PositiveIntegerField(default=0)
    # Profile: inferred type (and the steward's override), missing values, top values, chart.
    inferred_type = models.CharField(max_length=16, choices=ColumnType.choices, blank=True)
    type_override = models.CharField(max_length=16, choices=ColumnType.choices, blank=True)
    date_order = models.CharField(max_length=4, choices=DateOrder.choices, blank=True)
    missing_count = models.PositiveIntegerField(default=0)
    profile = models.JSONField(default=dict, blank=True)
    suggested_role = models.CharField(max_length=16, choices=Role.choices, blank=True)
    suggestion_reason = models.CharField(max_length=500, blank=True)
    #: The values the column can take, declared by the steward as public knowledge (a code list,
    #: say): statistics may publish them as labels. Never filled in from the data.
    declared_domain = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "position"], name="unique_column_position"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def column_type(self) -> str:
        return self.type_override or self.inferred_type

    @property
    def column_type_label(self) -> str:
        return ColumnType(self.column_type).label if self.column_type else ""

    @property
    def distinct_share(self) -> float:
        """Distinct values ÷ rows (the profile's ``unique_share``, named before it was shown
        beside the next figure)."""
        return float(self.profile.get("unique_share", 0.0))

    @property
    def unique_row_share(self) -> float | None:
        """Rows whose value no other row has ÷ rows; None for a profile that did not count
        them."""
        rows, unique_rows = self.profile.get("rows"), self.profile.get("unique_rows")
        if unique_rows is None or not rows:
            return None
        return unique_rows / rows

    @property
    def declared_domain_text(self) -> str:
        return "\n".join(self.declared_domain or [])

    @property
    def role_label(self) -> str:
        return Role(self.role).label if self.role else "No role yet (withheld)"

    @property
    def suggested_role_label(self) -> str:
        return Role(self.suggested_role).label if self.suggested_role else ""
