"""Fills a demo database with every state a page can show, for the accessibility tests and the
screenshots: run after ``seed_demo --with-release`` as ``python -m tests.support.a11y_scenario``
with the app's environment. Prints JSON: the ids made and the extra accounts' passwords.

Besides the approved Adult release it adds, for ``steward``: a small dataset tagged with a
direct identifier, three quasi-identifiers (one with an automatic hierarchy) and a sensitive
column; on it a release with k, l and t ready for review, one with changes requested, and an
approved statistics release (``officer`` set its budget) naming ``recipient``; a recipe saved
from the release ready for review, and a version 2 of the dataset with a new column no one has
given a role yet; a second dataset nobody has tagged yet (the suggestions wait). ``visitor``
holds no role; ``siteadmin`` is a site administrator (the projects pages).
"""

from __future__ import annotations

import json
import os
import random
from unittest import mock

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")
django.setup()

from django.contrib.auth.models import User  # noqa: E402

from anonymizer_site.celery import app as celery_app  # noqa: E402
from releases.datasets import budget, profiling  # noqa: E402
from releases.datasets import services as datasets  # noqa: E402
from releases.models import Dataset, ReleaseRequest, Role  # noqa: E402
from releases.requests import recipes  # noqa: E402
from releases.requests import services as release  # noqa: E402
from releases.requests.parameters import ReleaseParameters  # noqa: E402
from releases.requests.services import Sharing  # noqa: E402
from releases.review import services as review  # noqa: E402
from releases.statistics import services as statistics  # noqa: E402
from tests.support import factories  # noqa: E402
from tests.support.workflow import tag  # noqa: E402

VISITOR_PASSWORD = "pw-visitor-without-role"
SITE_ADMIN_PASSWORD = "pw-site-admin-of-projects"


def people_csv(rows: int = 300, with_ward: bool = False) -> str:
    rng = random.Random(12)
    lines = ["name,email,age,sex,zip,diagnosis,visits" + (",ward" if with_ward else "")]
    for i in range(rows):
        lines.append(
            f"Person {i:03d},person{i}@example.org,{rng.randint(18, 90)},{rng.choice('FM')},"
            f"{rng.choice(['10115', '10117', '10119', '10178'])},"
            f"{rng.choice(['flu', 'asthma', 'gout', 'migraine'])},{rng.randint(0, 12)}"
            + (f",{rng.choice('ABC')}" if with_ward else "")
        )
    return "\n".join(lines) + "\n"


def visits_csv(rows: int = 60) -> str:
    rng = random.Random(13)
    lines = ["patient_name,phone,birth_year,ward,length_of_stay"]
    for i in range(rows):
        lines.append(
            f"Patient {i},+49 30 {rng.randint(1000000, 9999999)},{rng.randint(1930, 2005)},"
            f"{rng.choice(['A', 'B', 'C'])},{rng.randint(1, 30)}"
        )
    return "\n".join(lines) + "\n"


def settled(release_request: ReleaseRequest, state: str) -> ReleaseRequest:
    release_request.refresh_from_db()
    if release_request.state != state:
        raise SystemExit(
            f"Request {release_request.pk} is {release_request.state}, not {state}: "
            f"{release_request.error}"
        )
    return release_request


def main() -> dict:
    users = User.objects
    steward, officer, officer2, recipient = (
        users.get(username=name) for name in ("steward", "officer", "officer2", "recipient")
    )
    visitor, _ = users.get_or_create(username="visitor")
    visitor.set_password(VISITOR_PASSWORD)
    visitor.save()
    User.objects.create_superuser("siteadmin", password=SITE_ADMIN_PASSWORD)
    demo = ReleaseRequest.objects.get(state=ReleaseRequest.State.APPROVED)

    people = factories.make_dataset(steward, people_csv(), "people.csv")
    tag(
        steward,
        people,
        {
            "name": Role.IDENTIFIER,
            "email": Role.IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "zip": Role.QUASI_IDENTIFIER,
            "diagnosis": Role.SENSITIVE,
            "visits": Role.INSENSITIVE,
        },
    )
    age = people.columns.get(name="age")
    datasets.use_automatic_hierarchy(steward, people, age.pk)
    visits = factories.make_dataset(steward, visits_csv(), "visits.csv")
    Dataset.objects.filter(pk=visits.pk).update(name="Ward visits (not tagged yet)")

    ready = release.request_release(
        steward,
        people,
        ReleaseParameters(k=3, l=2, t=0.6, suppression_limit=0.1),
        Sharing(recipients=[recipient]),
    )
    ready = settled(ready, ReleaseRequest.State.READY)
    changes = release.request_release(
        steward, people, ReleaseParameters(k=2, suppression_limit=0.05)
    )
    settled(changes, ReleaseRequest.State.READY)
    review.review(officer2, changes.pk, "changes", "Ages are too precise: ask for k=5.")
    changes = settled(changes, ReleaseRequest.State.CHANGES_REQUESTED)

    budget.set_budget(officer, people, "2", "0")
    stats = statistics.request_statistics(
        steward,
        people,
        [
            {"kind": "count", "epsilon": 0.25},
            {
                "kind": "histogram",
                "epsilon": 0.25,
                "by": [{"column": "sex", "categories": ["F", "M"]}],
            },
            {"kind": "mean", "column": "visits", "lower": 0, "upper": 12, "epsilon": 0.25},
        ],
        Sharing(recipients=[recipient]),
    )
    settled(stats, ReleaseRequest.State.READY)
    review.review(officer, stats.pk, "approve", "Counts only.")
    stats = settled(stats, ReleaseRequest.State.APPROVED)

    # Version 2 of people: one column more (no role yet, so requests wait), and a recipe.
    recipes.save_recipe(steward, ready.pk, "Monthly k=3")
    with mock.patch.object(datasets, "enqueue_profiling"):
        people_v2 = datasets.create_version(
            steward, people, factories.upload(people_csv(320, with_ward=True), "people.csv")
        )
    profiling.profile_dataset(people_v2.pk)

    return {
        "adult": demo.dataset_id,
        "people": people.pk,
        "people_v2": people_v2.pk,
        "visits": visits.pk,
        "approved": demo.pk,
        "ready": ready.pk,
        "changes": changes.pk,
        "statistics": stats.pk,
        "age_column": age.pk,
        "accounts": {"visitor": VISITOR_PASSWORD, "siteadmin": SITE_ADMIN_PASSWORD},
    }


if __name__ == "__main__":
    # The work runs in this process, one task after the other (as seed_demo does).
    celery_app.conf.task_always_eager = True
    print(json.dumps(main()))
