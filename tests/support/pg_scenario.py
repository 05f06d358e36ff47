"""Steps of the PostgreSQL concurrency tests, each run in a process of its own.

``setup``: users, a dataset and a release request run to "ready for review"; prints its id.
``review ID USER DECISION START``: waits until the clock reaches START (so that several
processes act at the same moment), then reviews; prints the outcome as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")
django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.exceptions import PermissionDenied  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402

from releases.core import roles  # noqa: E402
from releases.core.errors import InvalidInput  # noqa: E402
from releases.datasets import services as datasets  # noqa: E402
from releases.models import ReleaseRequest, Role  # noqa: E402
from releases.requests import services as release  # noqa: E402
from releases.requests.parameters import ReleaseParameters  # noqa: E402
from releases.review import services as review  # noqa: E402
from tests.support import members  # noqa: E402


def setup() -> None:
    steward = User.objects.create_user("steward", password="x")
    members.grant(steward, roles.STEWARDS)
    for name in ("officer1", "officer2"):
        members.grant(User.objects.create_user(name, password="x"), roles.OFFICERS)
    rows = ["age,sex,city"] + [f"{20 + i % 40},{'FM'[i % 2]},{'ABC'[i % 3]}" for i in range(400)]
    upload = SimpleUploadedFile("people.csv", ("\n".join(rows) + "\n").encode())
    # The tests run this step with eager Celery: profiling and the run happen in this process.
    dataset = datasets.create_dataset(steward, upload)
    dataset.refresh_from_db()
    for column in dataset.columns.all():
        datasets.set_column_role(steward, dataset, column.pk, Role.QUASI_IDENTIFIER)
    request = release.request_release(
        steward, dataset, ReleaseParameters(k=5, suppression_limit=0.05)
    )
    request.refresh_from_db()
    assert request.state == ReleaseRequest.State.READY, request.error
    print(json.dumps({"request": request.pk}))


def do_review(request_id: int, username: str, decision: str, start: float) -> None:
    user = User.objects.get(username=username)
    while time.time() < start:
        time.sleep(0.001)
    try:
        outcome = review.review(user, request_id, decision, "comment")
        print(json.dumps({"ok": True, "state": outcome.state}))
    except (InvalidInput, PermissionDenied) as exc:
        print(json.dumps({"ok": False, "error": str(exc)}))


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        setup()
    elif sys.argv[1] == "review":
        do_review(int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]))
