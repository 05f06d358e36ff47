"""Release request pages: the dataset page with its request form, a request's live state,
the actions on a request (cancel, re-run, revoke, accept the terms, reproduce, attach an
attacker file), downloads and the list of releases. Thin: each view parses, calls one service or selector, renders."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from releases.core.errors import InvalidInput
from releases.core.http import error_page
from releases.core.http import is_htmx as _is_htmx
from releases.datasets import rules as dataset_rules
from releases.datasets import selectors as dataset_selectors
from releases.models import ReleaseFile
from releases.projects import rules as project_rules
from releases.requests import (
    attacker,
    downloads,
    history,
    lineage,
    recipes,
    reproduction,
    selectors,
    services,
)
from releases.requests.forms import ReleaseRequestForm, RevokeForm


def dataset_context(
    dataset, request_form=None, page_number=None, user=None, history_page=None, versions_page=None
) -> dict:
    """The dataset page with its release request form (and, for ``user``, its release
    history)."""
    context = {
        **dataset_selectors.dataset_page(dataset, page_number),
        "request_form": request_form or ReleaseRequestForm(dataset=dataset),
    }
    if history.can_see_history(user, dataset):
        context["history"] = history.history_page(user, dataset, history_page)
    if user is not None:
        context.update(lineage.lineage_context(user, dataset, versions_page))
    return context


@require_GET
def dataset_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_selectors.get_dataset_for(request.user, dataset_id, to_change=False)
    context = dataset_context(
        dataset,
        page_number=request.GET.get("page"),
        user=request.user,
        history_page=request.GET.get("history"),
        versions_page=request.GET.get("versions"),
    )
    context["waiting_for_queue"] = dataset_selectors.waiting_for_queue(dataset)
    context["stalled"] = dataset_selectors.stalled(dataset)
    context["can_move"] = project_rules.can_offer_move(request.user, dataset)
    # A colleague's dataset (the project lets stewards see all): shown without its forms.
    context["read_only"] = not dataset_rules.can_change(request.user, dataset)
    return render(request, "releases/dataset_detail.html", context)


@require_POST
def request_create(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_selectors.get_dataset_for(request.user, dataset_id)
    form = ReleaseRequestForm(request.POST, dataset=dataset)
    if form.is_valid():
        try:
            release_request = services.request_release(
                request.user, dataset, form.parameters(), form.sharing(), form.justifications()
            )
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            return redirect(release_request)
    return render(
        request,
        "releases/dataset_detail.html",
        dataset_context(dataset, form, user=request.user),
        status=400,
    )


@require_GET
def request_decisions(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """The request form's column decisions (roles still missing, justifications), refreshed
    when a role changes; the text already typed comes back in the query."""
    dataset = dataset_selectors.get_dataset_for(request.user, dataset_id, to_change=False)
    form = ReleaseRequestForm(dataset=dataset, initial=request.GET.dict())
    return render(
        request,
        "releases/partials/request_form.html#decisions",
        dataset_context(dataset, form),
    )


@require_GET
def request_status(request: HttpRequest, request_id: int) -> HttpResponse:
    """Polled while the request is queued or running (reads only: a lost worker or message is
    the sweeper's)."""
    release_request = selectors.get_request_for(request.user, request_id)
    response = render(
        request,
        "releases/request_detail.html#status",
        {
            "req": release_request,
            "waiting_for_queue": selectors.waiting_for_queue(release_request),
            **selectors.status_flags(release_request),
        },
    )
    if release_request.is_settled and _is_htmx(request):
        # The run is over: reload the page once so the result appears; polling stops.
        response["HX-Refresh"] = "true"
    return response


@require_POST
def request_rerun(request: HttpRequest, request_id: int) -> HttpResponse:
    """Re-run with one of the result's candidates (its levels, as ``age=2,sex=0``)."""

    def rerun(release_request):
        levels = services.parse_levels(request.POST.get("levels", ""))
        services.rerun_with_levels(request.user, release_request.pk, levels)

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
        lambda r: services.cancel(request.user, r.pk, request.POST.get("reason", "")),
        "Cancelled. A run under way stops within seconds and keeps nothing.",
    )


@require_POST
def request_revoke(request: HttpRequest, request_id: int) -> HttpResponse:
    form = RevokeForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    return _act(
        request,
        request_id,
        lambda r: services.revoke(request.user, r.pk, reason),
        "Revoked: nobody can download this release any more.",
    )


