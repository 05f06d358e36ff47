"""Addresses of the API (``/api/v1/``) and of the account's token page."""

from django.urls import path

from releases.api import views
from releases.api.main import api

urls, app_name, namespace = api.urls
for pattern in urls:
    # The API authenticates every call itself (a bearer token, or for the schema and its docs
    # page a signed-in session): the site's login redirect is not for it.
    pattern.callback.login_required = False  # type: ignore[union-attr]

api_patterns = (urls, app_name, namespace)

account_patterns = [
    path("tokens/", views.token_list, name="api_tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="api_token_revoke"),
]
