"""Logs say what matters: a refused permission is one line, not a stack trace."""

from __future__ import annotations

import logging

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_a_403_is_logged_in_one_line_without_a_traceback(client, recipient, caplog):
    client.force_login(recipient)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get(reverse("releases:dataset_list"))  # stewards only
    assert response.status_code == 403
    records = [r for r in caplog.records if r.name == "django.request"]
    assert len(records) == 1
    assert records[0].getMessage().startswith("Forbidden (Permission denied)")
    assert records[0].exc_info is None


def test_a_500_keeps_its_traceback(rf, caplog):
    from anonymizer_site.logging_filters import ClientErrorsWithoutTraceback

    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        record = logging.LogRecord("django.request", logging.ERROR, "", 0, "x", (), sys.exc_info())
    record.status_code = 500
    assert ClientErrorsWithoutTraceback().filter(record) and record.exc_info is not None


def test_the_favicon_is_found_without_logging_in(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response.headers["Location"].endswith("img/favicon.ico")
