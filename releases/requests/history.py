"""A dataset's release history: every extract and every differentially private statistics
release of it that was released (approved, and those since revoked or expired, which were
released too), with who received it, what it released, k achieved, its dates and the SHA-256
of its files.

It is for the dataset's steward and the privacy officers (on the dataset page, and beside each
review): a recipient never sees other releases. Nothing here changes state.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import Prefetch, QuerySet

from releases.core import figures, roles
from releases.models import UNCHANGED_ROLES, Dataset, ReleaseFile, ReleaseRequest, Role

#: Releases listed per page of the history.
HISTORY_PER_PAGE = 10


def can_see_history(user, dataset: Dataset) -> bool:
    """Privacy officers, and the steward who owns the dataset."""
    if user is None or not user.is_authenticated:
        return False
    return roles.has_role(user, roles.OFFICER, dataset.project_id) or (
        roles.has_role(user, roles.STEWARD, dataset.project_id) and dataset.owner_id == user.pk
    )


def released_requests(dataset: Dataset) -> QuerySet[ReleaseRequest]:
    """The dataset's releases, newest decision first (extracts and statistics)."""
    return (
        ReleaseRequest.objects.filter(dataset=dataset, state__in=ReleaseRequest.RELEASED_STATES)
        .select_related("requested_by", "revoked_by")
        .prefetch_related(
            "recipients",
            "recipient_groups",
            Prefetch("files", queryset=ReleaseFile.objects.order_by("format", "id")),
        )
        .order_by("-decided_at", "-id")
    )


def released_extracts(dataset: Dataset, exclude: int | None = None) -> QuerySet[ReleaseRequest]:
    """The dataset's released extracts (approved, revoked or expired), oldest first: what a
    new extract of it is judged together with."""
    found = ReleaseRequest.objects.filter(
        dataset=dataset,
        kind=ReleaseRequest.Kind.EXTRACT,
        state__in=ReleaseRequest.RELEASED_STATES,
    )
    if exclude is not None:
        found = found.exclude(pk=exclude)
    return found.order_by("decided_at", "id")


def _columns(release_request: ReleaseRequest) -> list[dict]:
    """An extract's released columns with their role and, for quasi-identifiers, the level."""
    summary = release_request.summary or {}
    snapshot = release_request.config or {}
    roles_of = snapshot.get("roles") or {}
    qis = {q["name"] for q in snapshot.get("quasi_identifiers", [])}
    sensitive = set(snapshot.get("sensitive", []))
    levels = summary.get("levels") or {}
    heights = summary.get("heights") or {}
    out = []
    for name in summary.get("released_columns") or []:
        role = roles_of.get(name) or (
            Role.QUASI_IDENTIFIER
            if name in qis
            else Role.SENSITIVE
            if name in sensitive
            else Role.INSENSITIVE
        )
        column = {"name": name, "role": role, "role_label": Role(role).label}
        if role == Role.QUASI_IDENTIFIER:
            level = levels.get(name) if levels else None
            column["level"] = level
            column["top"] = heights[name] - 1 if name in heights else None
            column["treatment"] = (
                f"level {level} of {heights[name] - 1}"
                if level is not None and name in heights
                else "local recoding"
            )
        elif role in UNCHANGED_ROLES:
            column["treatment"] = "unchanged"
        out.append(column)
    return out


def _statistics_columns(release_request: ReleaseRequest) -> list[dict]:
    """The columns a statistics release's queries read (each query names its own)."""
    names: list[str] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "column" and isinstance(item, str) and item not in names:
                    names.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(release_request.queries)
    return [{"name": name, "role": "", "role_label": "", "treatment": "queried"} for name in names]


def entry(release_request: ReleaseRequest) -> dict:
    """One release of the history, as the table and the report list it."""
    summary = release_request.summary or {}
    files = [
        {"format": f.format, "label": f.get_format_display(), "sha256": f.sha256}
        for f in release_request.files.all()
        if f.round == release_request.round
    ]
    statistics = release_request.is_statistics
    return {
        "id": release_request.pk,
        "kind": release_request.kind,
        "kind_label": release_request.get_kind_display(),
        "state": release_request.effective_state,
        "state_label": release_request.effective_state_label,
        "round": release_request.round,
        "requested_by": release_request.requested_by.get_username(),
        "description": release_request.description,
        "recipients": sorted(u.get_username() for u in release_request.recipients.all()),
        "recipient_groups": sorted(g.name for g in release_request.recipient_groups.all()),
        "columns": _statistics_columns(release_request)
        if statistics
        else _columns(release_request),
        "k_achieved": None if statistics else (summary.get("achieved") or {}).get("k"),
        "rows": summary.get("rows_out"),
        "submitted_at": release_request.submitted_at,
        "approved_at": release_request.decided_at,
        "expires_at": release_request.expires_at,
        "revoked_at": release_request.revoked_at,
        "files": files,
        "package_sha256": release_request.package_sha256,
    }


def history_page(user, dataset: Dataset, page_number=None) -> Page:
    """One page of the dataset's release history for ``user`` (``PermissionDenied`` for anyone
    but the officers and the dataset's steward)."""
    if not can_see_history(user, dataset):
        raise PermissionDenied("Only privacy officers and the dataset's steward see its releases.")
    page = Paginator(released_requests(dataset), HISTORY_PER_PAGE).get_page(page_number)
    entries: Any = [entry(r) for r in page.object_list]  # the page's rows, as the table shows
    page.object_list = entries
    return page


# --- The cross-release check as the review page shows it -------------------------------------


def cross_release_entries(summary: dict) -> list[dict]:
    """The run's joint partitions with each earlier release (``summary["cross_release"]``),
    each with its chart of joint class sizes split at k. For officers and the requester only:
    the joint classes are computed on the original."""
    out = []
    for entry in summary.get("cross_release") or []:
        shown = dict(entry)
        if entry.get("measured", True) and entry.get("joint_sizes") is not None:
            chart = figures.size_bins(entry["joint_sizes"], None, int(entry.get("k") or 1))
            chart["k_label"] = "k"
            shown["chart"] = chart
            shown["below_k"] = [
                {"size": size, "classes": classes, "rows": size * classes}
                for size, classes in entry["joint_sizes"]
                if size < int(entry.get("k") or 1)
            ]
        out.append(shown)
    return out
