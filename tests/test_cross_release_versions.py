"""The cross-release check across versions: two versions of Adult sharing a key column (the
second a different, overlapping set of people in another order) are each released k-anonymous;
the second's run judges it with the first's release, linking rows by the key, and its joint
classes and rows below k equal a plain pandas merge on the key and group-by. Without a key
column, the versions are not linked, and the check's assumption says so."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from releases.core import storage
from releases.datasets import services as datasets
from releases.datasets import versions
from releases.models import ReleaseFile, ReleaseRequest, Role
from releases.requests.cross_release import MEMBERSHIP
from tests.conftest import ADULT, hierarchy_upload
from tests.support import factories
from tests.support.workflow import approve, download, request_release, run, tag
from tests.test_versions import column, make_version

pytestmark = pytest.mark.django_db

K = 5


def adult_with_key() -> pd.DataFrame:
    frame = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    frame.insert(0, "pid", [f"P{i:05d}" for i in range(len(frame))])
    return frame


def as_csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(sep=";", index=False).encode()


def generalized(frame: pd.DataFrame, levels: dict[str, int]) -> pd.Series:
    """Each row's class in a full-domain release: its quasi-identifiers generalized to
    ``levels`` with ARX's hierarchy files, read here with pandas."""
    parts = []
    for name, level in sorted(levels.items()):
        table = pd.read_csv(
            ADULT / f"adult_hierarchy_{name}.csv", sep=";", header=None, dtype=str
        ).drop_duplicates(0)
        mapping = dict(zip(table[0], table[level], strict=True))
        parts.append(frame[name].map(mapping))
    key = parts[0]
    for part in parts[1:]:
        key = key + "|" + part
    return key


def released_classes(frame: pd.DataFrame, release: ReleaseRequest, extract: bytes) -> pd.Series:
    """Per row of ``frame``, its class in the release (None when suppressed), checked against
    the extract's own rows."""
    levels = {q: int(v) for q, v in release.summary["levels"].items()}
    classes = generalized(frame, levels)
    sizes = classes.map(classes.value_counts())
    kept = classes.where(sizes >= K)
    released = pd.read_csv(io.BytesIO(extract), dtype=str, keep_default_na=False)
    from_file = generalized_from_file(released, sorted(levels))
    assert from_file.value_counts().sort_index().equals(kept.dropna().value_counts().sort_index())
    assert from_file.value_counts().min() >= K  # the extract is k-anonymous
    return kept


def generalized_from_file(released: pd.DataFrame, names: list[str]) -> pd.Series:
    key = released[names[0]]
    for name in names[1:]:
        key = key + "|" + released[name]
    return key


def extract_of(release: ReleaseRequest) -> bytes:
    path = release.files.get(format=ReleaseFile.Format.CSV, round=release.round).path
    with storage.open_file(path) as fh:
        return fh.read()


def attach(steward, dataset, names):
    for name in names:
        datasets.set_hierarchy_file(
            steward, dataset, column(dataset, name).pk, hierarchy_upload(name)
        )


def test_releases_of_two_versions_are_judged_together_through_the_key(steward, officer, recipient):
    whole = adult_with_key()
    first_rows = whole.iloc[:20000]
    # The next month: some people left, others came, and the file is in another order.
    second_rows = whole.iloc[8000:].sample(frac=1.0, random_state=3)

    first = factories.make_dataset(steward, as_csv(first_rows), "adult-m1.csv")
    tag(steward, first, {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    attach(steward, first, ["age", "sex"])
    versions.set_key_column(steward, first, "pid")
    one = approve(officer, run(request_release(steward, first, k=K)), recipient)
    assert one.state == ReleaseRequest.State.APPROVED
    assert "pid" not in one.summary["released_columns"]

    second = make_version(steward, first, as_csv(second_rows))
    assert second.key_column == "pid"
    datasets.set_column_role(steward, second, column(second, "race").pk, Role.QUASI_IDENTIFIER)
    attach(steward, second, ["race"])
    two = run(request_release(steward, second, k=K))
    assert two.state == ReleaseRequest.State.READY, two.error
    assert "pid" not in two.summary["released_columns"]

    entries = {e["request"]: e for e in two.summary["cross_release"]}
    entry = entries[one.pk]
    assert entry["measured"] is True and entry["version"] == 1
    assert "linked by pid" in entry["membership"]
    assert "key column pid" in two.summary["cross_release_assumption"]

    # The same figures by a plain pandas merge on the key and a group-by.
    class_one = released_classes(first_rows, one, download(recipient, one))
    class_two = released_classes(second_rows, two, extract_of(two))
    left = pd.DataFrame({"pid": second_rows["pid"].to_numpy(), "two": class_two.to_numpy()})
    right = pd.DataFrame({"pid": first_rows["pid"].to_numpy(), "one": class_one.to_numpy()})
    joined = left.merge(right, on="pid", how="left")
    joined = joined[joined["two"].notna()].fillna({"one": "not in it"})
    sizes = joined.groupby(["two", "one"]).size()
    assert entry["rows"] == len(joined)
    assert entry["joint_classes"] == len(sizes)
    assert entry["smallest_joint_class"] == int(sizes.min())
    assert entry["rows_below_k"] == int(sizes[sizes < K].sum())
    assert entry["rows_below_k"] > 0  # the race column splits classes of the first release
    assert entry["passed"] is False
    # Row positions would have linked nothing: the versions differ in length and order.
    assert len(first_rows) != len(second_rows)
    stored = two.summary[MEMBERSHIP]
    with storage.open_file(stored) as fh:
        membership = np.load(io.BytesIO(fh.read()))
    assert len(membership) == len(second_rows)


def test_without_a_key_column_other_versions_are_not_linked(steward, officer, recipient):
    frame = adult_with_key().iloc[:3000]
    first = factories.make_dataset(steward, as_csv(frame), "adult-m1.csv")
    tag(steward, first, {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    attach(steward, first, ["age", "sex"])
    one = approve(officer, run(request_release(steward, first, k=K)), recipient)
    second = make_version(steward, first, as_csv(frame.iloc[::-1]))
    two = run(request_release(steward, second, k=K))
    assert two.state == ReleaseRequest.State.READY, two.error
    assert one.pk not in {e["request"] for e in two.summary["cross_release"]}
    assert "not linked" in two.summary["cross_release_assumption"]
