"""Shared fixtures: users in each role, the Adult test data, and real Redis / Celery processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile

from releases.services import roles
from tests.support import processes

ADULT = Path(__file__).parent / "data" / "adult"
ADULT_QUASI_IDENTIFIERS = [
    "age", "education", "marital-status", "native-country", "occupation", "race",
    "salary-class", "sex",
]

Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)


@pytest.fixture(autouse=True)
def private_media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def make_user(username: str, *groups: str) -> User:
    user = User.objects.create_user(username=username, password="pw-" + username)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture
def steward(db):
    return make_user("steward", roles.STEWARDS)


@pytest.fixture
def other_steward(db):
    return make_user("steward2", roles.STEWARDS)


@pytest.fixture
def officer(db):
    return make_user("officer", roles.OFFICERS)


@pytest.fixture
def steward_officer(db):
    """One person holding two roles: may review, but never their own request."""
    return make_user("both", roles.STEWARDS, roles.OFFICERS)


@pytest.fixture
def recipient(db):
    return make_user("recipient", roles.RECIPIENTS)


def csv_upload(text: str | bytes, name: str = "data.csv") -> SimpleUploadedFile:
    content = text.encode("utf-8") if isinstance(text, str) else text
    return SimpleUploadedFile(name, content, content_type="text/csv")


@pytest.fixture
def adult_upload():
    return csv_upload((ADULT / "adult.csv").read_bytes(), "adult.csv")


def hierarchy_upload(attribute: str) -> SimpleUploadedFile:
    path = ADULT / f"adult_hierarchy_{attribute}.csv"
    return SimpleUploadedFile(path.name, path.read_bytes(), content_type="text/csv")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    with processes.redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url
