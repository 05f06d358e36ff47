"""Reads for the request pages: which requests a user sees, a round's files, its equivalence
classes, the figures of a result as the pages show them, and the waiting work of a request.
Nothing here changes state (see :mod:`releases.requests.services`); ``locked`` reads a request
for update inside the caller's transaction.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import Count, Q, QuerySet, Value
from django.db.models.functions import StrIndex
from django.http import Http404
from django.utils.http import urlencode

from releases.background import leases, outbox
from releases.core import figures, roles
from releases.engine import EngineError, PrivacyModel
from releases.engine.criteria import DataContext
from releases.engine.microaggregation import describe as describe_aggregate
from releases.models import (
    UNCHANGED_ROLES,
    AttackerFile,
    Dataset,
    DatasetColumn,
    EquivalenceClass,
    ReleaseFile,
    ReleaseRequest,
    Reproduction,
    Review,
    Role,
    TermsAcceptance,
)
from releases.requests import kinds, rules
from releases.requests.checks import UNCHANGED_UNIQUE_ROWS_LIMIT

State = ReleaseRequest.State
Decision = Review.Decision
CLASSES_PER_PAGE = 25
#: Groups a release cannot be shared with: the roles themselves. Naming "Recipients" would give
#: every recipient every release; a release names people, or groups made for a purpose.
ROLE_GROUPS = roles.ALL_GROUPS


# --- Which requests a user sees ----------------------------------------------------------------


def visible_requests(user) -> QuerySet[ReleaseRequest]:
    """Requests the user may see (the queryset form of ``rules.can_view``): for officers every
    one of their projects, for stewards their own in their projects, for recipients the
    releases that name them (of any project)."""
    base = ReleaseRequest.objects.select_related("dataset", "requested_by")
    if not user.is_authenticated:
        return base.none()
    condition = Q(pk__in=[])
    officer_of = roles.projects_where(user, roles.OFFICER)
    if officer_of:
        condition |= Q(dataset__project__in=officer_of)
    steward_of = roles.projects_where(user, roles.STEWARD)
    if steward_of:
        condition |= Q(requested_by=user, dataset__project__in=steward_of)
    if roles.is_recipient(user):
        condition |= Q(state__in=ReleaseRequest.RELEASED_STATES) & (
            Q(recipients=user) | Q(recipient_groups__in=user.groups.all())
        )
    # A subquery: the joins on recipients and groups would repeat a request.
    return base.filter(pk__in=ReleaseRequest.objects.filter(condition).values("pk"))


def get_request_for(user, request_id: int) -> ReleaseRequest:
    try:
        return visible_requests(user).get(pk=request_id)
    except ReleaseRequest.DoesNotExist:
        raise Http404("No such release request.") from None


def releases_for(user) -> QuerySet[ReleaseRequest]:
    """Approved releases the user receives (or requested), also once revoked or expired."""
    if not (roles.is_recipient(user) or roles.is_steward(user)):
        raise PermissionDenied("Only recipients and data stewards have releases.")
    mine = visible_requests(user).filter(state__in=ReleaseRequest.RELEASED_STATES)
    if roles.is_officer(user):
        # Officers see their projects' requests; their release list is what they requested or
        # receive.
        mine = mine.filter(
            Q(requested_by=user) | Q(recipients=user) | Q(recipient_groups__in=user.groups.all())
        ).distinct()
    return mine.order_by("-decided_at", "-id")


# --- Approvals that count ----------------------------------------------------------------------


def current_approvals(release_request: ReleaseRequest) -> QuerySet[Review]:
    return release_request.reviews.filter(
        round=release_request.round,
        decision=Decision.APPROVE,
        package_sha256=release_request.package_sha256,
    ).select_related("reviewer")


def status_flags(release_request: ReleaseRequest) -> dict[str, Any]:
    """What the pages show of a request's state, from the lifecycle table (templates do not
    re-derive it): its run is under way (the page polls it), or it ended without a release; and
    when its worker stopped, when the sweeper will have retried it (``stalled``)."""
    return {
        "run_under_way": rules.run_under_way(release_request),
        "ended_unreleased": rules.ended_unreleased(release_request),
        "stalled": stalled(release_request),
    }


def stalled(work: ReleaseRequest | Reproduction | AttackerFile) -> leases.Stall | None:
    """A run, reproduction or linkage whose worker stopped (its lease lapsed) and that the
    sweeper has yet to retry: when it will have, instead of the dead worker's last progress."""
    return leases.stall(work) if work.state == work.State.RUNNING else None


