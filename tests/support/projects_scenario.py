"""Two projects in the browser: run after ``seed_demo`` as
``python -m tests.support.projects_scenario`` with the app's environment. Adds a site
administrator (``siteadmin``), a member-to-be of the first project (``newcomer``) and, in the
first project, a release of ``steward``'s ready for review. Prints JSON: the request's id and
the extra accounts' passwords.
"""

from __future__ import annotations

import json
import os
import random

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")
django.setup()

from django.contrib.auth.models import User  # noqa: E402

from anonymizer_site.celery import app as celery_app  # noqa: E402
from releases.models import ReleaseRequest, Role  # noqa: E402
from releases.requests import services as release  # noqa: E402
from releases.requests.parameters import ReleaseParameters  # noqa: E402
from tests.support import factories  # noqa: E402
from tests.support.workflow import tag  # noqa: E402

PASSWORDS = {"siteadmin": "pw-site-admin-for-projects", "newcomer": "pw-newcomer-of-project-a"}


def people_csv(rows: int = 200) -> str:
    rng = random.Random(22)
    lines = ["name,age,sex,diagnosis"]
    for i in range(rows):
        lines.append(
            f"Person {i},{rng.randint(18, 90)},{rng.choice('FM')},"
            f"{rng.choice(['flu', 'asthma', 'gout'])}"
        )
    return "\n".join(lines) + "\n"


def main() -> dict:
    User.objects.create_superuser("siteadmin", password=PASSWORDS["siteadmin"])
    User.objects.create_user("newcomer", password=PASSWORDS["newcomer"])
    steward = User.objects.get(username="steward")
    dataset = factories.make_dataset(steward, people_csv(), "project-a-people.csv")
    tag(
        steward,
        dataset,
        {"name": Role.IDENTIFIER, "age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER},
    )
    ready = release.request_release(steward, dataset, ReleaseParameters(k=3, suppression_limit=0.1))
    ready.refresh_from_db()
    if ready.state != ReleaseRequest.State.READY:
        raise SystemExit(f"Request {ready.pk} is {ready.state}, not ready: {ready.error}")
    return {"ready": ready.pk, "dataset": dataset.pk, "accounts": PASSWORDS}


if __name__ == "__main__":
    # The work runs in this process, one task after the other (as seed_demo does).
    celery_app.conf.task_always_eager = True
    print(json.dumps(main()))
