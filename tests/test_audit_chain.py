"""The audit log as a hash chain: ``manage.py verify_audit`` passes on the log the app writes,
and names the first broken link when a row is edited, deleted or inserted behind the app's
back (plain SQL here, as someone with the database would). Deleting a dataset through the app
keeps the chain whole."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from releases.core import audit
from releases.datasets import services as datasets
from releases.models import AuditEvent, Dataset
from tests.support import factories

pytestmark = pytest.mark.django_db


def verify() -> str:
    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


def sql(statement: str, params=()) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


@pytest.fixture
def logged(steward):
    """A dataset uploaded and profiled, and a few events of the app's own."""
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    for i in range(4):
        audit.record(AuditEvent.Action.TAGGING, steward, dataset=dataset, step=i, note="é ✓")
    return dataset


def test_the_log_the_app_writes_is_one_chain(logged):
    rows = list(AuditEvent.objects.order_by("id").values_list("id", "prev_hash", "hash"))
    assert len(rows) >= 5
    assert rows[0][1] == ""
    for (_, _, before), (_, link, digest) in zip(rows, rows[1:], strict=False):
        assert link == before and len(digest) == 64 and digest != before
    text = verify()
    assert f"{len(rows)} events" in text and rows[-1][2] in text


def test_an_edited_event_is_named(logged):
    target = AuditEvent.objects.order_by("id")[2]
    sql(
        "UPDATE releases_auditevent SET detail = %s WHERE id = %s",
        [json.dumps({"step": 99}), target.pk],
    )
    with pytest.raises(CommandError, match=f"event #{target.pk} was changed"):
        verify()


def test_an_edited_time_or_actor_is_named(logged, officer):
    target = AuditEvent.objects.order_by("id")[1]
    sql("UPDATE releases_auditevent SET actor_id = %s WHERE id = %s", [officer.pk, target.pk])
    with pytest.raises(CommandError, match=f"broken at event #{target.pk}"):
        verify()


def test_a_deleted_event_breaks_the_link_of_the_next(logged):
    events = list(AuditEvent.objects.order_by("id").values_list("id", flat=True))
    sql("DELETE FROM releases_auditevent WHERE id = %s", [events[2]])
    with pytest.raises(
        CommandError, match=f"event #{events[3]} does not follow event #{events[1]}"
    ):
        verify()


def test_an_inserted_event_is_named(logged, steward):
    last = AuditEvent.objects.order_by("-id").first()
    sql(
        "INSERT INTO releases_auditevent (created_at, actor_id, action, detail, prev_hash, hash) "
        "VALUES (%s, %s, 'download', '{}', %s, %s)",
        [last.created_at, steward.pk, last.hash, "0" * 64],
    )
    inserted = AuditEvent.objects.order_by("-id").first()
    with pytest.raises(CommandError, match=f"event #{inserted.pk} was changed"):
        verify()
    # A later event written by the app follows the forged one, which still shows.
    audit.record(AuditEvent.Action.TAGGING, steward, step="after")
    with pytest.raises(CommandError, match=f"#{inserted.pk}"):
        verify()


def test_deleting_a_dataset_keeps_the_chain(logged, steward):
    datasets.delete_dataset(steward, logged)
    assert not Dataset.objects.filter(pk=logged.pk).exists()
    assert AuditEvent.objects.filter(dataset_ref=logged.pk, dataset__isnull=True).count() >= 5
    assert "chain holds" in verify()


def test_the_walk_is_done_in_batches_and_finds_the_same_break(logged):
    checked, broken = audit.verify_chain(batch=2)
    assert broken is None and checked == AuditEvent.objects.count()
    target = AuditEvent.objects.order_by("id")[3]
    sql("UPDATE releases_auditevent SET action = 'review' WHERE id = %s", [target.pk])
    assert audit.verify_chain(batch=2)[1].event_id == target.pk
    assert audit.verify_chain()[1].event_id == target.pk
