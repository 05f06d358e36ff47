"""Shared fixtures: users in each role, the Adult test data, and real Redis / Celery processes.

Two tiers (tests/support/tiers.py): ``pytest --fast`` runs every test without a full-tier marker
and fails any of them that starts a process; plain ``pytest`` runs everything.
"""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

# Imported here, before any test: its import runs ``lscpu`` (NumPy's SVE check), a process the
# fast tier's guard would otherwise blame on whichever test first imports it (scipy does).
import numpy.testing  # noqa: F401
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.utils import setup_databases, teardown_databases

# pytest-django's own switch for --nomigrations (its fixture is replaced below).
from pytest_django.fixtures import _disable_migrations as disable_migrations

from releases.core import roles
from releases.models import Role
from tests.support import factories, members, processes, slow, testdb, tiers, workflow

ADULT = Path(__file__).parent / "data" / "adult"
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

Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
# Production's PBKDF2 takes about a second per password on a busy machine, and the fixtures make
# thousands of users: tests hash with MD5 (no test is about the hash; processes the tests start
# keep production's hasher).
settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier: only tests without a full-tier marker (tests/support/tiers.py); "
        "one that starts a process fails",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Before ``-m`` selects: the long tests of tests/support/slow.py carry ``slow``.
    for item in items:
        module, _, name = item.nodeid.partition("::")
        if slow.reason(module, name):
            item.add_marker(pytest.mark.slow)
    # Every test collected, before the tiers select (tests/test_tiers.py checks the list).
    config.stash[slow.COLLECTED] = [item.nodeid for item in items]
    unmarked = [
        f"{item.nodeid}: {', '.join(missing)}"
        for item in items
        if (missing := tiers.missing_markers(item))
    ]
    if unmarked:
        raise pytest.UsageError("Tests without the marker of a fixture:\n" + "\n".join(unmarked))
    if not config.getoption("fast"):
        return
    left_out = [item for item in items if tiers.in_full_tier(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not tiers.in_full_tier(item)]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """In the fast tier a test that starts a process fails, naming the marker it needs. The
    whole protocol is guarded: module- and session-scoped fixtures start in a test's setup."""
    if not item.config.getoption("fast"):
        return (yield)
    with tiers.processes_forbidden(item.nodeid):
        return (yield)


@pytest.fixture(scope="session")
def django_db_setup(request, django_db_blocker):
    """pytest-django's test database, migrated once for every process (tests/support/testdb.py):
    a process copies the kept migrated file when there is one, and ``migrate`` finds nothing
    to apply; otherwise it migrates as usual and keeps a copy for the others."""
    # The xdist worker's suffix on the test database's name (pytest-django's fixture), before
    # anything reads the name; pytest-django's test environment is an autouse fixture.
    request.getfixturevalue("django_db_modify_db_settings")
    verbosity = request.config.option.verbose
    if not testdb.usable(request.config):
        # pytest-django's own setup, for --reuse-db, --nomigrations or another database.
        keepdb = bool(request.config.getvalue("reuse_db")) and not request.config.getvalue(
            "create_db"
        )
        if request.config.getvalue("nomigrations"):
            disable_migrations()
        with django_db_blocker.unblock():
            databases = setup_databases(verbosity, interactive=False, keepdb=keepdb)
        yield
        if not keepdb:
            with django_db_blocker.unblock():
                teardown_databases(databases, verbosity=verbosity)
        return
    with django_db_blocker.unblock():
        template = testdb.template_path()
        with testdb.locked(template):
            test_database = Path(settings.DATABASES["default"]["TEST"]["NAME"])
            copied = testdb.place_copy(template, test_database)
            databases = setup_databases(
                verbosity, interactive=False, keepdb=copied, serialized_aliases=set()
            )
            if not copied:
                testdb.keep_copy(template)
    yield
    with django_db_blocker.unblock():
        teardown_databases(databases, verbosity=verbosity)


@pytest.fixture(autouse=True)
def private_media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def make_user(username: str, *groups: str) -> User:
    """A user holding these roles (old group names or roles) in the default project."""
    user = User.objects.create_user(username=username, password="pw-" + username)
    members.grant(user, *groups)
    return user


@pytest.fixture
def steward(db):
    """A data steward, with an e-mail address for the decisions on their requests."""
    user = make_user("steward", roles.STEWARDS)
    user.email = "steward@example.org"
    user.save(update_fields=["email"])
    return user


@pytest.fixture
def other_steward(db):
    return make_user("steward2", roles.STEWARDS)


@pytest.fixture
def officer(db):
    return make_user("officer", roles.OFFICERS)


@pytest.fixture
def second_officer(db):
    """Another privacy officer, for the second of two required approvals."""
    return make_user("officer2", roles.OFFICERS)


@pytest.fixture
def steward_officer(db):
    """One person holding two roles: may review, but never their own request."""
    return make_user("both", roles.STEWARDS, roles.OFFICERS)


@pytest.fixture
def recipient(db):
    return make_user("recipient", roles.RECIPIENTS)


@pytest.fixture
def other_recipient(db):
    """A recipient no release names unless a test says so."""
    return make_user("recipient2", roles.RECIPIENTS)


def csv_upload(text: str | bytes, name: str = "data.csv") -> SimpleUploadedFile:
    content = text.encode("utf-8") if isinstance(text, str) else text
    return SimpleUploadedFile(name, content, content_type="text/csv")


@pytest.fixture
def adult_upload():
    return csv_upload((ADULT / "adult.csv").read_bytes(), "adult.csv")


@pytest.fixture
def adult_dataset(steward):
    """The Adult data (30,162 rows) uploaded and profiled by ``steward``; no column has a role."""
    return factories.make_dataset(steward, (ADULT / "adult.csv").read_bytes(), "adult.csv")


#: The roles of the ready request's columns (``zip`` is withheld).
READY_ROLES = {
    "name": Role.IDENTIFIER,
    "age": Role.QUASI_IDENTIFIER,
    "sex": Role.QUASI_IDENTIFIER,
    "diagnosis": Role.SENSITIVE,
}


@pytest.fixture
def ready_request(steward):
    """A release request whose run finished and waits for review: ``steward``'s 300 people
    (``synthetic_csv``) with ``READY_ROLES``, k=5 with 5 % suppression."""
    return workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)


