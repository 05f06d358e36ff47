"""One release request and a person in every role, made once for a whole test module.

Tests that ask many questions of the same request (every role x action x state) share it: the
module's fixture writes it outside the tests' transactions, each test changes what it likes
inside its own transaction (rolled back), and the fixture removes everything at the end.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.test import override_settings

from releases.background import outbox as dispatch
from releases.core import roles
from releases.models import (
    AuditEvent,
    Dataset,
    OutboxMessage,
    ReleaseRequest,
    Reproduction,
    Review,
    Role,
    TermsAcceptance,
)
from releases.requests import services as sharing
from tests.conftest import READY_ROLES
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import ready_release, tag

#: The people: who they are to the request.
PEOPLE = (
    "requester",
    "other_steward",
    "officer",
    "named_recipient",
    "accepted_recipient",
    "other_recipient",
    "anonymous",
)


def people_csv(rows: int = 300, seed: int = 5) -> str:
    rng = random.Random(seed)
    lines = ["name,age,zip,sex,diagnosis"]
    for i in range(rows):
        lines.append(
            f"Person {i},{rng.randint(18, 90)},{rng.choice(['02139', '02141'])},"
            f"{rng.choice('FM')},{rng.choice(['flu', 'asthma', 'gout'])}"
        )
    return "\n".join(lines) + "\n"


def _user(username: str, *groups: str) -> User:
    from tests.conftest import make_user

    return make_user(username, *groups)


@contextlib.contextmanager
def world(
    django_db_blocker,
    content: str | None = None,
    tagging: dict | None = None,
    prepare=None,
    **request,
):
    """Users in every role and a request run to "ready for review" naming two recipients, one
    of whom has accepted its terms. Yields a dict: the people, the request, the media folder.
    ``request``: more keywords of ``ready_release`` (``filename``, ``k``...).

    ``content`` and ``tagging`` replace the default data and roles; ``prepare(steward,
    dataset)`` runs after tagging (to attach hierarchies, say)."""
    media = Path(tempfile.mkdtemp(prefix="anonymizer-world-"))
    # Outside a test's transaction work would be sent to a broker at once: here it is run in
    # this process instead (``run``), so nothing is sent.
    with (
        django_db_blocker.unblock(),
        override_settings(MEDIA_ROOT=media),
        mock.patch.object(dispatch, "send"),
    ):
        try:
            people = {
                "requester": _user("w-steward", roles.STEWARDS),
                "other_steward": _user("w-steward2", roles.STEWARDS),
                "officer": _user("w-officer", roles.OFFICERS),
                "named_recipient": _user("w-recipient", roles.RECIPIENTS),
                "accepted_recipient": _user("w-recipient-ok", roles.RECIPIENTS),
                "other_recipient": _user("w-recipient2", roles.RECIPIENTS),
                "anonymous": AnonymousUser(),
            }
            release_request = ready_release(
                people["requester"],
                content or people_csv(),
                tagging
                or {
                    "name": Role.IDENTIFIER,
                    "age": Role.QUASI_IDENTIFIER,
                    "sex": Role.QUASI_IDENTIFIER,
                    "diagnosis": Role.SENSITIVE,
                },
                prepare=prepare,
                **request,
            )
            release_request.recipients.add(people["named_recipient"], people["accepted_recipient"])
            # Accepted while approved (the only state it can be), then back to ready.
            ReleaseRequest.objects.filter(pk=release_request.pk).update(
                state=ReleaseRequest.State.APPROVED
            )
            sharing.accept_terms(people["accepted_recipient"], release_request.pk)
            ReleaseRequest.objects.filter(pk=release_request.pk).update(
                state=ReleaseRequest.State.READY
            )
            release_request.refresh_from_db()
            yield {"people": people, "request": release_request, "media": media}
        finally:
            _remove_all(User.objects.filter(username__startswith="w-"))
            shutil.rmtree(media, ignore_errors=True)


def ready_request_once(
    django_db_blocker,
    content: str | None = None,
    tagging: dict | None = None,
    filename: str = "people.csv",
) -> contextlib.AbstractContextManager[dict]:
    """``tests/conftest.py``'s ``steward`` and ``ready_request``, made once for a module:
    ``steward`` (with an e-mail address) and their request over ``synthetic_csv`` with
    ``READY_ROLES`` (or ``content`` in ``filename`` with ``tagging``), k=5 with 5 % suppression,
    run to "ready for review". Yields a dict: the steward, the request, the media folder
    holding its files."""

    def make() -> dict:
        steward = _steward()
        release_request = ready_release(
            steward, content or synthetic_csv(), tagging or READY_ROLES, filename
        )
        return {"steward": steward, "request": release_request}

    return _made_once(django_db_blocker, make)


def dataset_once(
    django_db_blocker,
    content: str,
    tagging: dict,
    filename: str = "people.csv",
    rest: str | None = Role.WITHHELD,
) -> contextlib.AbstractContextManager[dict]:
    """``tests/conftest.py``'s ``steward`` and a dataset of theirs, made once for a module:
    ``content`` uploaded as ``filename``, profiled, its columns given ``tagging`` and the others
    ``rest`` (as ``workflow.tag``). Yields a dict: the steward, the dataset, the media folder
    holding its file."""

    def make() -> dict:
        steward = _steward()
        dataset = make_dataset(steward, content, filename)
        tag(steward, dataset, tagging, rest=rest)
        return {"steward": steward, "dataset": dataset}

    return _made_once(django_db_blocker, make)


def module_ready_request() -> tuple:
    """The fixtures of a module whose tests share one ready request: ``shared_ready`` (made
    once, :func:`ready_request_once`), and per test ``steward`` and ``ready_request`` read
    afresh, the request's files copied to the test's media folder. A module assigns them:
    ``shared_ready, steward, ready_request = module_ready_request()``."""

    @pytest.fixture(scope="module")
    def shared_ready(django_db_setup, django_db_blocker):
        with ready_request_once(django_db_blocker) as made:
            yield made

    @pytest.fixture
    def steward(shared_ready, db) -> User:
        return User.objects.get(pk=shared_ready["steward"].pk)

    @pytest.fixture
    def ready_request(shared_ready, steward, private_media_root) -> ReleaseRequest:
        media_copy(shared_ready, private_media_root)
        return ReleaseRequest.objects.get(pk=shared_ready["request"].pk)

    return shared_ready, steward, ready_request


def media_copy(made: dict, media_root: Path) -> Path:
    """A copy of the module's files in ``media_root`` (the test's own media folder), for tests
    that read them, change them or remove them; ``media_root``."""
    shutil.copytree(made["media"], media_root, dirs_exist_ok=True)
    return media_root


def _steward() -> User:
    """``tests/conftest.py``'s ``steward``: with an e-mail address."""
    steward = _user("steward", roles.STEWARDS)
    steward.email = "steward@example.org"
    steward.save(update_fields=["email"])
    return steward


