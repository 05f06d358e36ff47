"""Statistics releases over the API: ask for one (through the page's query forms and the
budget's checks), its status, and its result for those who may see it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, QueryDict
from ninja import Router, Status

from releases.api.common import ERRORS, group_ids, recipient_ids, refused_as, request_out, user_of
from releases.api.problems import ApiError, Problem, first_error, form_errors
from releases.api.schemas import StatisticsIn, StatisticsOut
from releases.datasets import selectors as dataset_selectors
from releases.requests import rules
from releases.requests import selectors as request_selectors
from releases.requests.forms import SharingForm
from releases.statistics import queries, services
from releases.statistics.forms import StatisticsQueryFormSet

router = Router(tags=["statistics"])

PREFIX = "q"


def _form_data(body: StatisticsIn) -> QueryDict:
    data = QueryDict(mutable=True)
    if len(body.queries) > StatisticsQueryFormSet.max_num:
        raise ApiError(400, f"At most {StatisticsQueryFormSet.max_num} queries in one release.")
    data[f"{PREFIX}-TOTAL_FORMS"] = str(len(body.queries))
    data[f"{PREFIX}-INITIAL_FORMS"] = "0"
    for i, query in enumerate(body.queries):
        for name, value in query.items():
            if isinstance(value, list):
                value = "\n".join(str(v) for v in value)
            data[f"{PREFIX}-{i}-{name}"] = "" if value is None else str(value)
    data.setlist("recipients", recipient_ids("recipients", body.recipients))
    data.setlist("recipient_groups", group_ids("recipient_groups", body.recipient_groups))
    data["terms"] = body.terms
    if body.expires_at is not None:
        data["expires_at"] = body.expires_at.isoformat()
    return data


def statistics_out(user, release_request) -> dict[str, Any]:
    sees = rules.can_see_original(user, release_request)
    return {
        **request_out(release_request),
        "queries": release_request.queries if sees else [],
        "result": (release_request.summary or None) if sees else None,
    }


@router.post("/datasets/{dataset_id}/statistics", response={201: StatisticsOut, ERRORS: Problem})
def create_statistics(request: HttpRequest, dataset_id: int, body: StatisticsIn):
    """Ask for a statistics release; its ε must fit what remains of the dataset's budget."""
    user = user_of(request)
    dataset = dataset_selectors.get_dataset_for(user, dataset_id)
    if not body.queries:
        raise ApiError(400, "Ask for at least one query.")
    data = _form_data(body)
    formset = StatisticsQueryFormSet(data, prefix=PREFIX, columns=queries.dataset_columns(dataset))
    sharing = SharingForm(data)
    if not (formset.is_valid() and sharing.is_valid()):
        errors = {
            f"queries[{i}].{field}": messages
            for i, form in enumerate(formset.forms)
            for field, messages in form_errors(form).items()
        }
        errors.update(form_errors(sharing))
        for message in formset.non_form_errors():
            errors.setdefault("queries", []).append(str(message))
        raise ApiError(400, first_error(errors), errors)
    items = [item for item in formset.items() if item is not None]
    if not items:
        raise ApiError(400, "Ask for at least one query (each needs its kind).")
    with refused_as(400):
        release_request = services.request_statistics(user, dataset, items, sharing.sharing())
    return Status(201, statistics_out(user, release_request))


@router.get("/statistics/{request_id}", response={200: StatisticsOut, ERRORS: Problem})
def statistics_detail(request: HttpRequest, request_id: int):
    """A statistics release's status; its queries and noisy answers for officers and the
    requester (a recipient downloads the release's files)."""
    user = user_of(request)
    release_request = request_selectors.get_request_for(user, request_id)
    if not release_request.is_statistics:
        raise ApiError(404, "No such statistics release.")
    return statistics_out(user, release_request)
