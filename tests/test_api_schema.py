"""Schemathesis against the API's own schema, through its WSGI integration (the app as a real
client reaches it, with a token): generated calls to every operation, a bounded number each;
none answers 5xx, and every answer conforms to the schema (status, content type, headers,
body)."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from releases.core import roles
from releases.models import Role
from tests.conftest import make_user
from tests.support import factories
from tests.support.api import token_for
from tests.support.workflow import approve, request_release, run, tag

pytestmark = pytest.mark.django_db

#: What every answer must satisfy: no 5xx, and the schema's status codes, content types,
#: headers and bodies. (Whether the app accepts or refuses a generated input is left out: an
#: id the generator invents is rightly 404, and unknown query parameters are ignored.)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

#: Generated calls per operation (and phase): bounded so the whole run takes seconds.
EXAMPLES = 8


@pytest.fixture
def token(settings):
    """A write token of a person in every role, owning a ready dataset with a request ready
    for review and another approved: most calls then reach real data."""
    settings.API_RATE_LIMIT = "100000/min"
    cache.clear()
    person = make_user("everyone", roles.STEWARDS, roles.OFFICERS, roles.RECIPIENTS)
    officer = make_user("officer", roles.OFFICERS)
    dataset = factories.make_dataset(person, factories.synthetic_csv(), "people.csv")
    tag(person, dataset, {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    run(request_release(person, dataset))
    approve(officer, run(request_release(person, dataset)), person)
    return token_for(person)


@pytest.fixture
def api_schema(token):
    """The schema as the app serves it. The WSGI handler closes the database connection at
    each request's start and end; the test's transaction lives on it, so (as Django's test
    client does) those handlers are off while the test calls the app."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi(
            "/api/v1/openapi.json",
            get_wsgi_application(),
            headers={"Authorization": f"Bearer {token}"},
        )
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


#: The operations are called in this many shares, one test each, so that parallel workers share
#: them (each test makes its own token and data).
SHARES = 3


@pytest.mark.parametrize("share", range(SHARES))
def test_the_api_conforms_to_its_schema(
    api_schema, token, django_capture_on_commit_callbacks, share
):
    """Each operation of the share in turn (not schemathesis's per-operation pytest tests: they
    need a pytest older than the suite's), positive and negative examples; all failures
    listed. Together the shares call every operation."""
    failures: dict[str, str] = {}
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 20
    for operation in operations[share::SHARES]:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def call(case) -> None:
                case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)

            try:
                with django_capture_on_commit_callbacks(execute=False):
                    call()
            except (Exception, BaseExceptionGroup) as exc:  # every operation's failure is listed
                failures[f"{operation.label} ({mode.value})"] = str(exc)[:2000]
    assert not failures, "\n\n".join(f"{label}: {text}" for label, text in failures.items())