def waiting_for_queue(release_request: ReleaseRequest) -> bool:
    """Is this queued request's message still waiting for the broker (Redis unreachable)?"""
    return release_request.state == State.QUEUED and outbox.is_waiting(
        kinds.of(release_request).task, release_request.pk
    )


# --- The package ---------------------------------------------------------------------------------


def round_files(release_request: ReleaseRequest) -> list[ReleaseFile]:
    """The current round's files, CSV, Excel, Parquet in that order."""
    files = {f.format: f for f in release_request.files.filter(round=release_request.round)}
    return [files[f] for f in ReleaseFile.LISTED if f in files]


def latest_reproduction(release_request: ReleaseRequest) -> Reproduction | None:
    return release_request.reproductions.filter(round=release_request.round).first()


def terms_acceptance(user, release_request: ReleaseRequest) -> TermsAcceptance | None:
    return TermsAcceptance.objects.filter(
        request=release_request, user=user, terms_sha256=release_request.terms_sha256
    ).first()


def recipient_names(release_request: ReleaseRequest) -> dict:
    return {
        "users": [u.get_username() for u in release_request.recipients.order_by("username")],
        "groups": [g.name for g in release_request.recipient_groups.order_by("name")],
    }


# --- Equivalence classes for the review page -----------------------------------------------------

CLASS_ORDERINGS = {
    "size": ("size", "id"),
    "-size": ("-size", "id"),
    "risk": ("-risk", "id"),
    "flagged": ("-flagged", "size", "id"),
}


#: The classes table's filter on a quasi-identifier ``q`` is the query parameter ``f.q``.
FILTER_PREFIX = "f."


def class_filters(release_request: ReleaseRequest, query) -> dict[str, str]:
    """The classes table's filters in ``query``: {quasi-identifier: released value}, one per
    column, combined (all must hold). ``attribute=q&value=v`` (the older single filter) is
    read too, so links made before stay valid."""
    qis = [q["name"] for q in release_request.config.get("quasi_identifiers", [])]
    filters = {}
    for name in qis:
        value = query.get(FILTER_PREFIX + name, "")
        if value != "":
            filters[name] = value
    attribute, value = query.get("attribute", ""), query.get("value", "").strip()
    if attribute in qis and value:
        filters.setdefault(attribute, value)
    return filters


def classes_page(
    release_request: ReleaseRequest,
    page_number,
    order: str = "size",
    filters: dict[str, str] | None = None,
) -> Page:
    """Equivalence classes sorted and filtered for the table (smallest first by default).

    Each filter is a substring test for its ``[name, value]`` pair on the stored search text
    (exact: see :meth:`EquivalenceClass.search_key`); several must all hold."""
    classes: QuerySet[EquivalenceClass] = release_request.classes.all()
    qis = [q["name"] for q in release_request.config.get("quasi_identifiers", [])]
    applied = []
    for i, (name, value) in enumerate((filters or {}).items()):
        if name not in qis or value == "":
            continue
        applied.append((name, value))
        key = EquivalenceClass.search_key(name, value)
        found = f"found_{i}"
        classes = classes.annotate(**{found: StrIndex("search", Value(key))}).filter(
            **{f"{found}__gt": 0}
        )
    ordering = CLASS_ORDERINGS.get(order, CLASS_ORDERINGS["size"])
    rows = KeysFirst(classes.order_by(*ordering))
    if len(applied) == 1:
        # One value chosen: the worker counted its classes (the filter's choices), so the page
        # needs no pass over every class's search text to count them.
        name, value = applied[0]
        stored = ((release_request.summary or {}).get("class_values") or {}).get(name) or []
        rows.known_count = next((c for v, c, _ in stored if v == value), None)
    # Sliced and counted the way a paginator asks: a sequence to it.
    return Paginator(cast(Any, rows), CLASSES_PER_PAGE).get_page(page_number)


