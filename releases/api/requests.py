"""Release requests over the API: ask for an extract with any privacy model (through the
page's form, generated from the registry of privacy models), list, status, result summary,
checks, cancel. Calls what the request pages call."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, QueryDict
from ninja import Query, Router, Status

from releases.api.common import (
    ERRORS,
    group_ids,
    page,
    recipient_ids,
    refused_as,
    request_out,
    user_of,
)
from releases.api.problems import ApiError, Problem, first_error, form_errors
from releases.api.schemas import CancelIn, CheckOut, PageParams, RequestIn, RequestOut, RequestPage
from releases.datasets import selectors as dataset_selectors
from releases.models import ReleaseRequest
from releases.requests import kinds, rules, selectors, services
from releases.requests.forms import ReleaseRequestForm

router = Router(tags=["requests"])

#: What the result summary leaves out: the long lists the review pages page through (sample
#: rows, distributions, examples), which the pages and the report show.
SUMMARY_LEFT_OUT = frozenset({"sample", "examples", "distributions", "class_values"})


def _form_data(body: RequestIn, dataset) -> QueryDict:
    """The form's fields for the request's body, as the page posts them."""
    data = QueryDict(mutable=True)
    data["suppression_percent"] = str(body.suppression_percent)
    if body.algorithm:
        data["algorithm"] = body.algorithm
    if body.time_limit is not None:
        data["time_limit"] = str(body.time_limit)
    for model, params in body.models.items():
        data[f"use__{model}"] = "on"
        for name, value in params.items():
            data[f"{model}__{name}"] = str(value)
    for name, value in body.population.items():
        data[name] = str(value)
    data.setlist("recipients", recipient_ids("recipients", body.recipients))
    data.setlist("recipient_groups", group_ids("recipient_groups", body.recipient_groups))
    data["terms"] = body.terms
    if body.expires_at is not None:
        data["expires_at"] = body.expires_at.isoformat()
    columns = {c.name: c.pk for c in dataset.columns.all()}
    for name, text in body.justifications.items():
        if name in columns:
            data[f"justify-{columns[name]}"] = text
    if body.protect_earlier is not False:
        data["protect_earlier"] = "on"
    for name, weight in body.weights.items():
        if name in columns:
            data[f"weight-{columns[name]}"] = str(weight)
    for name, (low, high) in body.level_limits.items():
        if name in columns:
            data[f"min-level-{columns[name]}"] = "" if low is None else str(low)
            data[f"max-level-{columns[name]}"] = "" if high is None else str(high)
    for name, function in body.microaggregate.items():
        if name in columns:
            data[f"aggregate-{columns[name]}"] = function
    return data


def _unknown_fields(body: RequestIn, form: ReleaseRequestForm) -> list[str]:
    """Models or parameters the form does not know (the form would ignore them silently)."""
    unknown = [m for m in body.models if f"use__{m}" not in form.fields]
    unknown += [
        f"{m}.{name}"
        for m, params in body.models.items()
        if f"use__{m}" in form.fields
        for name in params
        if f"{m}__{name}" not in form.fields
    ]
    population = {field.name for field in form.population_fields()}
    unknown += [name for name in body.population if name not in population]
    quasi = {c.name for c in form.utility_columns}
    unknown += [
        f"{what}.{name} (not a quasi-identifier)"
        for what, given in (
            ("weights", body.weights),
            ("level_limits", body.level_limits),
            ("microaggregate", body.microaggregate),
        )
        for name in given
        if name not in quasi
    ]
    return unknown


@router.post("/datasets/{dataset_id}/requests", response={201: RequestOut, ERRORS: Problem})
def create_request(request: HttpRequest, dataset_id: int, body: RequestIn):
    """Ask for an extract of a ready dataset; a worker runs it (poll its status)."""
    user = user_of(request)
    dataset = dataset_selectors.get_dataset_for(user, dataset_id)
    form = ReleaseRequestForm(_form_data(body, dataset), dataset=dataset)
    unknown = _unknown_fields(body, form)
    if unknown:
        raise ApiError(400, f"Unknown privacy model or parameter: {', '.join(unknown)}.")
    if not form.is_valid():
        errors = form_errors(form)
        raise ApiError(400, first_error(errors), errors)
    with refused_as(400):
        release_request = services.request_release(
            user, dataset, form.parameters(), form.sharing(), form.justifications()
        )
    return Status(201, request_out(release_request))


@router.get("/requests", response={200: RequestPage, ERRORS: Problem})
def list_requests(request: HttpRequest, params: Query[PageParams], state: str = ""):
    """The requests the caller may see (officers every one, stewards their own, recipients
    the releases naming them), newest first; ``state`` filters."""
    requests = selectors.visible_requests(user_of(request)).order_by("-created_at", "-id")
    if state:
        if state not in ReleaseRequest.State.values:
            raise ApiError(400, f"Unknown state {state!r}.")
        requests = requests.filter(state=state)
    return page(requests, params, request_out)


@router.get("/requests/{request_id}", response={200: RequestOut, ERRORS: Problem})
def request_status(request: HttpRequest, request_id: int):
    """A request's state, stage and progress (poll it while ``run_under_way``)."""
    return request_out(selectors.get_request_for(user_of(request), request_id))


def for_reviewers(user, request_id: int) -> ReleaseRequest:
    """A request whose figures on the original the caller may see (the review workspace)."""
    release_request = selectors.get_request_for(user, request_id)
    if not rules.can_see_original(user, release_request):
        raise PermissionDenied("Only privacy officers and the requester see the review workspace.")
    return release_request


@router.get("/requests/{request_id}/summary", response={200: dict[str, Any], ERRORS: Problem})
def result_summary(request: HttpRequest, request_id: int):
    """The result's figures (rows in and out, suppressed, levels, achieved guarantees), for
    officers and the requester; empty until the run has finished."""
    release_request = for_reviewers(user_of(request), request_id)
    summary = release_request.summary or {}
    return {k: v for k, v in summary.items() if k not in SUMMARY_LEFT_OUT}


@router.get("/requests/{request_id}/checks", response={200: list[CheckOut], ERRORS: Problem})
def request_checks(request: HttpRequest, request_id: int):
    """The checks the result must pass before an approval, as the review page lists them."""
    user = user_of(request)
    release_request = for_reviewers(user, request_id)
    if not release_request.summary:
        return []
    checks = kinds.of(release_request).checks_for(user, release_request)
    return [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in checks]


@router.post("/requests/{request_id}/cancel", response={200: RequestOut, ERRORS: Problem})
def cancel_request(request: HttpRequest, request_id: int, body: CancelIn):
    """Cancel a queued or running request (the requester or an officer)."""
    user = user_of(request)
    selectors.get_request_for(user, request_id)
    with refused_as(409):
        release_request = services.cancel(user, request_id, body.reason)
    return request_out(release_request)
