"""Release request pages: live state, review, decision, download; the queues."""

from __future__ import annotations

from decimal import Decimal

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from ..forms import DecisionForm, ReleaseRequestForm
from ..models import ReleaseRequest
from ..services import InvalidInput, audit, datasets, release
from ._common import is_htmx as _is_htmx
from .datasets import dataset_context


@require_POST
def request_create(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    form = ReleaseRequestForm(request.POST)
    if form.is_valid():
        try:
            release_request = release.request_release(
                request.user,
                dataset,
                k=form.cleaned_data["k"],
                suppression_limit=float(form.cleaned_data["suppression_percent"] / Decimal(100)),
            )
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("releases:request_detail", request_id=release_request.pk)
    return render(
        request, "releases/dataset_detail.html", dataset_context(dataset, form), status=400
    )


def _request_context(request: HttpRequest, release_request: ReleaseRequest, **extra) -> dict:
    user = request.user
    summary = release_request.summary or {}
    levels = summary.get("levels") or {}
    heights = summary.get("heights") or {}
    context = {
        "req": release_request,
        "summary": summary,
        "levels": [(name, levels.get(name), heights.get(name)) for name in heights],
        "qi_names": [q["name"] for q in release_request.config.get("quasi_identifiers", [])],
        "events": audit.events_for_request(release_request),
        "can_decide": release.can_decide(user, release_request),
        "own_request": release_request.requested_by_id == user.pk,
        "can_download": release.can_download(user, release_request),
        "decision_form": DecisionForm(),
    }
    if release_request.state in (
        ReleaseRequest.State.READY,
        ReleaseRequest.State.APPROVED,
        ReleaseRequest.State.REJECTED,
    ):
        context["classes"] = release.classes_page(release_request, request.GET.get("page"))
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
    if release_request.is_final and _is_htmx(request):
        # The run is over: reload the page once so the result appears; polling stops.
        response["HX-Refresh"] = "true"
    return response


@require_GET
def request_classes(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = release.get_request_for(request.user, request_id)
    if not _is_htmx(request):
        page = request.GET.get("page", "1")
        return redirect(f"{release_request.get_absolute_url()}?page={page}#classes")
    return render(
        request,
        "releases/request_detail.html#classes",
        {
            "req": release_request,
            "classes": release.classes_page(release_request, request.GET.get("page")),
            "qi_names": [q["name"] for q in release_request.config["quasi_identifiers"]],
        },
    )


@require_POST
def request_decide(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = release.get_request_for(request.user, request_id)
    form = DecisionForm(request.POST)
    if form.is_valid():
        try:
            release.decide(
                request.user,
                release_request.pk,
                approve=form.cleaned_data["decision"] == "approve",
                reason=form.cleaned_data["reason"],
            )
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            verb = "approved" if form.cleaned_data["decision"] == "approve" else "rejected"
            messages.success(request, f"Release request #{release_request.pk} {verb}.")
            return redirect("releases:request_detail", request_id=release_request.pk)
    return render(
        request,
        "releases/request_detail.html",
        _request_context(request, release_request, decision_form=form),
        status=400,
    )


def _file_response(download: release.Download) -> HttpResponse:
    response = HttpResponse(download.content, content_type=download.content_type)
    response["Content-Disposition"] = f'attachment; filename="{download.filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


@require_GET
def download_extract(request: HttpRequest, request_id: int) -> HttpResponse:
    try:
        return _file_response(release.download_extract(request.user, request_id))
    except release.ExtractTampered as exc:
        return render(request, "releases/error.html", {"message": str(exc)}, status=409)


@require_GET
def download_report(request: HttpRequest, request_id: int) -> HttpResponse:
    return _file_response(release.download_report(request.user, request_id))


@require_GET
def review_queue(request: HttpRequest) -> HttpResponse:
    queue = release.review_queue(request.user)
    decided = (
        release.visible_requests(request.user)
        .filter(state__in=[ReleaseRequest.State.APPROVED, ReleaseRequest.State.REJECTED])
        .order_by("-decided_at")[:20]
    )
    return render(request, "releases/review_queue.html", {"queue": queue, "decided": decided})


@require_GET
def release_list(request: HttpRequest) -> HttpResponse:
    return render(
        request, "releases/release_list.html", {"releases": release.approved_releases(request.user)}
    )