class KeysFirst:
    """A sorted queryset that a paginator slices in two steps: the page's ids first (read from
    the order's index alone), then those rows. A page far in (OFFSET 100,000) then skips index
    entries, not whole rows with their JSON: on PostgreSQL 400 ms became a few tens."""

    def __init__(self, queryset: QuerySet, known_count: int | None = None) -> None:
        self.queryset = queryset
        self.known_count = known_count

    def count(self) -> int:
        if self.known_count is not None:
            return self.known_count
        return self.queryset.count()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, page: slice) -> list[Any]:
        ids = list(self.queryset.values_list("id", flat=True)[page])
        rows = self.queryset.model.objects.in_bulk(ids)
        return [rows[i] for i in ids]


def class_filter_fields(release_request: ReleaseRequest, filters: dict[str, str]) -> list[dict]:
    """The filter's field per quasi-identifier: its released values with the classes and rows
    holding each, as the worker stored them (``summary["class_values"]``; before that, the
    released distribution's values), or a text field when there are too many to list."""
    summary = release_request.summary or {}
    stored = summary.get("class_values")
    distributions = summary.get("distributions") or {}
    fields: list[dict] = []
    for q in release_request.config.get("quasi_identifiers", []):
        name = q["name"]
        chosen = filters.get(name, "")
        if stored is not None:
            options = [
                {"value": v, "label": f"{v or '(empty)'} · {c:,} classes, {r:,} rows"}
                for v, c, r in stored.get(name) or []
            ]
        else:
            released = (distributions.get(name) or {}).get("released") or []
            complete = all(label != figures.OTHER for label, _ in released)
            options = (
                [
                    {"value": v, "label": f"{v or '(empty)'} · {r:,} rows"}
                    for v, r in figures.ordered_pairs(released)
                ]
                if complete
                else []
            )
        if options and chosen and all(o["value"] != chosen for o in options):
            options.append({"value": chosen, "label": chosen})
        fields.append(
            {
                "name": name,
                "param": FILTER_PREFIX + name,
                "value": chosen,
                "options": options,
                "id": f"class-filter-{len(fields)}",
            }
        )
    return fields


def class_query(order: str, filters: dict[str, str]) -> str:
    """The table's view as a query string (without the page): what its links carry."""
    params = {"order": order} if order in CLASS_ORDERINGS else {}
    params.update({FILTER_PREFIX + name: value for name, value in filters.items()})
    return urlencode(params)


# --- A request's page ----------------------------------------------------------------------------


def quasi_identifier_levels(release_request: ReleaseRequest, with_examples: bool) -> list[dict]:
    summary = release_request.summary or {}
    levels = summary.get("levels") or {}
    heights = summary.get("heights") or {}
    loss = (summary.get("metrics") or {}).get("loss_per_attribute") or {}
    examples = summary.get("examples") or {} if with_examples else {}
    sources = {q["name"]: q for q in release_request.config.get("quasi_identifiers", [])}
    # The utility controls the search ran under (none: equal weights, every level allowed).
    utility = summary.get("utility") or {}
    weights = utility.get("weights") or {}
    limits = utility.get("level_limits") or {}
    aggregated = utility.get("microaggregate") or {}
    return [
        {
            "name": name,
            "level": levels.get(name),
            "weight": weights.get(name, 0.5) if weights else None,
            "limits": limits.get(name),
            # A microaggregated column has no level (nor a height in the summary).
            "aggregate": describe_aggregate(aggregated[name]) if name in aggregated else None,
            "top": heights[name] - 1 if name in heights else None,
            "height": heights.get(name),
            "loss": loss.get(name),
            "hierarchy": (sources.get(name) or {}).get("hierarchy", ""),
            "examples": examples.get(name, []),
        }
        for name in [*heights, *(a for a in aggregated if a not in heights)]
    ]