@contextlib.contextmanager
def _made_once(django_db_blocker, make: Callable[[], dict]) -> Iterator[dict]:
    """``make()`` run outside the tests' transactions, its files in a folder of its own: its
    dict and ``media``, the folder. The patches below hold only while it runs, so the module's
    tests see the outbox as every other test does. At the end every request, dataset and user
    made since is removed, and the folder."""
    media = Path(tempfile.mkdtemp(prefix="anonymizer-world-"))
    with django_db_blocker.unblock():
        users_before = set(User.objects.values_list("pk", flat=True))
    try:
        # Outside a test's transaction work would be sent to a broker at once: here it is run
        # in this process instead (``run``), so nothing is sent.
        with (
            django_db_blocker.unblock(),
            override_settings(MEDIA_ROOT=media),
            mock.patch.object(dispatch, "send"),
        ):
            made = make()
        yield made | {"media": media}
    finally:
        with django_db_blocker.unblock():
            _remove_all(User.objects.exclude(pk__in=users_before))
        shutil.rmtree(media, ignore_errors=True)


def _remove_all(users) -> None:
    """Every request and dataset with what hangs on them, and ``users``."""
    AuditEvent.objects.all().delete()
    OutboxMessage.objects.all().delete()
    TermsAcceptance.objects.all().delete()
    Reproduction.objects.all().delete()
    Review.objects.all().delete()
    ReleaseRequest.objects.all().delete()
    Dataset.objects.all().delete()
    users.delete()
