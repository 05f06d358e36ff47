"""The released rows' order is recorded per round (seed and scheme): a round written with
numpy's permutation (every round run before the keyed order) still reproduces byte for byte,
and new rounds take the keyed order, which depends on each row's input position alone."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from releases.core import storage
from releases.models import ReleaseRequest, Reproduction, Role, ShuffleScheme
from releases.requests import reproduction
from releases.requests import services as release
from releases.requests.parameters import ReleaseParameters
from releases.review import services as review
from tests.support import factories
from tests.support.workflow import run, tag
from tests.test_package import visits_csv

pytestmark = pytest.mark.django_db

ROLES = {
    "batch": Role.INSENSITIVE,
    "name": Role.INSENSITIVE,  # "Person <input row>": tells each released row's input row
    "age": Role.QUASI_IDENTIFIER,
    "zip": Role.QUASI_IDENTIFIER,
    "sex": Role.QUASI_IDENTIFIER,
    "diagnosis": Role.SENSITIVE,
    "note": Role.WITHHELD,
}


JUSTIFIED = {"name": "Test rows: the name tells each row's input position."}


def request_release(steward, dataset, k: int = 5, suppression_limit: float = 0.05):
    return release.request_release(
        steward,
        dataset,
        ReleaseParameters(k=k, suppression_limit=suppression_limit),
        justifications=JUSTIFIED,
    )


@pytest.fixture
def visits(steward):
    dataset = factories.make_dataset(steward, visits_csv(), "visits.csv")
    tag(steward, dataset, ROLES)
    return dataset


def _input_rows(release_request: ReleaseRequest) -> np.ndarray:
    """Each row of the written CSV's input row, in the file's order."""
    raw = storage.read_bytes(release_request.extract_path)
    names = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)["name"]
    return names.str.removeprefix("Person ").astype(int).to_numpy()


def test_new_rounds_take_the_keyed_order_and_resubmitted_rounds_too(steward, officer, visits):
    queued = request_release(steward, visits)
    assert queued.shuffle_scheme == ShuffleScheme.KEYED
    ReleaseRequest.objects.filter(pk=queued.pk).update(shuffle_scheme=ShuffleScheme.PERMUTATION)
    ready = run(queued)
    review.review(officer, ready.pk, "changes", "Smaller classes, please.")
    release.resubmit(
        steward,
        ready.pk,
        ReleaseParameters(k=3, suppression_limit=0.05),
        "Smaller classes.",
        justifications=JUSTIFIED,
    )
    ready.refresh_from_db()
    assert ready.shuffle_scheme == ShuffleScheme.KEYED
    archived = ready.rounds.get(number=1).parameters
    assert archived["shuffle_scheme"] == ShuffleScheme.PERMUTATION
    assert archived["shuffle_seed"] is not None


def test_a_round_written_with_numpys_permutation_reproduces_byte_for_byte(steward, officer, visits):
    queued = request_release(steward, visits)
    # As migration 0029 leaves every round run before it.
    ReleaseRequest.objects.filter(pk=queued.pk).update(shuffle_scheme=ShuffleScheme.PERMUTATION)
    ready = run(queued)
    assert ready.state == ReleaseRequest.State.READY, ready.error
    written = _input_rows(ready)
    # Independently: the kept rows in input order, permuted by numpy from the seed.
    kept = np.sort(written)
    expected = kept[np.random.default_rng(ready.shuffle_seed).permutation(len(kept))]
    assert written.tolist() == expected.tolist()

    done = reproduction.reproduce(reproduction.request_reproduction(officer, ready.pk).pk)
    assert done.state == Reproduction.State.IDENTICAL
    assert {fmt: o["got"] for fmt, o in done.outcome.items()} == {
        f.format: f.sha256 for f in ready.files.all()
    }
    # The recorded scheme is what the re-run uses: the keyed order writes other bytes.
    ReleaseRequest.objects.filter(pk=ready.pk).update(shuffle_scheme=ShuffleScheme.KEYED)
    other = reproduction.reproduce(reproduction.request_reproduction(officer, ready.pk).pk)
    assert other.state == Reproduction.State.DIFFERENT


def test_the_keyed_order_places_each_row_by_its_input_row_and_the_seed(steward, officer, visits):
    strict = run(request_release(steward, visits, k=5, suppression_limit=0.05))
    loose = request_release(steward, visits, k=2, suppression_limit=0.0)
    ReleaseRequest.objects.filter(pk=loose.pk).update(shuffle_seed=strict.shuffle_seed)
    loose = run(loose)
    first, second = _input_rows(strict), _input_rows(loose)
    assert sorted(first.tolist()) != list(range(len(first)))  # a shuffled file
    assert first.tolist() != sorted(first.tolist())
    # Rows both releases hold come in the same order, whichever other rows each suppressed.
    common = set(first.tolist()) & set(second.tolist())
    assert len(common) > 300
    assert [r for r in first if r in common] == [r for r in second if r in common]
    # Another seed, another order; the recorded one reproduces.
    done = reproduction.reproduce(reproduction.request_reproduction(officer, strict.pk).pk)
    assert done.state == Reproduction.State.IDENTICAL
    ReleaseRequest.objects.filter(pk=strict.pk).update(shuffle_seed=strict.shuffle_seed + 1)
    other = reproduction.reproduce(reproduction.request_reproduction(officer, strict.pk).pk)
    assert other.state == Reproduction.State.DIFFERENT


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_rounds_run_before_numpys_permutation():
    executor = MigrationExecutor(connection)
    before = [("releases", "0028_project_webhooks_allowed")]
    after = [("releases", "0029_release_shuffle_scheme")]
    latest = executor.loader.graph.leaf_nodes("releases")
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    owner = old.get_model("auth", "User").objects.create(username="st")
    project = old.get_model("releases", "Project").objects.get_or_create(
        slug="default", defaults={"name": "Default"}
    )[0]
    dataset = old.get_model("releases", "Dataset").objects.create(
        owner=owner, project=project, name="old", original_filename="o.csv", sha256="", size_bytes=1
    )
    old_request = old.get_model("releases", "ReleaseRequest").objects.create(
        dataset=dataset, requested_by=owner, config={}, shuffle_seed=5
    )
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new = executor.loader.project_state(after).apps
    migrated = new.get_model("releases", "ReleaseRequest")
    assert migrated.objects.get(pk=old_request.pk).shuffle_scheme == ShuffleScheme.PERMUTATION
    fresh = migrated.objects.create(dataset_id=dataset.pk, requested_by_id=owner.pk, config={})
    assert fresh.shuffle_scheme == ShuffleScheme.KEYED
    executor = MigrationExecutor(connection)
    executor.migrate(latest)