@require_POST
def accept_terms(request: HttpRequest, request_id: int) -> HttpResponse:
    return _act(
        request,
        request_id,
        lambda r: services.accept_terms(request.user, r.pk),
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
    request: HttpRequest, exc: downloads.DownloadUnavailable, request_id: int
) -> HttpResponse:
    back = reverse("releases:request_detail", args=[request_id])
    return error_page(request, str(exc), exc.status, back)


@require_GET
def download_file(request: HttpRequest, request_id: int, fmt: str = "csv") -> HttpResponseBase:
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
    # Streamed from storage, read once and hashed as it goes (never read into memory); the
    # filename is encoded by Django.
    response = StreamingHttpResponse(
        downloads.verified_stream(request.user, prepared), content_type=prepared.content_type
    )
    response["Content-Disposition"] = content_disposition_header(True, prepared.filename)
    response["Content-Length"] = str(prepared.size_bytes)
    response["X-Content-SHA256"] = prepared.sha256
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response


@require_GET
def release_list(request: HttpRequest) -> HttpResponse:
    releases = Paginator(selectors.releases_for(request.user), 25).get_page(request.GET.get("page"))
    return render(request, "releases/release_list.html", {"releases": releases})


# Multipart framing and the other fields around an attacker file.
UPLOAD_OVERHEAD_BYTES = 64 * 1024
LINKAGE_PARTIAL = "releases/partials/linkage.html"


def _linkage_card(request: HttpRequest, release_request, error: str = "") -> HttpResponse:
    _, context = attacker.linkage_for(request.user, release_request.pk)
    return render(
        request, LINKAGE_PARTIAL, {**context, "req": release_request, "attach_error": error}
    )


@require_POST
def attach_attacker_file(request: HttpRequest, request_id: int) -> HttpResponse:
    """Attach an attacker file (a plain form post, or htmx: the linkage card comes back)."""
    release_request = selectors.get_request_for(request.user, request_id)
    error = ""
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    if length > settings.MAX_UPLOAD_BYTES + UPLOAD_OVERHEAD_BYTES:
        # Refused before the body is read: the file never reaches the disk.
        error = attacker.refuse_oversized(request.user, release_request.pk)
    elif (uploaded := request.FILES.get("attacker_file")) is None:
        error = "Choose the attacker file to attach (CSV, Excel or Parquet)."
    else:
        try:
            attached = attacker.attach_attacker_file(request.user, release_request.pk, uploaded)
        except InvalidInput as exc:
            error = str(exc)
    if _is_htmx(request):  # the card says what happened
        return _linkage_card(request, release_request, error)
    if error:
        messages.error(request, error)
    else:
        messages.success(
            request,
            f"Attached {attached.name} ({attached.rows:,} records); a worker links it to the "
            "extract.",
        )
    return redirect(f"{release_request.get_absolute_url()}#linkage")


@require_GET
def linkage_status(request: HttpRequest, request_id: int) -> HttpResponse:
    """The linkage card, polled while a worker links the attacker file (reads only)."""
    release_request, _ = attacker.linkage_for(request.user, request_id)
    return _linkage_card(request, release_request)


# --- Recipes ----------------------------------------------------------------------------------


@require_POST
def recipe_save(request: HttpRequest, request_id: int) -> HttpResponse:
    """Save a submitted request as a recipe of its dataset's versions."""
    try:
        recipe = recipes.save_recipe(request.user, request_id, request.POST.get("name", ""))
    except InvalidInput as exc:
        messages.error(request, str(exc))
        return redirect("releases:request_detail", request_id=request_id)
    messages.success(request, f"Saved the recipe {recipe.name}.")
    return redirect(reverse("releases:request_detail", args=[request_id]))


@require_POST
def recipe_apply(request: HttpRequest, recipe_id: int, dataset_id: int) -> HttpResponse:
    """Ask for the recipe's release of this version, submitted in one step."""
    try:
        release_request = recipes.apply_recipe(request.user, recipe_id, dataset_id)
    except InvalidInput as exc:
        messages.error(request, str(exc))
        return redirect(reverse("releases:dataset_detail", args=[dataset_id]) + "#versions")
    return redirect(release_request)
