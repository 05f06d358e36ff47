"""Reads for a dataset's versions on its page: the chain of versions with each version's
requests and releases (a page at a time), the schema's changes from the previous version,
whether a request can be made, and the lineage's recipes. Nothing here changes state."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.db.models import Prefetch

from releases.core.errors import InvalidInput
from releases.datasets import rules, versions
from releases.models import Dataset, Recipe, ReleaseRequest

#: Versions listed per page of the chain.
VERSIONS_PER_PAGE = 10


def request_blocked(dataset: Dataset) -> str:
    """Why no request can be made of this version now ("" when one can)."""
    if not dataset.is_ready:
        return ""
    try:
        versions.check_request(dataset)
    except InvalidInput as exc:
        return str(exc)
    return ""


def lineage_context(user, dataset: Dataset, page_number=None) -> dict[str, Any]:
    """The dataset page's versions section, for its owner."""
    chain = versions.lineage(dataset).prefetch_related(
        Prefetch(
            "requests",
            queryset=ReleaseRequest.objects.order_by("-submitted_at", "-id"),
            to_attr="chain_requests",
        )
    )
    page = Paginator(chain, VERSIONS_PER_PAGE).get_page(page_number)
    version: Any
    for version in page.object_list:
        version.chain_entries = [
            {
                "request": r,
                "released": r.state in ReleaseRequest.RELEASED_STATES,
                "date": r.decided_at or r.submitted_at,
                "model": r.model_description
                if r.kind == ReleaseRequest.Kind.EXTRACT
                else r.get_kind_display(),
                "k": ((r.summary or {}).get("achieved") or {}).get("k"),
            }
            for r in version.chain_requests
        ]
    roles_by_name = dict(dataset.columns.values_list("name", "role"))
    return {
        "can_apply": dataset.is_ready
        and rules.can_request(dataset.schema_changes, roles_by_name, dataset.key_column),
        "versions_page": page,
        "schema_changes": versions.change_messages(dataset),
        "request_blocked": request_blocked(dataset),
        "key_choices": list(roles_by_name) if dataset.is_ready else [],
        "recipes": list(
            Recipe.objects.filter(lineage_id=dataset.lineage_id, owner=user).select_related(
                "source"
            )
        ),
    }
