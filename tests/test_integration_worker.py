"""A release request through a real Redis broker to a real Celery worker process."""

from __future__ import annotations

import pytest
from django.conf import settings

from anonymizer_site.celery import app as celery_app
from releases.models import ReleaseRequest, Role
from releases.services import datasets, release
from tests.conftest import csv_upload
from tests.support import processes
from tests.test_services import synthetic_csv, tag

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(redis_url, tmp_path, private_media_root):
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.sqlite3":
        pytest.skip("the worker fixture shares the SQLite test database file")
    env = processes.app_environment(
        database_url=f"sqlite:///{database['NAME']}",
        redis_url=redis_url,
        media_root=private_media_root,
        var_dir=tmp_path,
    )
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = redis_url
    try:
        with processes.celery_worker(env, tmp_path) as process:
            yield process
    finally:
        celery_app.conf.broker_url = previous
        celery_app.pool.force_close_all()


def test_request_goes_through_the_broker_to_ready_for_review(steward, worker):
    dataset = datasets.create_dataset(steward, csv_upload(synthetic_csv(), "people.csv"))
    tag(steward, dataset, {"name": Role.IDENTIFIER, "age": Role.QUASI_IDENTIFIER,
                           "zip": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    release_request = release.request_release(steward, dataset, k=5, suppression_limit=0.05)

    def finished():
        release_request.refresh_from_db()
        return release_request.is_final

    processes.wait_until(finished, 60, "the worker to finish the request")
    assert release_request.state == ReleaseRequest.State.READY, release_request.error
    assert release_request.summary["achieved"]["k"] >= 5
    assert release_request.started_at is not None and release_request.finished_at is not None
    assert release_request.classes.exists()
