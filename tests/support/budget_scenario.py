"""Steps of the concurrent budget tests, each run in a process of its own (as web or worker
processes would be).

``setup EPSILON``: a steward's dataset with a privacy budget of EPSILON; prints its id.
``spend DATASET EPSILON GO``: prints "ready", waits until the file GO exists (so that all
processes spend at the same moment), then spends; prints the outcome as JSON.
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

from releases.core import roles  # noqa: E402
from releases.core.errors import InvalidInput  # noqa: E402
from releases.datasets import budget  # noqa: E402
from releases.models import Dataset  # noqa: E402
from tests.support import members  # noqa: E402


def user(name: str, group: str) -> User:
    person, _ = User.objects.get_or_create(username=name)
    members.grant(person, group)
    return person


def setup(epsilon: str) -> None:
    steward = user("steward", roles.STEWARDS)
    dataset = Dataset.objects.create(
        owner=steward,
        project=members.default_project(),
        name="people",
        original_filename="people.csv",
        sha256="0" * 64,
        size_bytes=1,
        status=Dataset.Status.READY,
    )
    budget.set_budget(user("officer", roles.OFFICERS), dataset, epsilon, 0)
    print(json.dumps({"dataset": dataset.pk}))


def spend(dataset_id: int, epsilon: str, go: str) -> None:
    dataset = Dataset.objects.get(pk=dataset_id)
    steward = User.objects.get(username="steward")
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.0005)
    try:
        entry = budget.spend(dataset, epsilon, 0, steward, {"process": os.getpid()})
        print(json.dumps({"ok": True, "remaining": str(entry.epsilon_remaining)}))
    except InvalidInput as exc:
        print(json.dumps({"ok": False, "error": str(exc)}))


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        setup(sys.argv[2])
    elif sys.argv[1] == "spend":
        spend(int(sys.argv[2]), sys.argv[3], sys.argv[4])
