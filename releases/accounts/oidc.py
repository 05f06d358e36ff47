"""Single sign-on with OpenID Connect (docs/sso.md), on mozilla-django-oidc: the provider's
endpoints (its discovery document, read when someone signs in, never at start-up), the
authentication backend (a user found by the provider's ``sub``, their roles from its groups
claim) and the views that start a sign-in, take the provider's answer and sign out.

A provider that cannot be reached is ``ProviderDown``: the views turn it into a message on the
login page; local accounts still work when they are enabled."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from releases.accounts import services

logger = logging.getLogger(__name__)

#: The discovery document's keys the app uses, and the settings that replace each.
_ENDPOINTS = {
    "issuer": "OIDC_OP_ISSUER",
    "authorization_endpoint": "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "token_endpoint": "OIDC_OP_TOKEN_ENDPOINT",
    "userinfo_endpoint": "OIDC_OP_USER_ENDPOINT",
    "jwks_uri": "OIDC_OP_JWKS_ENDPOINT",
    "end_session_endpoint": "OIDC_OP_LOGOUT_ENDPOINT",
}
#: The last discovery document read (per process): the callback and logout use it.
_discovered: dict[str, str] = {}
#: Set in the session at a single sign-on: logout then also ends the provider's session.
SSO_SESSION_KEY = "signed_in_by_sso"


class ProviderDown(Exception):
    """The identity provider did not answer (or answered nonsense)."""


def down_message() -> str:
    return (
        f"{settings.OIDC_PROVIDER_NAME} cannot be reached right now, so signing in with it "
        "is not possible. Try again in a few minutes"
        + (", or sign in with your local account." if settings.LOCAL_LOGIN_ENABLED else ".")
    )


def endpoints(refresh: bool = False) -> dict[str, str]:
    """The provider's endpoints: discovered (again when ``refresh``), then the settings' own."""
    if settings.OIDC_DISCOVERY_URL and (refresh or not _discovered):
        try:
            response = requests.get(settings.OIDC_DISCOVERY_URL, timeout=settings.OIDC_TIMEOUT)
            response.raise_for_status()
            document = response.json()
        except (requests.RequestException, ValueError) as error:
            logger.warning("OpenID provider discovery failed: %s", error)
            raise ProviderDown(str(error)) from error
        if not isinstance(document, dict) or not document.get("authorization_endpoint"):
            raise ProviderDown("The discovery document names no authorization endpoint.")
        _discovered.clear()
        _discovered.update({key: str(document.get(key) or "") for key in _ENDPOINTS})
    found = dict(_discovered) or dict.fromkeys(_ENDPOINTS, "")
    for key, setting in _ENDPOINTS.items():
        if getattr(settings, setting):
            found[key] = getattr(settings, setting)
    return found


class Backend(OIDCAuthenticationBackend):
    """The authorization code flow's end: the user the provider vouches for."""

    def authenticate(self, request, **kwargs):
        if request is None or not (request.GET.get("code") and request.GET.get("state")):
            return None  # a password sign-in, not this backend's
        found = endpoints()
        self.OIDC_OP_TOKEN_ENDPOINT = found["token_endpoint"]
        self.OIDC_OP_USER_ENDPOINT = found["userinfo_endpoint"]
        self.OIDC_OP_JWKS_ENDPOINT = found["jwks_uri"]
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as error:
            logger.warning("OpenID provider unreachable at sign-in: %s", error)
            raise ProviderDown(str(error)) from error

    def get_userinfo(self, access_token, id_token, payload) -> dict[str, Any]:
        """The ID token's claims, with the user info endpoint's (when there is one) over them;
        ``sub`` and ``iss`` are the ID token's, which is signed."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            info = super().get_userinfo(access_token, id_token, payload)
            if info.get("sub", payload.get("sub")) != payload.get("sub"):
                raise SuspiciousOperation("The user info is of another subject.")
            claims.update(info)
        claims["sub"], claims["iss"] = payload.get("sub"), payload.get("iss")
        return claims

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        subject = str(claims.get("sub") or "")
        if not subject:
            raise SuspiciousOperation("The provider's claims have no subject (sub).")
        groups = claims.get(settings.OIDC_GROUP_CLAIM) or []
        if isinstance(groups, str):
            groups = [groups]
        email = str(claims.get("email") or "")
        username = str(claims.get("preferred_username") or email or subject)[:150]
        return services.sign_in_by_sso(
            services.SsoClaims(
                issuer=str(claims.get("iss") or endpoints()["issuer"]),
                subject=subject,
                username=username,
                email=email,
                groups=frozenset(str(g) for g in groups),
            )
        )


def _enabled() -> None:
    if not settings.OIDC_ENABLED:
        raise Http404("Single sign-on is not enabled.")


class Start(OIDCAuthenticationRequestView):
    """POST: off to the provider's sign-in page (or back to the login page, saying it is down)."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest) -> HttpResponse:
        _enabled()
        try:
            self.OIDC_OP_AUTH_ENDPOINT = endpoints(refresh=True)["authorization_endpoint"]
        except ProviderDown:
            messages.error(request, down_message())
            return redirect(settings.LOGIN_URL)
        return self.get(request)


class Callback(OIDCAuthenticationCallbackView):
    """The provider sends the browser back here with a code (GET, as the protocol has it): the
    sign-in, and the user's provider-given roles, are written here."""

    def get(self, request: HttpRequest) -> HttpResponse:
        _enabled()
        try:
            return super().get(request)
        except ProviderDown:
            messages.error(request, down_message())
            return redirect(settings.LOGIN_URL)

    def login_success(self) -> HttpResponse:
        response = super().login_success()
        self.request.session[SSO_SESSION_KEY] = True
        return response

    def login_failure(self) -> HttpResponse:
        messages.error(
            self.request,
            f"Signing in with {settings.OIDC_PROVIDER_NAME} did not succeed. Try again, or ask "
            "your administrator whether your account may use this app.",
        )
        return redirect(settings.LOGIN_URL)


class Login(auth_views.LoginView):
    """The login page: the provider's button when single sign-on is on; the password form only
    while local login is enabled (else a password is refused)."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["oidc_enabled"] = settings.OIDC_ENABLED
        context["oidc_provider_name"] = settings.OIDC_PROVIDER_NAME
        context["local_login_enabled"] = settings.LOCAL_LOGIN_ENABLED
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if settings.LOCAL_LOGIN_ENABLED:
            return super().post(request, *args, **kwargs)
        context = self.get_context_data(form=self.get_form_class()(request))
        context["local_refused"] = True
        return self.render_to_response(context, status=403)


class Logout(auth_views.LogoutView):
    """Ends the app's session; after a single sign-on also the provider's, when it has an
    end-session endpoint (with the ID token as hint, and back to the login page)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        by_sso = bool(request.session.get(SSO_SESSION_KEY))
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        if not (settings.OIDC_ENABLED and by_sso):
            return response
        try:
            end_session = endpoints()["end_session_endpoint"]
        except ProviderDown:
            return response
        if not end_session:
            return response
        params = {"post_logout_redirect_uri": request.build_absolute_uri(reverse("login"))}
        params["client_id"] = settings.OIDC_RP_CLIENT_ID
        if id_token:
            params["id_token_hint"] = id_token
        return HttpResponseRedirect(f"{end_session}?{urlencode(params)}")
