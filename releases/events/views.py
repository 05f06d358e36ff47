"""The pages of webhooks and notifications. Thin: each view parses, calls one service or
selector, renders; every write is a POST."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from releases.core import roles
from releases.core.errors import InvalidInput
from releases.events import selectors, services
from releases.events.forms import EndpointForm, PreferencesForm

NOTIFICATIONS_PER_PAGE = 25


def _webhooks_page(request: HttpRequest, form: EndpointForm, new=None, status: int = 200):
    return render(
        request,
        "releases/webhooks.html",
        {
            "form": form,
            "endpoints": selectors.endpoints_of(request.user),
            "deliveries": selectors.recent_deliveries(request.user),
            "without_webhooks": selectors.projects_without_webhooks(request.user),
            "new": new,
        },
        status=status,
    )


@require_http_methods(["GET", "POST"])
def webhook_list(request: HttpRequest) -> HttpResponse:
    if not roles.is_steward(request.user):
        raise PermissionDenied("Only data stewards can register webhooks.")
    if request.method == "GET":
        return _webhooks_page(request, EndpointForm(owner=request.user))
    form = EndpointForm(request.POST, owner=request.user)
    if form.is_valid():
        dataset = form.cleaned_data["dataset"]
        try:
            made = services.create_endpoint(
                request.user,
                form.cleaned_data["url"],
                dataset.pk if dataset else None,
                form.cleaned_data["active"],
            )
        except InvalidInput as exc:
            form.add_error("dataset" if dataset else "url", str(exc))
        else:
            # The secret is in this answer only: it is stored nowhere but encrypted.
            return _webhooks_page(request, EndpointForm(owner=request.user), made, status=201)
    return _webhooks_page(request, form, status=400)


@require_POST
def webhook_active(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    active = request.POST.get("active") == "1"
    endpoint = services.set_active(request.user, endpoint_id, active)
    messages.success(request, f"{endpoint.url} is now {'active' if active else 'paused'}.")
    return redirect("events:webhooks")


@require_POST
def webhook_delete(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    services.delete_endpoint(request.user, endpoint_id)
    messages.success(request, "Removed the webhook.")
    return redirect("events:webhooks")


@require_GET
def notification_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(selectors.notifications_of(request.user), NOTIFICATIONS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "releases/notifications.html",
        {"page": page, "unread": selectors.unread_count(request.user)},
    )


@require_GET
def notification_badge(request: HttpRequest) -> HttpResponse:
    """The unread count in the navigation bar (an htmx fragment, polled)."""
    return render(
        request,
        "releases/partials/notification_badge.html",
        {"notifications_unread": selectors.unread_count(request.user)},
    )


@require_POST
def notification_read(request: HttpRequest, notification_id: int) -> HttpResponse:
    services.mark_read(request.user, notification_id)
    return redirect("events:notifications")


@require_POST
def notification_read_all(request: HttpRequest) -> HttpResponse:
    count = services.mark_all_read(request.user)
    messages.success(request, f"Marked {count} notification{'s' if count != 1 else ''} read.")
    return redirect("events:notifications")


@require_http_methods(["GET", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    current = selectors.preferences_of(request.user)
    if request.method == "GET":
        form = PreferencesForm(current=current)
        return render(request, "releases/notification_preferences.html", {"form": form})
    form = PreferencesForm(request.POST, current=current)
    if form.is_valid():
        try:
            services.set_preferences(request.user, form.cleaned_data)
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "Saved your notification preferences.")
            return redirect("events:preferences")
    return render(request, "releases/notification_preferences.html", {"form": form}, status=400)
