"""The extract run released batch by batch (``requests.streamed``) writes the files and stores
the figures the run with the rows in memory gives: the same CSV and Excel bytes, summary,
equivalence classes and membership, whatever the batch size; the rows go in the keyed order."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from django.core.serializers.json import DjangoJSONEncoder

from releases.core import storage
from releases.datasets import services as datasets
from releases.engine.attribute_risk import attribute_risks
from releases.engine.cross_release import NOT_IN
from releases.models import EquivalenceClass, ReleaseRequest, Role
from releases.requests import cross_release, package, streamed
from releases.requests import run as release_run
from releases.requests.parameters import ReleaseParameters
from tests.conftest import ADULT, hierarchy_upload
from tests.support import factories
from tests.support.workflow import request_release, run, tag

pytestmark = pytest.mark.django_db

#: Summary entries that differ between two runs whatever they do.
TIMED = {"seconds", cross_release.MEMBERSHIP}


DIAGNOSES = ["flu", "asthma", "=HYPERLINK(1)", "-gout", '"a, b"']


def clinic_csv(rows: int = 1500) -> str:
    rng = random.Random(3)
    lines = ["id,age,zip,sex,diagnosis,weight"]
    for i in range(rows):
        age = "" if i % 97 == 0 else str(rng.randint(18, 90))  # some cells missing
        lines.append(
            f"{i},{age},{rng.choice(['02139', '02141', '02142', '02143'])},{rng.choice('FM')},"
            f"{rng.choice(DIAGNOSES)},"
            f"{rng.randint(40, 120)}"
        )
    return "\n".join(lines) + "\n"


CLINIC_ROLES = {
    "id": Role.IDENTIFIER,
    "age": Role.QUASI_IDENTIFIER,
    "zip": Role.QUASI_IDENTIFIER,
    "sex": Role.QUASI_IDENTIFIER,
    "diagnosis": Role.SENSITIVE,
    "weight": Role.INSENSITIVE,
}


def _in_memory(ready: ReleaseRequest, tmp_path) -> tuple[dict, dict, list, np.ndarray]:
    """What the run with the rows in memory gives for the round: (summary, files' SHA-256,
    classes, membership)."""
    frame, names = release_run.load_released(ready.dataset, ready.config)
    params = ReleaseParameters.of(ready)
    built = release_run.build_release(
        frame, ready.config, params, ready.shuffle_seed, scheme=ready.shuffle_scheme
    )
    summary = release_run._summary(built, ready, frame, names)
    written = package.write_package(built.data, tmp_path)
    config = built.config
    classes = release_run._classes(
        ready, built.result, params, list(config.quasi_identifiers), config.sensitive
    )
    membership = cross_release.membership_of_result(built.result, config, len(frame))
    hashes = {fmt: f.sha256 for fmt, f in written.items()}
    return json.loads(json.dumps(summary, cls=DjangoJSONEncoder)), hashes, classes, membership


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = pd.DataFrame({"a": a, "b": b}).drop_duplicates()
    return bool(
        ((a == NOT_IN) == (b == NOT_IN)).all() and pairs["a"].is_unique and pairs["b"].is_unique
    )


def _check_same_as_in_memory(ready: ReleaseRequest, tmp_path) -> None:
    assert ready.state == ReleaseRequest.State.READY, ready.error
    summary, hashes, classes, membership = _in_memory(ready, tmp_path)
    stored = {k: v for k, v in ready.summary.items() if k not in TIMED}
    expected = {k: v for k, v in summary.items() if k not in TIMED}
    # The run adds how it was judged with earlier releases (none here).
    assert stored.pop("cross_release") == []
    stored.pop("cross_release_assumption")
    assert stored.keys() == expected.keys()
    for key, value in expected.items():
        assert stored[key] == value, key
    files = {f.format: f.sha256 for f in ready.files.all()}
    assert files["csv"] == hashes["csv"]
    if "xlsx" in hashes:
        assert files["xlsx"] == hashes["xlsx"]
    # The Parquet file holds the CSV's rows, values raw.
    parquet = pq.read_table(
        io.BytesIO(storage.read_bytes(ready.files.get(format="parquet").path))
    ).to_pandas()
    csv = pd.read_csv(
        io.BytesIO(storage.read_bytes(ready.extract_path)), dtype=str, keep_default_na=False
    )
    assert len(parquet) == len(csv) == ready.summary["rows_out"]
    assert list(parquet.columns) == list(csv.columns)

    def rows(classes) -> list[str]:
        return sorted(
            json.dumps([c.values, c.size, c.sensitive, c.fails, c.borderline], sort_keys=True)
            for c in classes
        )

    assert rows(EquivalenceClass.objects.filter(request=ready)) == rows(classes)
    stored_membership = cross_release.stored_membership(ready)
    assert stored_membership is not None
    assert _same_partition(stored_membership, membership)


@pytest.mark.parametrize("chunk_rows", [97, 1_000_000])
def test_k_anonymity_released_batch_by_batch_equals_the_run_in_memory(
    steward, tmp_path, monkeypatch, chunk_rows
):
    monkeypatch.setattr(streamed, "CHUNK_ROWS", chunk_rows)
    dataset = factories.make_dataset(steward, clinic_csv(), "clinic.csv")
    tag(steward, dataset, CLINIC_ROLES)
    ready = run(request_release(steward, dataset, k=5, suppression_limit=0.05))
    # Released batch by batch (the in-memory run is what it is compared with).
    assert release_run.prepare_streamed(ready, ReleaseParameters.of(ready)) is not None
    _check_same_as_in_memory(ready, tmp_path)
    # Independently: the file is 5-anonymous on its quasi-identifiers, and holds every
    # unsuppressed input row once.
    csv = pd.read_csv(
        io.BytesIO(storage.read_bytes(ready.extract_path)), dtype=str, keep_default_na=False
    )
    assert csv.groupby(["age", "zip", "sex"]).size().min() >= 5
    source = datasets.load_frame(dataset)
    assert len(csv) == len(source) - ready.summary["suppressed"]
    assert sorted(csv["weight"]) != csv["weight"].tolist()


def test_l_diversity_with_adult_hierarchies_equals_the_run_in_memory(
    steward, tmp_path, monkeypatch
):
    monkeypatch.setattr(streamed, "CHUNK_ROWS", 4099)
    dataset = factories.make_dataset(steward, (ADULT / "adult.csv").read_bytes(), "adult.csv")
    qis = ["age", "education", "marital-status", "race", "sex"]
    tag(
        steward,
        dataset,
        {
            **{name: Role.QUASI_IDENTIFIER for name in qis},
            "occupation": Role.SENSITIVE,
            "salary-class": Role.INSENSITIVE,
        },
    )
    for column in dataset.columns.filter(name__in=["age", "education", "marital-status", "race"]):
        datasets.set_hierarchy_file(steward, dataset, column.pk, hierarchy_upload(column.name))
    ready = run(request_release(steward, dataset, k=5, suppression_limit=0.02, l=2))
    _check_same_as_in_memory(ready, tmp_path)


def test_a_configuration_that_needs_the_rows_runs_in_memory(steward, tmp_path):
    dataset = factories.make_dataset(steward, clinic_csv(300), "clinic.csv")
    tag(steward, dataset, CLINIC_ROLES)
    queued = request_release(steward, dataset, k=5, suppression_limit=0.05, algorithm="mondrian")
    params = ReleaseParameters.of(queued)
    assert release_run.prepare_streamed(queued, params) is None
    ready = run(queued)
    assert ready.state == ReleaseRequest.State.READY, ready.error
    summary, hashes, _, _ = _in_memory(ready, tmp_path)
    assert {f.format: f.sha256 for f in ready.files.all()} == hashes


def test_extract_membership_of_the_streamed_run_matches_a_group_by(steward):
    dataset = factories.make_dataset(steward, clinic_csv(400), "clinic.csv")
    tag(steward, dataset, CLINIC_ROLES)
    ready = run(request_release(steward, dataset, k=3, suppression_limit=0.1))
    membership = cross_release.stored_membership(ready)
    frame = datasets.load_frame(dataset)
    extract = pd.read_csv(
        io.BytesIO(storage.read_bytes(ready.extract_path)), dtype=str, keep_default_na=False
    )
    # Each class holds as many input rows as the extract holds rows with its values.
    sizes = np.bincount(membership[membership != NOT_IN])
    assert sorted(sizes.tolist()) == sorted(extract.groupby(["age", "zip", "sex"]).size())
    assert int((membership == NOT_IN).sum()) == len(frame) - len(extract)


def test_attribute_risks_of_a_frequency_table_equal_those_of_its_rows():
    rng = np.random.default_rng(9)
    frame = pd.DataFrame(
        {
            "age": rng.choice([str(a) for a in range(20, 60)], 3000),
            "zip": rng.choice(["02139", "02141", "02142"], 3000),
            "sex": rng.choice(["F", "M", ""], 3000),
        }
    )
    columns = ["age", "zip", "sex"]
    table = frame.groupby(columns, sort=False).size().rename("rows").reset_index()
    assert len(table) < len(frame)
    weighted = attribute_risks(table, columns, rows=table["rows"].to_numpy())
    assert weighted == attribute_risks(frame, columns)
    # Independently: unique rows on (age, zip) by a group-by of the rows.
    pair = next(r for r in weighted if r.columns == ("age", "zip"))
    assert pair.unique_rows == int((frame.groupby(["age", "zip"]).size() == 1).sum())
