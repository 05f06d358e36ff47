"""The install a backup is tried on, and what a person relies on after a restore.

``build(steward, officer, recipient)`` makes, through the services: an approved extract the
recipient has downloaded, a revoked extract, and a differentially private statistics release
(with its dataset's budget and ledger) approved and downloaded. ``observe()`` reads, in this
order, the audit trail (every row, every column), the remaining ε of each budget, then what
each release's recipient downloads (SHA-256 of the bytes, or the refusal).

As a script, with the app's environment (``DATABASE_URL``, ``MEDIA_ROOT``):
``demo`` makes the people and ``build``s (in a migrated database); ``observe`` prints ``observe()``
as JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any
from unittest import mock

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")
django.setup()

from django.core.exceptions import PermissionDenied  # noqa: E402
from django.core.serializers.json import DjangoJSONEncoder  # noqa: E402
from django.http import Http404  # noqa: E402

from releases.background import outbox as dispatch  # noqa: E402
from releases.core import roles  # noqa: E402
from releases.core.errors import InvalidInput  # noqa: E402
from releases.datasets import budget  # noqa: E402
from releases.models import AuditEvent, Dataset, ReleaseRequest  # noqa: E402
from releases.requests import services as sharing  # noqa: E402
from releases.requests.services import Sharing  # noqa: E402
from releases.statistics import run as statistics_run  # noqa: E402
from releases.statistics import services as statistics  # noqa: E402
from tests.conftest import READY_ROLES, make_user  # noqa: E402
from tests.support import factories, workflow  # noqa: E402
from tests.test_statistics_release import ROLES, people_csv  # noqa: E402

#: The statistics release: a count and a mean income, ε 0.25 each, of a budget of ε 2.
STATISTICS_QUERIES = [
    {"kind": "count", "epsilon": 0.25},
    {"kind": "mean", "column": "income", "lower": 0, "upper": 100_000, "epsilon": 0.25},
]


def build(steward, officer, recipient) -> dict[str, int]:
    """The three releases; their ids. Work is run here, never sent to a broker."""
    with mock.patch.object(dispatch, "send"):
        approved = workflow.approve(
            officer,
            workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES),
            recipient,
        )
        workflow.download(recipient, approved)
        revoked = workflow.approve(
            officer,
            workflow.ready_release(steward, factories.synthetic_csv(seed=11), READY_ROLES),
            recipient,
        )
        sharing.revoke(officer, revoked.pk, "Withdrawn by the data owner.")
        dataset = factories.make_dataset(steward, people_csv(), "people.csv")
        workflow.tag(steward, dataset, ROLES)
        budget.set_budget(officer, dataset, "2", "0")
        counted = statistics.request_statistics(
            steward, dataset, [dict(q) for q in STATISTICS_QUERIES], Sharing(recipients=[recipient])
        )
        statistics_run.run_statistics(counted.pk)
        counted = workflow.approve(officer, counted)
        assert counted.state == ReleaseRequest.State.APPROVED, counted.error
        workflow.download(recipient, counted)
    return {"approved": approved.pk, "revoked": revoked.pk, "statistics": counted.pk}


def audit_rows() -> list[list[Any]]:
    """Every audit row, every column, in order (as JSON gives them back)."""
    fields = [field.attname for field in AuditEvent._meta.concrete_fields]
    rows = list(AuditEvent.objects.order_by("id").values_list(*fields))
    return json.loads(json.dumps(rows, cls=DjangoJSONEncoder))


def observe() -> dict[str, Any]:
    """The audit trail and budgets first, then the recipients' downloads (which log)."""
    seen: dict[str, Any] = {"audit": audit_rows(), "remaining": {}, "downloads": {}}
    for dataset in Dataset.objects.order_by("id"):
        left = budget.remaining(dataset)
        if left is not None:
            seen["remaining"][dataset.name] = [str(left.epsilon), str(left.delta)]
    with mock.patch.object(dispatch, "send"):
        for release in ReleaseRequest.objects.order_by("id"):
            for recipient in release.recipients.order_by("id"):
                key = f"{release.pk} {recipient.username}"
                try:
                    data = workflow.download(recipient, release)
                except (InvalidInput, PermissionDenied, Http404) as exc:
                    seen["downloads"][key] = f"refused: {exc}"
                else:
                    seen["downloads"][key] = hashlib.sha256(data).hexdigest()
    return seen


def demo() -> None:
    ids = build(
        make_user("steward", roles.STEWARDS),
        make_user("officer", roles.OFFICERS),
        make_user("recipient", roles.RECIPIENTS),
    )
    print(json.dumps(ids))


if __name__ == "__main__":
    if sys.argv[1] == "demo":
        demo()
    elif sys.argv[1] == "observe":
        print(json.dumps(observe()))
