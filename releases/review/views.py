"""Review pages: the officers' and requester's workspace of a request (checks, votes, classes,
summary sections, activity), the recipient's page, decisions and resubmissions made on it, the
release report, the review queue and the home page. Thin: each view parses, calls one service
or selector, renders."""

from __future__ import annotations

import io

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import FileResponse, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from releases.core import roles
from releases.core.errors import InvalidInput
from releases.core.http import error_page
from releases.core.http import is_htmx as _is_htmx
from releases.datasets.selectors import datasets_for
from releases.models import ReleaseRequest
from releases.requests import downloads, history, kinds, rules
from releases.requests import selectors as request_selectors
from releases.requests import services as requests
from releases.requests.forms import ResubmitForm, RevokeForm
from releases.requests.parameters import ReleaseParameters
from releases.review import audit_trail, selectors, services
from releases.review.forms import AuditTrailForm, ReviewForm


def _classes_context(request: HttpRequest, release_request: ReleaseRequest) -> dict:
    order = request.GET.get("order", "size")
    if order not in request_selectors.CLASS_ORDERINGS:
        order = "size"
    filters = request_selectors.class_filters(release_request, request.GET)
    return {
        "classes": request_selectors.classes_page(
            release_request, request.GET.get("page"), order, filters
        ),
        "class_order": order,
        "class_filters": request_selectors.class_filter_fields(release_request, filters),
        "class_filtered": bool(filters),
        "class_query": request_selectors.class_query(order, filters),
        "qi_names": [q["name"] for q in release_request.config.get("quasi_identifiers", [])],
        "sensitive_names": release_request.config.get("sensitive", []),
        "class_measures": request_selectors.class_measures(release_request),
    }


def _request_context(request: HttpRequest, release_request: ReleaseRequest, **extra) -> dict:
    user = request.user
    context = selectors.request_page(user, release_request, request.GET.get("events"))
    context.update(request_selectors.summary_sections(release_request, request.GET))
    context["review_form"] = ReviewForm(
        justification_needed=bool(rules.checks_to_accept(release_request))
    )
    context["revoke_form"] = RevokeForm()
    if (
        "resubmit" in context["buttons"]
        and context["buttons"]["resubmit"].enabled
        and kinds.of(release_request).resubmit_page(release_request) is None
    ):
        context["resubmit_form"] = ResubmitForm(
            initial=ResubmitForm.initial_from(release_request),
            dataset=release_request.dataset,
            request_id=release_request.pk,
            current=ReleaseParameters.of(release_request),
        )
    if context["summary"]:
        context.update(_classes_context(request, release_request))
    context["waiting_for_queue"] = request_selectors.waiting_for_queue(release_request)
    if history.can_see_history(user, release_request.dataset):
        context["history"] = history.history_page(
            user, release_request.dataset, request.GET.get("history")
        )
    context.update(extra)
    return context


def _page(request: HttpRequest, release_request: ReleaseRequest, status=200, **extra):
    """The officer's and requester's page, or the recipient's: never the original for them."""
    if rules.can_see_original(request.user, release_request):
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
    release_request = request_selectors.get_request_for(request.user, request_id)
    if not rules.can_see_original(request.user, release_request):
        raise PermissionDenied("Only privacy officers and the requester see the review workspace.")
    return release_request


@require_GET
def request_detail(request: HttpRequest, request_id: int) -> HttpResponse:
    return _page(request, request_selectors.get_request_for(request.user, request_id))


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
    if section not in request_selectors.SECTIONS:
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
            **request_selectors.summary_sections(release_request, request.GET),
        },
    )


@require_GET
def request_activity(request: HttpRequest, request_id: int) -> HttpResponse:
    """One page of the activity list (htmx); a plain link gets the whole page at that page."""
    release_request = request_selectors.get_request_for(request.user, request_id)
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
            "full_activity": rules.can_see_original(request.user, release_request),
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
            "class_measures": request_selectors.class_measures(release_request),
        },
    )


@require_POST
def request_review(request: HttpRequest, request_id: int) -> HttpResponse:
    release_request = request_selectors.get_request_for(request.user, request_id)
    form = ReviewForm(
        request.POST, justification_needed=bool(rules.checks_to_accept(release_request))
    )
    if form.is_valid():
        try:
            release_request = services.review(
                request.user,
                release_request.pk,
                form.cleaned_data["decision"],
                form.cleaned_data["comment"],
                form.additions(),
                form.cleaned_data["justification"],
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
    release_request = request_selectors.get_request_for(request.user, request_id)
    elsewhere = kinds.of(release_request).resubmit_page(release_request)
    if elsewhere is not None:
        return redirect(elsewhere)
    form = ResubmitForm(
        request.POST, dataset=release_request.dataset, request_id=release_request.pk
    )
    if form.is_valid():
        try:
            release_request = requests.resubmit(
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


@require_GET
def report(request: HttpRequest, request_id: int) -> HttpResponse:
    """The release report as a page; the browser prints it to a clean PDF."""
    try:
        release_request, content = services.verified_report(request.user, request_id)
    except downloads.DownloadUnavailable as exc:
        return _refused(request, exc, request_id)
    return render(
        request, "releases/release_report.html", {"req": release_request, "report": content}
    )


@require_GET
def download_report(request: HttpRequest, request_id: int) -> HttpResponseBase:
    try:
        filename, content = services.download_report(request.user, request_id)
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


def _refused(
    request: HttpRequest, exc: downloads.DownloadUnavailable, request_id: int
) -> HttpResponse:
    back = reverse("releases:request_detail", args=[request_id])
    return error_page(request, str(exc), exc.status, back)


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """The home page: what each role has to do."""
    user = request.user
    context: dict = {}
    if roles.is_steward(user):
        context["datasets"] = datasets_for(user)[:10]
        context["my_requests"] = request_selectors.visible_requests(user).filter(
            requested_by=user.pk
        )[:10]
    if roles.is_officer(user):
        context["queue"] = selectors.review_queue(user)[:10]
    if roles.is_recipient(user):
        context["approved"] = request_selectors.releases_for(user)[:10]
    return render(request, "releases/home.html", context)


@require_GET
def audit_trail_page(request: HttpRequest) -> HttpResponse:
    """The officers' audit trail: a date range (and a dataset), newest first, a page at a time."""
    audit_trail.check_see_trail(request.user)
    form = AuditTrailForm(request.GET or None)
    chosen = form.chosen() if form.is_bound and form.is_valid() else audit_trail.TrailFilter()
    try:
        events = audit_trail.trail_page(request.user, chosen, request.GET.get("page"))
    except InvalidInput as exc:
        form.add_error("project", str(exc))
        events = audit_trail.trail_page(request.user, audit_trail.TrailFilter())
    status = 400 if form.is_bound and form.errors else 200
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "releases/audit_trail.html",
        {
            "form": form,
            "events": events,
            "filter_query": f"{query.urlencode()}&" if query else "",
        },
        status=status,
    )


@require_POST
def audit_trail_export(request: HttpRequest) -> HttpResponseBase:
    """The chosen part of the trail as CSV or JSON, streamed (the export is audited)."""
    audit_trail.check_see_trail(request.user)
    form = AuditTrailForm(request.POST)
    if not form.is_valid():
        return error_page(
            request, " ".join(str(e) for errs in form.errors.values() for e in errs), 400
        )
    try:
        name, chunks = services.export_audit_trail(
            request.user, form.chosen(), request.POST.get("format", "csv")
        )
    except InvalidInput as exc:
        return error_page(request, str(exc), 400)
    response = StreamingHttpResponse(
        chunks, content_type="text/csv" if name.endswith(".csv") else "application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
