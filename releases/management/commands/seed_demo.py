"""Create two projects and demo accounts for each role; print their passwords.

The first project ("Default", made by the migration to projects) holds ``steward``,
``officer`` (also its admin), ``officer2`` and ``recipient``; the second ("Study B") holds
``steward_b`` and ``officer_b`` (also its admin) and a small dataset of its own, which the
first project's people never see.

Passwords are generated on the first run and kept in ``var/demo-accounts.txt`` (outside the
repository), so running it again prints the same accounts.

``--with-release`` also makes an approved release to look at: the Adult dataset from
``tests/data/adult/`` uploaded by ``steward``, its eight quasi-identifiers tagged with ARX's
hierarchies and ``workclass`` released as is, a k=5 / 5 % optimal release approved by
``officer`` with ``recipient`` named on it, and one reproduction. Before approving, ``officer``
attaches a demo voter list (``demo_voter_list``) that a worker links to the extract. Then a
second extract of the same rows, waiting for review, at other generalization levels that are
5-anonymous alone but single people out together with the first (its cross-release check
fails). It runs in this process (Celery eager), through the same services a person uses; a
second run leaves it as it is.
"""

import io
import json
import secrets
from pathlib import Path

import pandas as pd
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files import File
from django.core.management.base import BaseCommand, CommandError

from anonymizer_site.celery import app as celery_app
from releases.core import roles
from releases.datasets import services as datasets
from releases.models import Dataset, Membership, Project, ReleaseRequest, Role
from releases.requests import attacker, reproduction
from releases.requests import services as requests
from releases.requests.parameters import ReleaseParameters
from releases.requests.services import Sharing
from releases.review import services as review

DEFAULT_PROJECT = ("default", "Default")
SECOND_PROJECT = ("study-b", "Study B")
#: (user name, project's short name, roles there).
DEMO_ACCOUNTS = [
    ("steward", "default", (roles.STEWARD,)),
    ("officer", "default", (roles.OFFICER, roles.ADMIN)),
    ("officer2", "default", (roles.OFFICER,)),
    ("recipient", "default", (roles.RECIPIENT,)),
    ("steward_b", "study-b", (roles.STEWARD,)),
    ("officer_b", "study-b", (roles.OFFICER, roles.ADMIN)),
]
SECOND_DATASET = "Study B visits (demo)"
ADULT = Path(settings.BASE_DIR) / "tests" / "data" / "adult"
ADULT_QUASI_IDENTIFIERS = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "occupation",
    "race",
    "salary-class",
    "sex",
]
DEMO_DATASET = "Adult census extract (demo)"