def hierarchy_upload(attribute: str) -> SimpleUploadedFile:
    path = ADULT / f"adult_hierarchy_{attribute}.csv"
    return SimpleUploadedFile(path.name, path.read_bytes(), content_type="text/csv")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    with processes.redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL cluster for the test process (the URL of its first database);
    ``postgres_database`` gives each module a database of its own in it."""
    from tests.support.postgres import postgres_cluster

    with postgres_cluster() as url:
        yield url


_DATABASES = itertools.count()


@pytest.fixture(scope="module")
def postgres_database(request, postgres_server):
    """An empty database of the module's own in the session's PostgreSQL cluster; its URL."""
    from tests.support.postgres import create_database

    # A module's tests may come to this process in more than one run (xdist hands them out), so
    # each setup gets a database of its own.
    name = "test_" + request.module.__name__.rsplit(".", 1)[-1] + f"_{next(_DATABASES)}"
    return create_database(postgres_server, name)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A standalone Spark cluster on 127.0.0.1: a master and two workers, each a process."""
    from tests.support.spark import standalone_cluster  # imports pyspark: only when asked for

    with standalone_cluster(tmp_path_factory.mktemp("spark")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """The app on real processes (Redis, Celery worker, web server) with the demo accounts."""
    with processes.app_stack(tmp_path_factory.mktemp("stack")) as stack:
        yield stack


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium, headless, driven by Playwright."""
    from tests.support.browser import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is not installed (make test installs it).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def start_worker(redis_url, tmp_path, private_media_root):
    """Starts real Celery worker processes sharing the test database file, fed through real
    Redis: ``with start_worker() as process: ...``."""
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.sqlite3":
        pytest.skip("the worker fixture shares the SQLite test database file")
    env = processes.app_environment(
        database_url=f"sqlite:///{database['NAME']}",
        redis_url=redis_url,
        media_root=private_media_root,
        var_dir=tmp_path,
    )

    @contextlib.contextmanager
    def start(**settings: str):
        """``settings``: more environment variables for the worker (``SITE_URL="..."``)."""
        with (
            processes.producer_for(redis_url),
            processes.celery_worker({**env, **settings}, tmp_path) as process,
        ):
            yield process

    return start


@pytest.fixture
def worker(start_worker):
    """A real Celery worker process for the length of a test."""
    with start_worker() as process:
        yield process