def unchanged_columns(summary: dict) -> list[dict]:
    """The columns released as they are, each flagged when it looks identifying."""
    return [
        {
            **column,
            "looks_identifying": column["unique_row_share"] > UNCHANGED_UNIQUE_ROWS_LIMIT
            or (column["suggested_role"] == Role.IDENTIFIER and not column.get("justification")),
        }
        for column in summary.get("unchanged") or []
    ]


# --- The privacy models, candidates and risk of a result ------------------------------------

#: Candidates listed on a request's page (lowest Loss first; the applied one always shown).
CANDIDATES_SHOWN = 30


def _levels_text(levels: dict, sep: str = ", ") -> str:
    return sep.join(f"{q}={v}" for q, v in levels.items())


def candidates(summary: dict) -> dict:
    """The result's Pareto front of candidates for the page: each with its levels as text
    (and as the ``--levels`` argument), whether it is the optimum and whether this round
    applies it; then how the applied levels compare with the optimum when they were fixed."""
    applied = summary.get("levels")
    rows = []
    for candidate in summary.get("candidates") or []:
        rows.append(
            {
                **candidate,
                "chosen": candidate["levels"] == applied,
                "levels_text": _levels_text(candidate["levels"]),
                "levels_arg": _levels_text(candidate["levels"], ","),
            }
        )
    shown = rows[:CANDIDATES_SHOWN] + [r for r in rows[CANDIDATES_SHOWN:] if r["chosen"]]
    comparison = None
    optimum = summary.get("optimum")
    if summary.get("levels_fixed") and optimum:
        comparison = {
            "chosen": {
                "levels_text": _levels_text(applied or {}),
                "loss": (summary.get("metrics") or {}).get("loss"),
                "highest_risk": (summary.get("risk_after") or {}).get("highest"),
                "suppressed": summary.get("suppressed"),
            },
            "optimum": {**optimum, "levels_text": _levels_text(optimum["levels"])},
        }
    return {
        "rows": shown,
        "count": len(rows),
        "more": len(rows) - len(shown),
        "qis": list(applied or (rows[0]["levels"] if rows else {})),
        "comparison": comparison,
    }


def class_measures(release_request: ReleaseRequest) -> list[dict]:
    """The classes table's per-class measures, as the privacy models name them: for each
    sensitive attribute, distinct and entropy l, t, and the models' own (δ, β, recursive l)."""
    sensitive = release_request.config.get("sensitive", [])
    out = []
    for column, label in release_request.privacy_model.class_column_labels(sensitive):
        name, _, measure = column.rpartition(":")
        out.append({"attribute": name, "measure": measure, "label": label})
    return out


def size_chart(release_request: ReleaseRequest, with_before: bool = True) -> dict:
    """The class-size chart's bins (``figures.size_bins``) with the request's k: from the
    sizes the worker stored, or (a result stored before it stored them) counted by size over
    the stored classes in one grouped query; never from the file. ``with_before``: also the
    original's classes (not for those who may not see the original)."""
    summary = release_request.summary or {}
    stored = summary.get("class_sizes")
    if stored is not None:
        after, before = stored.get("after") or [], stored.get("before") if with_before else None
    else:
        after = list(
            release_request.classes.order_by()
            .values("size")
            .annotate(n=Count("id"))
            .values_list("size", "n")
        )
        before = None
    k = smallest_class_allowed(release_request)
    chart = figures.size_bins(after, before, k)
    chart["k_label"] = "k" if release_request.privacy_model.k == k else "smallest allowed"
    return chart


def distribution_view(dist: dict) -> dict:
    """A stored distribution as the page shows it: one stored before distributions were
    ordered (plain ``[[label, rows], ...]`` by count) gets its natural order, unless it was cut
    to its most frequent values (it then stays by count and says so)."""
    if "kind" in dist:
        return dist
    out: dict = {"kind": "categories", "shared_bins": False}
    for side in ("original", "released"):
        pairs = list(dist.get(side) or [])
        other = next((rows for label, rows in pairs if label == figures.OTHER), None)
        if other is None:
            out.update({side: figures.ordered_pairs(pairs), f"{side}_order": "natural"})
            out[f"{side}_other"] = None
        else:
            out.update({side: pairs, f"{side}_order": "count"})
            out[f"{side}_other"] = {"values": None, "rows": other}
    return out


