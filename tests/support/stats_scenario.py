"""Steps of the concurrent statistics release test, each run in a process of its own (as
Celery worker processes would be).

``setup EPSILON COUNT EACH``: a steward's profiled dataset with a privacy budget of EPSILON and
COUNT statistics release requests of ε EACH (all accepted: nothing is spent yet); prints their
ids. ``run REQUEST GO``: prints "ready", waits until the file GO exists (so that all processes
run at the same moment), then runs the request (the worker's body); prints its outcome.
"""

from __future__ import annotations

import json
import os
import sys
import time
from unittest import mock

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")
django.setup()

from django.contrib.auth.models import User  # noqa: E402

from releases.background import outbox as dispatch  # noqa: E402
from releases.core import roles  # noqa: E402
from releases.datasets import budget  # noqa: E402
from releases.models import ReleaseRequest, Role  # noqa: E402
from releases.statistics import run as statistics_run  # noqa: E402
from releases.statistics import services as statistics  # noqa: E402
from tests.support import factories, members  # noqa: E402
from tests.support.workflow import tag  # noqa: E402


def user(name: str, group: str) -> User:
    person, _ = User.objects.get_or_create(username=name)
    members.grant(person, group)
    return person


def setup(epsilon: str, count: int, each: float) -> None:
    steward = user("steward", roles.STEWARDS)
    rows = ["age,income"] + [f"{20 + i % 50},{1000 * (i % 7)}" for i in range(120)]
    dataset = factories.make_dataset(steward, "\n".join(rows) + "\n", "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "income": Role.SENSITIVE})
    budget.set_budget(user("officer", roles.OFFICERS), dataset, epsilon, 0)
    queries = [
        {"kind": "count", "epsilon": each / 2},
        {"kind": "mean", "column": "income", "lower": 0, "upper": 10_000, "epsilon": each / 2},
    ]
    # The runs are this test's to start: nothing is sent to a broker.
    with mock.patch.object(dispatch, "send"):
        ids = [statistics.request_statistics(steward, dataset, queries).pk for _ in range(count)]
    print(json.dumps({"dataset": dataset.pk, "requests": ids}))


def run(request_id: int, go: str) -> None:
    ReleaseRequest.objects.get(pk=request_id)  # connected before the start
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.0005)
    statistics_run.run_statistics(request_id)
    done = ReleaseRequest.objects.get(pk=request_id)
    print(json.dumps({"request": request_id, "state": done.state, "error": done.error}))


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        setup(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif sys.argv[1] == "run":
        run(int(sys.argv[2]), sys.argv[3])
