from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path

from releases.accounts import oidc
from releases.accounts import views as accounts
from releases.api.urls import account_patterns, api_patterns


@login_not_required
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """Browsers ask for /favicon.ico whatever the page says: send them to the static file."""
    return HttpResponsePermanentRedirect(static("img/favicon.ico"))


urlpatterns = [
    path("accounts/login/", oidc.Login.as_view(), name="login"),
    path("accounts/logout/", oidc.Logout.as_view(), name="logout"),
    # Single sign-on (docs/sso.md); the provider's redirect URI is /oidc/callback/.
    path(
        "oidc/authenticate/",
        login_not_required(oidc.Start.as_view()),
        name="oidc_authentication_init",
    ),
    path(
        "oidc/callback/",
        login_not_required(oidc.Callback.as_view()),
        name="oidc_authentication_callback",
    ),
    # The password reset by e-mail; setting a new password also releases a locked user name.
    path(
        "accounts/password-reset/",
        auth_views.PasswordResetView.as_view(),
        name="password_reset",
    ),
    path(
        "accounts/password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "accounts/reset/<uidb64>/<token>/",
        accounts.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "accounts/reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    # The HTTP API (docs/api.md) and the account's API tokens.
    path("api/v1/", api_patterns),
    path("account/", include((account_patterns, "account"))),
    path("account/", include("releases.events.urls")),
    path("", include("releases.urls")),
]