def smallest_class_allowed(release_request: ReleaseRequest) -> int:
    """The class size below which the models always fail (k, or what l or a highest risk
    implies), for the size chart's line."""
    return release_request.privacy_model.min_class_size(DataContext(0))


def round_descriptions(rounds: list) -> list:
    for round_ in rounds:
        try:
            round_.model_description = PrivacyModel.from_spec(
                round_.parameters.get("model") or {}
            ).describe()
        except EngineError:
            round_.model_description = ""
        levels = round_.parameters.get("levels")
        round_.levels_text = _levels_text(levels) if levels else ""
    return rounds


#: Long parts of a request's page, a page at a time (a file can have thousands of columns).
UNCHANGED_PER_PAGE = 50
SAMPLE_COLUMNS_PER_PAGE = 30
DISTRIBUTIONS_PER_PAGE = 20
SECTIONS = ("unchanged", "sample", "distributions")


def summary_sections(release_request: ReleaseRequest, query=None) -> dict:
    """The summary's long lists a page at a time (``query``: the page of each, by name): the
    columns released unchanged (those that look identifying first), the sample's columns and
    the distributions."""
    query = query or {}
    summary = release_request.summary or {}
    unchanged = unchanged_columns(summary)
    unchanged.sort(key=lambda column: not column["looks_identifying"])  # stable
    sample = summary.get("sample") or {}
    columns = list(sample.get("columns") or [])
    shown = Paginator(range(len(columns)), SAMPLE_COLUMNS_PER_PAGE).get_page(query.get("sample"))
    picked = list(shown.object_list)
    rows = zip(sample.get("original") or [], sample.get("released") or [], strict=False)
    return {
        "unchanged": Paginator(unchanged, UNCHANGED_PER_PAGE).get_page(query.get("unchanged")),
        "unchanged_identifying": sum(1 for column in unchanged if column["looks_identifying"]),
        "sample_page": shown,
        "sample_columns": [columns[i] for i in picked],
        "sample_rows": [
            ([original[i] for i in picked], [released[i] for i in picked])
            for original, released in rows
        ],
        "distributions": _distributions_page(summary, query.get("distributions")),
    }


def _distributions_page(summary: dict, number) -> Page:
    page = Paginator(
        list((summary.get("distributions") or {}).items()), DISTRIBUTIONS_PER_PAGE
    ).get_page(number)
    page.object_list = [(name, distribution_view(dist)) for name, dist in page.object_list]
    return page


# --- Inside a service's transaction, and the sharing form's choices ---------------------------


def locked(request_id: int) -> ReleaseRequest:
    """The request, locked for update in this transaction (404 when it is gone)."""
    try:
        return (
            ReleaseRequest.objects.select_for_update().select_related("dataset").get(pk=request_id)
        )
    except ReleaseRequest.DoesNotExist:
        raise Http404("No such release request.") from None


def recipient_choices():
    """Users who can be named on a release."""
    return (
        get_user_model()
        .objects.filter(memberships__role=roles.RECIPIENT, is_active=True)
        .order_by("username")
        .distinct()
    )


def recipient_group_choices():
    """Groups a release can be shared with (not the role groups)."""
    return Group.objects.exclude(name__in=ROLE_GROUPS).order_by("name")


def identifiers_released_unchanged(dataset: Dataset) -> list:
    """Columns suggested as direct identifiers that the tagging releases as they are: each
    needs a written justification on the request."""
    return [
        c
        for c in dataset.columns.all()
        if c.suggested_role == Role.IDENTIFIER and c.role in UNCHANGED_ROLES
    ]


def quasi_identifier_columns(dataset: Dataset) -> QuerySet[DatasetColumn]:
    """The dataset's quasi-identifiers, in the file's order (the utility controls' rows)."""
    return dataset.columns.filter(role=Role.QUASI_IDENTIFIER).order_by("position")


def filename_stem(release_request: ReleaseRequest) -> str:
    stem = PurePath(release_request.dataset.original_filename).stem or "dataset"
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in stem)
    return f"{safe}-release-{release_request.pk}"