class Command(BaseCommand):
    help = (
        "Create two projects with demo accounts: a data steward, two privacy officers and a "
        "recipient in the first, a steward and an officer in the second."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--with-release",
            action="store_true",
            help="Also create the Adult dataset with an approved k=5 release naming 'recipient'.",
        )

    def handle(self, *args, **options) -> None:
        store = settings.VAR_DIR / "demo-accounts.txt"
        passwords = json.loads(store.read_text()) if store.exists() else {}
        user_model = get_user_model()
        projects = {
            slug: Project.objects.get_or_create(slug=slug, defaults={"name": name})[0]
            for slug, name in (DEFAULT_PROJECT, SECOND_PROJECT)
        }
        for username, slug, held in DEMO_ACCOUNTS:
            password = passwords.get(username) or secrets.token_urlsafe(9)
            passwords[username] = password
            user, _ = user_model.objects.get_or_create(username=username)
            user.email = f"{username}@example.org"
            user.set_password(password)
            user.save()
            for role in held:
                Membership.objects.get_or_create(project=projects[slug], user=user, role=role)
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(passwords))
        store.chmod(0o600)
        self.stdout.write("Demo accounts (user name / password / project: roles):")
        for username, slug, held in DEMO_ACCOUNTS:
            self.stdout.write(
                f"  {username:<10} {passwords[username]:<14} {slug}: {', '.join(held)}"
            )
        self.seed_second_project(user_model.objects.get(username="steward_b"))
        if options["with_release"]:
            self.seed_release()

    def seed_second_project(self, steward_b) -> None:
        """A small dataset in the second project, uploaded by its steward (once)."""
        if Dataset.objects.filter(owner=steward_b, name=SECOND_DATASET).exists():
            return
        rows = ["age,sex,zip,visits"] + [
            f"{20 + (i * 7) % 60},{'FM'[i % 2]},{['10115', '10117', '10119'][i % 3]},{i % 5}"
            for i in range(200)
        ]
        content = ("\n".join(rows) + "\n").encode()
        eager = celery_app.conf.task_always_eager
        celery_app.conf.task_always_eager = True
        try:
            datasets.create_dataset(
                steward_b,
                File(io.BytesIO(content), name="visits.csv"),
                name=SECOND_DATASET,
                project=SECOND_PROJECT[0],
            )
        finally:
            celery_app.conf.task_always_eager = eager
        self.stdout.write(f"{SECOND_DATASET} uploaded by steward_b into {SECOND_PROJECT[1]}.")

    def seed_release(self) -> None:
        users = get_user_model().objects
        steward = users.get(username="steward")
        officer = users.get(username="officer")
        recipient = users.get(username="recipient")
        done = ReleaseRequest.objects.filter(
            dataset__owner=steward,
            dataset__name=DEMO_DATASET,
            state__in=ReleaseRequest.RELEASED_STATES,
        ).first()
        if done is not None:
            self.stdout.write(f"The demo release is there: /requests/{done.pk}/")
            return
        if not (ADULT / "adult.csv").exists():
            raise CommandError(f"The Adult data is not here ({ADULT}); it comes with the source.")
        self.stdout.write("Creating the demo release (Adult, k=5, 5 % suppression)...")
        # The workflow's tasks run in this process, one after the other.
        eager = celery_app.conf.task_always_eager
        celery_app.conf.task_always_eager = True
        try:
            with open(ADULT / "adult.csv", "rb") as handle:
                dataset = datasets.create_dataset(
                    steward,
                    File(handle, name="adult.csv"),
                    name=DEMO_DATASET,
                    project=DEFAULT_PROJECT[0],
                )
            dataset = Dataset.objects.get(pk=dataset.pk)
            if not dataset.is_ready:
                raise CommandError(f"The demo dataset was not profiled: {dataset.error}")
            for column in dataset.columns.all():
                if column.name in ADULT_QUASI_IDENTIFIERS:
                    datasets.set_column_role(steward, dataset, column.pk, Role.QUASI_IDENTIFIER)
                    path = ADULT / f"adult_hierarchy_{column.name}.csv"
                    with open(path, "rb") as hierarchy:
                        datasets.set_hierarchy_file(
                            steward, dataset, column.pk, File(hierarchy, name=path.name)
                        )
                else:
                    datasets.set_column_role(steward, dataset, column.pk, Role.INSENSITIVE)
            release_request = requests.request_release(
                steward,
                dataset,
                ReleaseParameters(k=5, suppression_limit=0.05),
                Sharing(recipients=[recipient]),
            )
            release_request.refresh_from_db()
            if release_request.state != ReleaseRequest.State.READY:
                raise CommandError(f"The demo release did not run: {release_request.error}")
            self.attach_voter_list(officer, release_request)
            review.review(officer, release_request.pk, "approve", "Demo: k=5 met, 5 % suppressed.")
            reproduction.request_reproduction(officer, release_request.pk)
            second = self.seed_second_release(steward, dataset, release_request)
        finally:
            celery_app.conf.task_always_eager = eager
        self.stdout.write(
            f"Demo release approved by officer for recipient: /requests/{release_request.pk}/"
        )
        if second is not None:
            self.stdout.write(
                f"A second extract that fails the cross-release check, for review: "
                f"/requests/{second.pk}/"
            )

    def seed_second_release(
        self, steward, dataset: Dataset, first: ReleaseRequest
    ) -> ReleaseRequest | None:
        """A second extract for another project: the first of the first search's 5-anonymous
        candidates that generalizes some column less than the first did (so it is not coarser
        everywhere, and together they can single people out: its cross-release check says)."""
        first.refresh_from_db()
        applied = first.summary.get("levels") or {}
        for candidate in first.summary.get("candidates") or []:
            levels = candidate["levels"]
            if all(levels[q] >= applied.get(q, 0) for q in levels):
                continue  # never finer anywhere: adds nothing to the first
            second = requests.request_release(
                steward,
                dataset,
                ReleaseParameters(k=5, suppression_limit=0.05, levels=levels),
                Sharing(recipients=[]),
            )
            second.refresh_from_db()
            return second
        return None

    def attach_voter_list(self, officer, release_request: ReleaseRequest) -> None:
        """Attach the demo voter list to the demo request; eager Celery links it here."""
        content = demo_voter_list(ADULT / "adult.csv")
        attached = attacker.attach_attacker_file(
            officer, release_request.pk, File(io.BytesIO(content), name=VOTER_LIST)
        )
        attached.refresh_from_db()
        found = attached.linkage
        if found:
            self.stdout.write(
                f"Demo voter list linked: {found['matched_one']} of "
                f"{found['attacker_records']} voters matched by exactly one released record."
            )


#: The demo voter list's name, and how many people of the demo dataset it lists.
VOTER_LIST = "demo-voter-list.csv"
VOTERS = 3000
_FIRST = ["Alex", "Maria", "John", "Aisha", "Wei", "Olga", "Carlos", "Fatima", "Tom", "Yuki"]
_LAST = ["Smith", "Garcia", "Chen", "Okafor", "Novak", "Silva", "Kim", "Haddad", "Berg", "Ito"]


def demo_voter_list(source: Path, voters: int = VOTERS, seed: int = 20) -> bytes:
    """An identified file derived from the demo dataset, the same bytes every time: a name and
    age, sex, race, native country and workclass of a sample of its rows (what a voter list
    or a population register holds)."""
    frame = pd.read_csv(source, sep=";", dtype=str, keep_default_na=False)
    sample = frame.sample(min(voters, len(frame)), random_state=seed).reset_index(drop=True)
    known = sample[["age", "sex", "race", "native-country", "workclass"]]
    names = [
        f"{_FIRST[i % len(_FIRST)]} {_LAST[(i // len(_FIRST)) % len(_LAST)]} {i + 1:04d}"
        for i in range(len(known))
    ]
    return known.assign(name=names)[["name", *known.columns]].to_csv(index=False).encode()
