"""Release request pages: live state, review workspace, decisions, the recipient's page, the
report, downloads; the queues. Thin: each view parses, calls one service or selector, renders."""

from __future__ import annotations

import io

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from .. import selectors
from ..engine import EngineError, parse_levels
from ..forms import ReleaseRequestForm, ResubmitForm, ReviewForm, RevokeForm
from ..models import ReleaseFile, ReleaseRequest
from ..services import (
    InvalidInput,
    datasets,
    downloads,
    lifecycle,
    recovery,
    release,
    reproduction,
    review,
    sharing,
    storage,
)
from ._common import is_htmx as _is_htmx
from .datasets import dataset_context


@require_POST
def request_create(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    form = ReleaseRequestForm(request.POST, dataset=dataset)
    if form.is_valid():
        try:
            release_request = release.request_release(
                request.user, dataset, form.parameters(), form.sharing(), form.justifications()
            )
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            return redirect(release_request)
    return render(
        request, "releases/dataset_detail.html", dataset_context(dataset, form), status=400
    )


@require_GET
def request_decisions(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """The request form's column decisions (roles still missing, justifications), refreshed
    when a role changes; the text already typed comes back in the query."""
    dataset = datasets.get_dataset_for(request.user, dataset_id)
    form = ReleaseRequestForm(dataset=dataset, initial=request.GET.dict())
    return render(
        request,
        "releases/partials/request_form.html#decisions",
        dataset_context(dataset, form),
    )


def _classes_context(request: HttpRequest, release_request: ReleaseRequest) -> dict:
    order = request.GET.get("order", "size")
    if order not in selectors.CLASS_ORDERINGS:
        order = "size"
    filters = selectors.class_filters(release_request, request.GET)
    return {
        "classes": selectors.classes_page(release_request, request.GET.get("page"), order, filters),
        "class_order": order,
        "class_filters": selectors.class_filter_fields(release_request, filters),
        "class_filtered": bool(filters),
        "class_query": selectors.class_query(order, filters),
        "qi_names": [q["name"] for q in release_request.config.get("quasi_identifiers", [])],
        "sensitive_names": release_request.config.get("sensitive", []),
        "class_measures": selectors.class_measures(release_request),
    }


def _request_context(request: HttpRequest, release_request: ReleaseRequest, **extra) -> dict:
    user = request.user
    context = selectors.request_page(user, release_request, request.GET.get("events"))
    context.update(selectors.summary_sections(release_request, request.GET))
    context["review_form"] = ReviewForm()
    context["revoke_form"] = RevokeForm()
    if (
        "resubmit" in context["buttons"]
        and context["buttons"]["resubmit"].enabled
        and not release_request.is_statistics  # its queries are edited on their own page
    ):
        context["resubmit_form"] = ResubmitForm(
            initial=ResubmitForm.initial_from(release_request), dataset=release_request.dataset
        )
    if context["summary"]:
        context.update(_classes_context(request, release_request))
    context["waiting_for_queue"] = recovery.waiting_for_queue(release_request)
    context.update(extra)
    return context


def _page(request: HttpRequest, release_request: ReleaseRequest, status=200, **extra):
    """The officer's and requester's page, or the recipient's: never the original for them."""
    if lifecycle.can_see_original(request.user, release_request):
        return render(
            request,
            "releases/request_detail.html",
            _request_context(request, release_request, **extra),
            status=status,
        )
    return render(
        request,
        "releases/release_recipient.html",
        {
            **selectors.recipient_page(request.user, release_request, request.GET.get("events")),
            **extra,
        },
        status=status,
    )


def _for_reviewers(request: HttpRequest, request_id: int) -> ReleaseRequest:
    release_request = selectors.get_request_for(request.user, request_id)
    if not lifecycle.can_see_original(request.user, release_request):
        raise PermissionDenied("Only privacy officers and the requester see the review workspace.")
    return release_request


@require_GET
def request_detail(request: HttpRequest, request_id: int) -> HttpResponse:
    return _page(request, selectors.get_request_for(request.user, request_id))


@require_GET
def request_status(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = selectors.get_request_for(request.user, request_id)
    # The page polling a request resolves its lost worker or message (not only beat).
    if recovery.check_request(release_request):
        release_request.refresh_from_db()
    response = render(
        request,
        "releases/request_detail.html#status",
        {"req": release_request, "waiting_for_queue": recovery.waiting_for_queue(release_request)},
    )
    if release_request.is_settled and _is_htmx(request):
        # The run is over: reload the page once so the result appears; polling stops.
        response["HX-Refresh"] = "true"
    return response


@require_GET
def request_classes(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = _for_reviewers(request, request_id)
    if not _is_htmx(request):
        return redirect(f"{release_request.get_absolute_url()}?{request.GET.urlencode()}#classes")
    context = _classes_context(request, release_request)
    response = render(
        request,
        "releases/request_detail.html#classes",
        {"req": release_request, **context},
    )
    # The address bar shows the page at this view of the table (sort, filters, page): the
    # back button and a copied link come back to it.
    query = context["class_query"]
    if context["classes"].number > 1:
        query += f"&page={context['classes'].number}"
    response["HX-Push-Url"] = f"{release_request.get_absolute_url()}?{query}#classes"
    return response


@require_GET
def request_section(request: HttpRequest, request_id: int, section: str) -> HttpResponse:
    """Another page of one of the summary's long lists (htmx); a plain link gets the page."""
    release_request = _for_reviewers(request, request_id)
    if section not in selectors.SECTIONS:
        return HttpResponse(status=404)
    if not _is_htmx(request):
        return redirect(f"{release_request.get_absolute_url()}?{request.GET.urlencode()}#{section}")
    return render(
        request,
        f"releases/request_detail.html#{section}",
        {
            "req": release_request,
            "summary": release_request.summary or {},
            "section_open": True,
            **selectors.summary_sections(release_request, request.GET),
        },
    )


@require_GET
def request_activity(request: HttpRequest, request_id: int) -> HttpResponse:
    """One page of the activity list (htmx); a plain link gets the whole page at that page."""
    release_request = selectors.get_request_for(request.user, request_id)
    if not _is_htmx(request):
        return redirect(f"{release_request.get_absolute_url()}?{request.GET.urlencode()}#activity")
    return render(
        request,
        "releases/partials/activity.html",
        {
            "req": release_request,
            "events": selectors.activity_page(
                request.user, release_request, request.GET.get("events")
            ),
            "full_activity": lifecycle.can_see_original(request.user, release_request),
        },
    )


@require_GET
def class_detail(request: HttpRequest, request_id: int, class_id: int) -> HttpResponse:
    """One equivalence class expanded in place: sensitive values and the models' verdicts."""
    release_request = _for_reviewers(request, request_id)
    equivalence_class = release_request.classes.filter(pk=class_id).first()
    if equivalence_class is None:
        return HttpResponse(status=404)
    return render(
        request,
        "releases/partials/class_detail.html",
        {
            "req": release_request,
            "c": equivalence_class,
            "class_measures": selectors.class_measures(release_request),
        },
    )


@require_POST
def request_review(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = selectors.get_request_for(request.user, request_id)
    form = ReviewForm(request.POST)
    if form.is_valid():
        try:
            release_request = review.review(
                request.user,
                release_request.pk,
                form.cleaned_data["decision"],
                form.cleaned_data["comment"],
                form.additions(),
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
    return _page(request, release_request, status=400, review_form=form)


@require_POST
def request_resubmit(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = selectors.get_request_for(request.user, request_id)
    if release_request.is_statistics:
        url = reverse("releases:statistics_request", args=[release_request.dataset_id])
        return redirect(f"{url}?resubmit={release_request.pk}")
    form = ResubmitForm(request.POST, dataset=release_request.dataset)
    if form.is_valid():
        try:
            release_request = release.resubmit(
                request.user,
                release_request.pk,
                form.parameters(),
                form.cleaned_data["response"],
                form.justifications(),
            )
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Round {release_request.round} submitted.")
            return redirect(release_request)
    return _page(request, release_request, status=400, resubmit_form=form)


@require_POST
def request_rerun(request: HttpRequest, request_id: int) -> HttpResponse:
    """Re-run with one of the result's candidates (its levels, as ``age=2,sex=0``)."""

    def rerun(release_request):
        try:
            levels = parse_levels(request.POST.get("levels", ""))
        except EngineError as exc:
            raise InvalidInput(str(exc)) from None
        release.rerun_with_levels(request.user, release_request.pk, levels)

    return _act(
        request,
        request_id,
        rerun,
        "A new round runs with the chosen levels; the optimum stays listed to compare.",
    )


def _act(request: HttpRequest, request_id: int, action, done: str) -> HttpResponse:
    """A plain form post for one action: a message, then back to the page."""
    release_request = selectors.get_request_for(request.user, request_id)
    try:
        action(release_request)
    except InvalidInput as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done)
    return redirect(release_request)


@require_POST
def request_cancel(request: HttpRequest, request_id: int) -> HttpResponse:
    return _act(
        request,
        request_id,
        lambda r: release.cancel(request.user, r.pk, request.POST.get("reason", "")),
        "Cancelled. A run under way stops within seconds and keeps nothing.",
    )


@require_POST
def request_revoke(request: HttpRequest, request_id: int) -> HttpResponse:
    form = RevokeForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    return _act(
        request,
        request_id,
        lambda r: sharing.revoke(request.user, r.pk, reason),
        "Revoked: nobody can download this release any more.",
    )


@require_POST
def accept_terms(request: HttpRequest, request_id: int) -> HttpResponse:
    return _act(
        request,
        request_id,
        lambda r: sharing.accept_terms(request.user, r.pk),
        "You accepted the terms of use; the downloads are open to you.",
    )


@require_POST
def request_reproduce(request: HttpRequest, request_id: int) -> HttpResponse:
    return _act(
        request,
        request_id,
        lambda r: reproduction.request_reproduction(request.user, r.pk),
        "A worker re-runs the release from its stored input; the outcome appears below.",
    )


def _refused(
    request: HttpRequest, exc: downloads.DownloadUnavailable, request_id: int | None = None
) -> HttpResponse:
    back = reverse("releases:request_detail", args=[request_id]) if request_id else ""
    return render(
        request, "releases/error.html", {"message": str(exc), "back": back}, status=exc.status
    )


@require_GET
def download_file(request: HttpRequest, request_id: int, fmt: str = "csv") -> HttpResponse:
    if fmt not in ReleaseFile.Format.values:
        return HttpResponse(status=404)
    try:
        prepared = downloads.open_download(request.user, request_id, fmt)
    except downloads.DownloadUnavailable as exc:
        return _refused(request, exc, request_id)
    except InvalidInput as exc:  # not now: the state, or the terms not yet accepted
        return _refused(
            request, downloads.DownloadUnavailable(str(exc), downloads.CONFLICT), request_id
        )
    # Streamed from storage: never read into memory; the filename is encoded by Django.
    response = FileResponse(
        storage.open_file(prepared.path),
        as_attachment=True,
        filename=prepared.filename,
        content_type=prepared.content_type,
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


@require_GET
def report(request: HttpRequest, request_id: int) -> HttpResponse:
    """The release report as a page; the browser prints it to a clean PDF."""
    try:
        release_request, content = downloads.verified_report(request.user, request_id)
    except downloads.DownloadUnavailable as exc:
        return _refused(request, exc, request_id)
    return render(
        request, "releases/release_report.html", {"req": release_request, "report": content}
    )


@require_GET
def download_report(request: HttpRequest, request_id: int) -> HttpResponse:
    try:
        filename, content = downloads.download_report(request.user, request_id)
    except downloads.DownloadUnavailable as exc:
        return _refused(request, exc, request_id)
    response = FileResponse(
        io.BytesIO(content),
        as_attachment=True,
        filename=filename,
        content_type="application/json; charset=utf-8",
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


@require_GET
def review_queue(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "ready")
    if state not in selectors.QUEUE_FILTERS:
        state = "ready"
    return render(
        request,
        "releases/review_queue.html",
        {
            "queue": Paginator(selectors.review_queue(request.user, state), 25).get_page(
                request.GET.get("page")
            ),
            "state": state,
            "filters": list(selectors.QUEUE_FILTERS),
            "to_revoke": selectors.listed_for_revocation(request.user),
        },
    )


@require_GET
def release_list(request: HttpRequest) -> HttpResponse:
    releases = Paginator(selectors.releases_for(request.user), 25).get_page(request.GET.get("page"))
    return render(request, "releases/release_list.html", {"releases": releases})
