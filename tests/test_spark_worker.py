"""The worker's release run on a real standalone Spark cluster (``SPARK_MASTER`` set): the same
summary, equivalence classes, membership and package bytes as the same round run in the
worker's process, batch by batch; an unreachable master fails the run in one sentence, with
nothing kept."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse

from releases.core import storage
from releases.datasets import services as datasets
from releases.engine.cross_release import NOT_IN
from releases.models import EquivalenceClass, ReleaseFile, ReleaseRequest
from releases.requests import cross_release, package, streamed
from releases.requests import run as release_run
from releases.requests.parameters import ReleaseParameters
from tests.support import factories
from tests.support.processes import free_port
from tests.support.workflow import request_release, run, tag
from tests.test_streamed_run import CLINIC_ROLES, TIMED, clinic_csv

pytestmark = [pytest.mark.django_db, pytest.mark.spark, pytest.mark.timeout(400)]


def in_process(ready: ReleaseRequest) -> tuple[dict, dict, list[str], np.ndarray]:
    """The same round run in the worker's process, batch by batch: (summary, files' SHA-256,
    classes, membership)."""
    params = ReleaseParameters.of(ready)
    prepared = release_run.prepare_streamed(ready, params)
    assert prepared is not None
    with tempfile.TemporaryDirectory() as folder:
        built = release_run.build_streamed(ready, prepared, Path(folder))
        hashes = {fmt: package.sha256_file(f.path) for fmt, f in built.files.items()}
    summary = release_run._summary(built, ready, None, prepared[2])
    config = built.config
    qis = list(config.quasi_identifiers)
    classes = release_run._classes(
        ready,
        built.result,
        params,
        qis,
        config.sensitive,
        counts={s: streamed.value_counts_by_class(built, qis, s) for s in config.sensitive},
    )
    summary = json.loads(json.dumps(summary, cls=DjangoJSONEncoder))
    return summary, hashes, class_rows(classes), built.observed.membership


def class_rows(classes) -> list[str]:
    return sorted(
        json.dumps([c.values, c.size, c.sensitive, c.fails, c.borderline], sort_keys=True)
        for c in classes
    )


def test_a_round_on_the_cluster_equals_the_round_in_process(
    spark_cluster, steward, settings, monkeypatch, client
):
    # Small buckets and head: the rows are ordered and written in several parts.
    monkeypatch.setattr(streamed, "CHUNK_ROWS", 400)
    monkeypatch.setattr(streamed, "HEAD_ROWS", 60)
    settings.SPARK_MASTER = spark_cluster.master
    dataset = factories.make_dataset(steward, clinic_csv(), "clinic.csv")
    tag(steward, dataset, CLINIC_ROLES)
    ready = run(request_release(steward, dataset, k=5, suppression_limit=0.05, l=2))
    assert ready.state == ReleaseRequest.State.READY, ready.error
    assert ready.summary["ran_on"].startswith(f"Apache Spark ({spark_cluster.master})")
    assert f"Where it ran: Apache Spark ({spark_cluster.master})" in page(client, steward, ready)

    settings.SPARK_MASTER = ""
    summary, hashes, classes, membership = in_process(ready)
    stored = {k: v for k, v in ready.summary.items() if k not in TIMED}
    assert stored.pop("ran_on")
    assert stored.pop("cross_release") == []
    stored.pop("cross_release_assumption")
    expected = {k: v for k, v in summary.items() if k not in TIMED}
    assert stored.keys() == expected.keys()
    for key, value in expected.items():
        assert stored[key] == value, key
    assert len(ready.summary["sample"]["original"]) > 0
    files = {f.format: f.sha256 for f in ready.files.all()}
    assert files == hashes
    assert set(files) >= {"csv", "parquet"}
    assert class_rows(EquivalenceClass.objects.filter(request=ready)) == classes
    stored_membership = cross_release.stored_membership(ready)
    assert stored_membership is not None
    assert np.array_equal(stored_membership, membership)

    # Independently, with pandas: the CSV is 5-anonymous on its quasi-identifiers, 2-diverse
    # in the diagnosis, holds every unsuppressed input row once, and the membership's classes
    # have the CSV's class sizes.
    csv = pd.read_csv(
        io.BytesIO(storage.read_bytes(ready.extract_path)), dtype=str, keep_default_na=False
    )
    groups = csv.groupby(["age", "zip", "sex"])
    assert groups.size().min() >= 5
    assert groups["diagnosis"].nunique().min() >= 2
    source = datasets.load_frame(dataset)
    assert len(csv) == len(source) - ready.summary["suppressed"] > 0
    assert "id" not in csv.columns
    sizes = np.bincount(stored_membership[stored_membership != NOT_IN])
    assert sorted(sizes[sizes > 0].tolist()) == sorted(groups.size().tolist())
    assert int((stored_membership == NOT_IN).sum()) == ready.summary["suppressed"]


def page(client, user, release_request: ReleaseRequest) -> str:
    client.force_login(user)
    response = client.get(reverse("releases:request_detail", args=[release_request.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_round_that_needs_the_rows_stays_in_process_and_says_so(steward, settings, client):
    # No cluster answers there: a round that does not go to Spark never asks it.
    settings.SPARK_MASTER = f"spark://127.0.0.1:{free_port()}"
    dataset = factories.make_dataset(steward, clinic_csv(300), "clinic.csv")
    tag(steward, dataset, CLINIC_ROLES)
    ready = run(
        request_release(steward, dataset, k=5, suppression_limit=0.05, algorithm="mondrian")
    )
    assert ready.state == ReleaseRequest.State.READY, ready.error
    assert ready.summary["ran_on"].startswith("the worker's process")
    assert "Where it ran: the worker&#x27;s process" in page(client, steward, ready)


def test_an_unreachable_master_fails_the_run_in_one_sentence(steward, settings, client):
    settings.SPARK_MASTER = f"spark://127.0.0.1:{free_port()}"
    settings.SPARK_CONNECT_SECONDS = 2
    dataset = factories.make_dataset(steward, clinic_csv(300), "clinic.csv")
    tag(steward, dataset, CLINIC_ROLES)
    failed = run(request_release(steward, dataset, k=5, suppression_limit=0.05))
    assert failed.state == ReleaseRequest.State.FAILED
    assert failed.error.startswith(f"The Spark master at {settings.SPARK_MASTER} cannot be reached")
    assert "\n" not in failed.error and "Traceback" not in failed.error
    assert not ReleaseFile.objects.filter(request=failed).exists()
    assert not EquivalenceClass.objects.filter(request=failed).exists()
    assert storage.list_files(release_run.extract_folder(failed)) == []
    assert "cannot be reached" in page(client, steward, failed)
