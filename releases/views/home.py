"""The home page: what each role has to do."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from releases import selectors
from releases.core import roles


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    user = request.user
    context: dict = {}
    if roles.is_steward(user):
        context["datasets"] = selectors.datasets_for(user)[:10]
        context["my_requests"] = selectors.visible_requests(user).filter(requested_by=user)[:10]
    if roles.is_officer(user):
        context["queue"] = selectors.review_queue(user)[:10]
    if roles.is_recipient(user):
        context["approved"] = selectors.releases_for(user)[:10]
    return render(request, "releases/home.html", context)
