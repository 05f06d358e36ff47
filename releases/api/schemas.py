"""What the API answers: typed schemas (the OpenAPI document is generated from them)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from django.conf import settings
from ninja import Field, Schema


class PageParams(Schema):
    """A page of a list: ``limit`` items (1 to ``API_MAX_PAGE_SIZE``) from ``offset``."""

    limit: int = Field(25, ge=1, le=settings.API_MAX_PAGE_SIZE)
    offset: int = Field(0, ge=0, le=2**31 - 1)


class PageOut(Schema):
    count: int
    limit: int
    offset: int


class DatasetOut(Schema):
    id: int
    name: str
    filename: str
    format: str
    status: str
    stage: str
    progress: float
    error: str
    rows: int
    size_bytes: int
    sha256: str
    created_at: datetime
    profiled_at: datetime | None
    version: int
    previous_id: int | None
    lineage_id: int
    key_column: str


class DatasetPage(PageOut):
    items: list[DatasetOut]


class ColumnOut(Schema):
    id: int
    position: int
    name: str
    role: str
    suggested_role: str
    suggestion_reason: str
    type: str
    distinct_values: int
    missing_count: int
    hierarchy_source: str
    hierarchy_filename: str
    hierarchy_levels: int | None
    profile: dict[str, Any]


class ColumnPage(PageOut):
    items: list[ColumnOut]


class DatasetDetail(DatasetOut):
    columns: int
    columns_without_role: int
    #: The schema's changes from the previous version (columns new, missing, retyped).
    new_columns: list[str]
    missing_columns: list[str]
    retyped_columns: list[str]
    schema_changes: list[str]
    #: Why no request can be made of this version now ("" when one can).
    request_blocked: str


class RegisterIn(Schema):
    """A source registered in place: ``s3://bucket/key``, ``postgres://NAME?table=T`` or
    ``?query=SELECT ...``, or (site administrators) a server path; the project's short name
    (optional for a steward of one project), and a name for the dataset."""

    source: str = Field(..., min_length=1, max_length=4000)
    project: str = Field("", max_length=100)
    name: str = Field("", max_length=255)


class KeyColumnIn(Schema):
    """The lineage's key column ("" for none)."""

    column: str = Field("", max_length=255)


class RecipeIn(Schema):
    name: str = Field(..., min_length=1, max_length=200)


class ApplyIn(Schema):
    """The version of the recipe's dataset to ask for."""

    dataset: int = Field(..., ge=1, le=2**31 - 1)


class RecipeOut(Schema):
    id: int
    name: str
    lineage_id: int
    source_request_id: int | None
    parameters: dict[str, Any]
    protect_earlier: bool
    columns: list[str]
    recipients: list[str]
    recipient_groups: list[str]
    terms: str
    expires_after_days: int | None
    created_at: datetime


class RecipePage(PageOut):
    items: list[RecipeOut]


class RolesIn(Schema):
    """Columns by name and the role each takes ("" withholds it until a role is chosen)."""

    roles: dict[str, str]


class HierarchyOut(Schema):
    column_id: int
    column: str
    role: str
    source: str
    filename: str
    levels: int | None


class RequestIn(Schema):
    """An extract request, as the page's form takes it: each chosen privacy model with its
    parameters (``{"k-anonymity": {"k": 5}, "l-diversity": {"l": 2, "variant": "distinct"}}``),
    the suppression limit in percent, the algorithm, the population for the models that need
    one, and who receives the release on which terms."""

    models: dict[str, dict[str, Any]]
    suppression_percent: float = 5
    algorithm: str = ""
    population: dict[str, float] = {}
    recipients: list[str] = []
    recipient_groups: list[str] = []
    terms: str = ""
    expires_at: date | None = None
    justifications: dict[str, str] = {}
    protect_earlier: bool | None = None
    #: Per quasi-identifier, its weight in the Loss (0 to 1; one not given weighs 0.5).
    weights: dict[str, float] = {}
    #: Per quasi-identifier, ``[lowest, highest]`` level the search may choose (null: no bound).
    level_limits: dict[str, tuple[int | None, int | None]] = {}
    #: Per quasi-identifier to microaggregate instead of generalize: "mean", "median", "mode"
    #: or "interval" (the other quasi-identifiers form the classes).
    microaggregate: dict[str, str] = {}
    #: With ``"algorithm": "heuristic"``: the seconds the search keeps improving (1 to 3600).
    time_limit: float | None = None


class RequestOut(Schema):
    id: int
    kind: str
    dataset_id: int
    state: str
    state_label: str
    round: int
    stage: str
    progress: float
    error: str
    requested_by: str
    created_at: datetime
    submitted_at: datetime
    decided_at: datetime | None
    expires_at: date | None
    run_under_way: bool
    ended_unreleased: bool


class RequestPage(PageOut):
    items: list[RequestOut]


class CheckOut(Schema):
    name: str
    passed: bool
    detail: str


class CancelIn(Schema):
    reason: str = ""


class ReviewIn(Schema):
    """An officer's vote: approve, changes or reject (a comment with the last two)."""

    decision: str
    comment: str = ""
    justification: str = ""
    add_recipients: list[str] = []
    add_recipient_groups: list[str] = []
    expires_at: date | None = None


class ReviewOut(Schema):
    round: int
    reviewer: str
    decision: str
    comment: str
    created_at: datetime


class FileOut(Schema):
    format: str
    size_bytes: int
    sha256: str
    content_type: str


class ReleaseOut(Schema):
    id: int
    kind: str
    state: str
    state_label: str
    decided_at: datetime | None
    expires_at: date | None
    terms: str
    terms_accepted: bool
    files: list[FileOut]


class ReleasePage(PageOut):
    items: list[ReleaseOut]


class TermsOut(Schema):
    request_id: int
    terms_sha256: str
    accepted_at: datetime


class StatisticsIn(Schema):
    """A statistics release: its queries as the page's rows take them (``kind``, ``epsilon``,
    ``column``, ``categories`` one per line, ``edges``, ...) and who receives it."""

    queries: list[dict[str, Any]]
    recipients: list[str] = []
    recipient_groups: list[str] = []
    terms: str = ""
    expires_at: date | None = None


class StatisticsOut(RequestOut):
    queries: list[dict[str, Any]]
    result: dict[str, Any] | None


class EventOut(Schema):
    id: int
    created_at: datetime
    actor: str
    action: str
    action_label: str
    request_id: int | None
    dataset_id: int | None
    detail: dict[str, Any]


class EventPage(PageOut):
    items: list[EventOut]
