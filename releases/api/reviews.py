"""Reviews over the API: the officers' queue, the votes a caller may see, and a vote under the
same four-eyes rules as the page (the requester never approves their own request)."""

from __future__ import annotations

from django.http import HttpRequest, QueryDict
from ninja import Query, Router

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
from releases.api.requests import for_reviewers
from releases.api.schemas import PageParams, RequestOut, RequestPage, ReviewIn, ReviewOut
from releases.requests import rules
from releases.requests import selectors as request_selectors
from releases.review import selectors, services
from releases.review.forms import ReviewForm

router = Router(tags=["reviews"])


@router.get("/reviews", response={200: RequestPage, ERRORS: Problem})
def review_queue(request: HttpRequest, params: Query[PageParams], state: str = "ready"):
    """The officers' queue, oldest first; ``state`` is one of the queue's tabs."""
    if state not in selectors.QUEUE_FILTERS:
        raise ApiError(
            400, f"Unknown queue {state!r}: one of {', '.join(selectors.QUEUE_FILTERS)}."
        )
    return page(selectors.review_queue(user_of(request), state), params, request_out)


@router.get("/requests/{request_id}/reviews", response={200: list[ReviewOut], ERRORS: Problem})
def list_reviews(request: HttpRequest, request_id: int):
    """The votes on a request; while a round is open an officer sees the others' only after
    voting (blind voting)."""
    user = user_of(request)
    release_request = for_reviewers(user, request_id)
    return [
        {
            "round": r.round,
            "reviewer": r.reviewer.get_username(),
            "decision": r.decision,
            "comment": r.comment,
            "created_at": r.created_at,
        }
        for r in selectors.reviews_for(user, release_request)
    ]


@router.post("/requests/{request_id}/reviews", response={200: RequestOut, ERRORS: Problem})
def vote(request: HttpRequest, request_id: int, body: ReviewIn):
    """Approve, request changes or reject the current round (``approve``, ``changes``,
    ``reject``); an approval may name more recipients and set the expiry date."""
    user = user_of(request)
    release_request = request_selectors.get_request_for(user, request_id)
    data = QueryDict(mutable=True)
    data.update(
        {"decision": body.decision, "comment": body.comment, "justification": body.justification}
    )
    data.setlist("add_recipients", recipient_ids("add_recipients", body.add_recipients))
    data.setlist(
        "add_recipient_groups", group_ids("add_recipient_groups", body.add_recipient_groups)
    )
    if body.expires_at is not None:
        data["expires_at"] = body.expires_at.isoformat()
    form = ReviewForm(data, justification_needed=bool(rules.checks_to_accept(release_request)))
    if not form.is_valid():
        errors = form_errors(form)
        raise ApiError(400, first_error(errors), errors)
    with refused_as(409):
        release_request = services.review(
            user,
            release_request.pk,
            form.cleaned_data["decision"],
            form.cleaned_data["comment"],
            form.additions(),
            form.cleaned_data["justification"],
        )
    return request_out(release_request)
