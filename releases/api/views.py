"""The account's "API tokens" page: make a token (shown once), list them, revoke one. Thin:
each view parses, calls one service or selector, renders."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from releases.api import tokens
from releases.api.forms import TokenForm
from releases.core.errors import InvalidInput


def _page(request: HttpRequest, form: TokenForm, new_token: str = "", status: int = 200):
    return render(
        request,
        "releases/api_tokens.html",
        {"form": form, "tokens": tokens.tokens_for(request.user), "new_token": new_token},
        status=status,
    )


@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request, TokenForm())
    form = TokenForm(request.POST)
    if form.is_valid():
        try:
            made = tokens.create_token(
                request.user,
                form.cleaned_data["name"],
                form.cleaned_data["scope"],
                form.cleaned_data["expires_days"],
            )
        except InvalidInput as exc:
            form.add_error(None, str(exc))
        else:
            # Shown in this answer only: it is stored nowhere but as its hash.
            return _page(request, TokenForm(), new_token=made.token, status=201)
    return _page(request, form, status=400)


@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        revoked = tokens.revoke_token(request.user, token_id)
    except InvalidInput as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Revoked the token {revoked.name} ({revoked.prefix}…).")
    return redirect("account:api_tokens")
