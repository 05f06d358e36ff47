"""The officers' audit trail: the page (a date range, a dataset, pages of 50), its export as
CSV and JSON checked against a plain query of the log, the export itself audited, and nobody
else seeing either."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from releases.core import audit
from releases.models import AuditEvent
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged(steward):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    other = factories.make_dataset(steward, factories.synthetic_csv(), "other.csv")
    for i in range(60):
        audit.record(AuditEvent.Action.TAGGING, steward, dataset=dataset, step=i)
    return dataset, other


def export(client, fmt: str, **fields) -> bytes:
    response = client.post(reverse("releases:audit_trail_export"), {"format": fmt, **fields})
    assert response.status_code == 200, response.content[:500]
    assert f".{fmt}" in response["Content-Disposition"]
    return b"".join(response.streaming_content)


def test_the_page_lists_the_log_newest_first_a_page_at_a_time(client, officer, logged):
    client.force_login(officer)
    page = client.get(reverse("releases:audit_trail"))
    assert page.status_code == 200
    listed = [e.pk for e in page.context["events"]]
    newest = list(AuditEvent.objects.order_by("-id").values_list("id", flat=True)[:50])
    assert listed == newest
    assert "Page 1 of 2" in page.content.decode()
    dataset, other = logged
    page = client.get(reverse("releases:audit_trail"), {"dataset": other.pk})
    assert {e.dataset_ref for e in page.context["events"]} == {other.pk}
    assert (
        page.context["events"].paginator.count == AuditEvent.objects.filter(dataset=other).count()
    )


def test_the_exports_hold_exactly_the_range_with_the_chain(client, officer, logged):
    dataset, _ = logged
    client.force_login(officer)
    expected = list(
        AuditEvent.objects.filter(dataset_id=dataset.pk)
        .order_by("id")
        .values_list("id", "prev_hash", "hash")
    )
    today = timezone.localdate().isoformat()
    raw = export(client, "csv", since=today, until=today, dataset=dataset.pk)
    frame = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)
    assert list(frame.columns[:4]) == ["id", "created_at", "actor", "action"]
    assert [(int(i), p, h) for i, p, h in frame[["id", "prev_hash", "hash"]].values] == expected
    assert json.loads(frame["detail"].iloc[-1]) == {"step": 59}

    document = json.loads(export(client, "json", dataset=dataset.pk))
    assert document["filter"]["dataset"] == dataset.pk
    assert [(e["id"], e["prev_hash"], e["hash"]) for e in document["events"]] == expected
    # Nothing before the range.
    tomorrow = (timezone.localdate() + timedelta(days=1)).isoformat()
    assert json.loads(export(client, "json", since=tomorrow))["events"] == []


def test_an_export_is_audited_and_its_cells_cannot_run_as_formulas(client, officer, logged):
    sneaky = get_user_model().objects.create_user("-sneaky", password="x" * 20)
    # About a dataset of the officer's project: the officer's trail holds their projects' events.
    audit.record(AuditEvent.Action.TAGGING, sneaky, dataset=logged[0], note="=HYPERLINK(1)")
    client.force_login(officer)
    frame = pd.read_csv(io.BytesIO(export(client, "csv")), dtype=str, keep_default_na=False)
    assert "'-sneaky" in set(frame["actor"])
    event = AuditEvent.objects.order_by("-id").first()
    assert (event.action, event.actor) == (AuditEvent.Action.AUDIT_EXPORT, officer)
    assert event.detail["format"] == "csv"


def test_bad_ranges_and_formats_are_refused_with_a_sentence(client, officer, logged):
    client.force_login(officer)
    before = AuditEvent.objects.count()
    response = client.post(
        reverse("releases:audit_trail_export"),
        {"format": "csv", "since": "2026-05-02", "until": "2026-05-01"},
    )
    assert response.status_code == 400
    assert "The end of the range is before its start." in response.content.decode()
    response = client.post(reverse("releases:audit_trail_export"), {"format": "xml"})
    assert response.status_code == 400 and "CSV or JSON" in response.content.decode()
    page = client.get(reverse("releases:audit_trail"), {"since": "soon"})
    assert page.status_code == 400
    assert AuditEvent.objects.count() == before


@pytest.mark.parametrize("person", ["steward", "recipient", "other_steward"])
def test_nobody_else_sees_or_exports_the_trail(client, request, person, logged):
    client.force_login(request.getfixturevalue(person))
    before = AuditEvent.objects.count()
    assert client.get(reverse("releases:audit_trail")).status_code == 403
    response = client.post(reverse("releases:audit_trail_export"), {"format": "csv"})
    assert response.status_code == 403
    assert AuditEvent.objects.count() == before
    client.logout()
    assert client.get(reverse("releases:audit_trail")).status_code == 302
