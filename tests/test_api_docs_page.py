"""The API's schema and docs page: served to a signed-in person or a token only, the docs
page from the app's own static files (no CDN), the schema naming every area's operations."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from django.core.cache import cache
from django.test import Client

from tests.support.api import client_for, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()  # the rate limit's counts (per token, per address): each test starts with none


def test_the_docs_page_loads_swagger_from_the_app_itself(steward):
    client = Client()
    client.force_login(steward)
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    html = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert "/static/ninja/swagger-ui-bundle.js" in sources
    assert "/static/ninja/swagger-ui.css" in sources
    assert all(s.startswith("/") for s in sources), sources  # nothing from another host
    for source in sources:
        if source.startswith("/static/"):
            assert finders.find(source.removeprefix("/static/")), source
    # The policy that forbids inline scripts holds: the page's scripts are files.
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
    assert not re.search(r"<script>(?!\s*</script>)", html)


def test_the_docs_page_sends_a_stranger_to_the_login(db):
    response = Client().get("/api/v1/docs")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_schema_needs_a_session_or_a_valid_token(steward):
    assert Client().get("/api/v1/openapi.json").status_code == 401
    bad = Client(HTTP_AUTHORIZATION="Bearer anon_nope_nope").get("/api/v1/openapi.json")
    assert bad.status_code == 401 and bad["Content-Type"] == "application/problem+json"
    schema = client_for(token_for(steward, "read")).get("/api/v1/openapi.json").json()
    assert schema["openapi"].startswith("3.")
    tags = {t for ops in schema["paths"].values() for op in ops.values() for t in op["tags"]}
    assert tags == {
        "datasets",
        "requests",
        "reviews",
        "releases",
        "statistics",
        "audit",
        "webhooks",
        "recipes",
    }
    assert schema["components"]["securitySchemes"]["BearerToken"]["scheme"] == "bearer"
    problem = schema["paths"]["/api/v1/requests/{request_id}"]["get"]["responses"]["404"]
    assert list(problem["content"]) == ["application/problem+json"]
