"""Release request pages: live state, review workspace, decisions, downloads; the queues."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from ..forms import ReleaseRequestForm, ResubmitForm, ReviewForm
from ..models import ReleaseRequest
from ..services import InvalidInput, datasets, downloads, release, review
from ._common import is_htmx as _is_htmx
from .datasets import dataset_context


@require_POST
def request_create(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    form = ReleaseRequestForm(request.POST)
    if form.is_valid():
        try:
            release_request = release.request_release(request.user, dataset, form.parameters())
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            return redirect(release_request)
    return render(
        request, "releases/dataset_detail.html", dataset_context(dataset, form), status=400
    )


def _classes_context(request: HttpRequest, release_request: ReleaseRequest) -> dict:
    order = request.GET.get("order", "size")
    attribute = request.GET.get("attribute", "")
    value = request.GET.get("value", "").strip()
    return {
        "classes": review.classes_page(
            release_request, request.GET.get("page"), order, attribute, value
        ),
        "class_order": order,
        "class_attribute": attribute,
        "class_value": value,
        "qi_names": [q["name"] for q in release_request.config.get("quasi_identifiers", [])],
        "sensitive_names": release_request.config.get("sensitive", []),
    }


def _request_context(request: HttpRequest, release_request: ReleaseRequest, **extra) -> dict:
    user = request.user
    summary = release_request.summary or {}
    levels = summary.get("levels") or {}
    heights = summary.get("heights") or {}
    loss = (summary.get("metrics") or {}).get("loss_per_attribute") or {}
    examples = summary.get("examples") or {}
    own = release_request.requested_by_id == user.pk
    context = {
        "req": release_request,
        "summary": summary,
        "levels": [
            {
                "name": name,
                "level": levels.get(name),
                "top": heights[name] - 1,
                "loss": loss.get(name),
                "examples": examples.get(name, []),
            }
            for name in heights
        ],
        "checks": review.checks(release_request) if summary else [],
        "events": review.timeline_for(user, release_request),
        "reviews": review.reviews_for(user, release_request),
        "votes_hidden": review.votes_hidden_from(user, release_request),
        "approvals": review.approvals_so_far(release_request),
        "required_approvals": review.required_approvals(),
        "rounds": list(release_request.rounds.all()),
        "can_review": review.can_review(user, release_request),
        "own_request": own,
        "can_download": downloads.can_download(user, release_request),
        "review_form": ReviewForm(),
    }
    if own and release_request.state in (
        ReleaseRequest.State.CHANGES_REQUESTED,
        ReleaseRequest.State.FAILED,
    ):
        context["resubmit_form"] = ResubmitForm(
            initial=ReleaseRequestForm.initial_from(release_request)
        )
    if summary:
        context.update(_classes_context(request, release_request))
    context.update(extra)
    return context


@require_GET
def request_detail(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = release.get_request_for(request.user, request_id)
    return render(
        request, "releases/request_detail.html", _request_context(request, release_request)
    )


@require_GET
def request_status(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = release.get_request_for(request.user, request_id)
    response = render(request, "releases/request_detail.html#status", {"req": release_request})
    if release_request.is_settled and _is_htmx(request):
        # The run is over: reload the page once so the result appears; polling stops.
        response["HX-Refresh"] = "true"
    return response


@require_GET
def request_classes(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = release.get_request_for(request.user, request_id)
    if not _is_htmx(request):
        return redirect(f"{release_request.get_absolute_url()}?{request.GET.urlencode()}#classes")
    return render(
        request,
        "releases/request_detail.html#classes",
        {"req": release_request, **_classes_context(request, release_request)},
    )


@require_GET
def class_detail(request: HttpRequest, request_id: int, class_id: int) -> HttpResponse:
    """One equivalence class expanded in place: sensitive values and the models' verdicts."""
    release_request = release.get_request_for(request.user, request_id)
    equivalence_class = release_request.classes.filter(pk=class_id).first()
    if equivalence_class is None:
        return HttpResponse(status=404)
    return render(
        request,
        "releases/partials/class_detail.html",
        {"req": release_request, "c": equivalence_class},
    )


@require_POST
def request_review(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = release.get_request_for(request.user, request_id)
    form = ReviewForm(request.POST)
    if form.is_valid():
        try:
            release_request = review.review(
                request.user,
                release_request.pk,
                form.cleaned_data["decision"],
                form.cleaned_data["comment"],
            )
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(
                request,
                f"Your review is recorded. The request is now "
                f"{release_request.get_state_display().lower()}.",
            )
            return redirect(release_request)
    return render(
        request,
        "releases/request_detail.html",
        _request_context(request, release_request, review_form=form),
        status=400,
    )


@require_POST
def request_resubmit(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = release.get_request_for(request.user, request_id)
    form = ResubmitForm(request.POST)
    if form.is_valid():
        try:
            release_request = release.resubmit(
                request.user, release_request.pk, form.parameters(), form.cleaned_data["response"]
            )
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Round {release_request.round} submitted.")
            return redirect(release_request)
    return render(
        request,
        "releases/request_detail.html",
        _request_context(request, release_request, resubmit_form=form),
        status=400,
    )


def _file_response(download: downloads.Download) -> HttpResponse:
    response = HttpResponse(download.content, content_type=download.content_type)
    response["Content-Disposition"] = f'attachment; filename="{download.filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


@require_GET
def download_extract(request: HttpRequest, request_id: int) -> HttpResponse:
    try:
        return _file_response(downloads.download_extract(request.user, request_id))
    except downloads.ExtractTampered as exc:
        return render(request, "releases/error.html", {"message": str(exc)}, status=409)


@require_GET
def download_report(request: HttpRequest, request_id: int) -> HttpResponse:
    return _file_response(downloads.download_report(request.user, request_id))


@require_GET
def review_queue(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "ready")
    if state not in review.QUEUE_FILTERS:
        state = "ready"
    return render(
        request,
        "releases/review_queue.html",
        {
            "queue": Paginator(review.review_queue(request.user, state), 25).get_page(
                request.GET.get("page")
            ),
            "state": state,
            "filters": list(review.QUEUE_FILTERS),
        },
    )


@require_GET
def release_list(request: HttpRequest) -> HttpResponse:
    releases = Paginator(release.approved_releases(request.user), 25).get_page(
        request.GET.get("page")
    )
    return render(request, "releases/release_list.html", {"releases": releases})
