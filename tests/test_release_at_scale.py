"""The run's memory-bounded paths give the same release: columns with a value per row read as
Arrow strings, sensitive counts per class from combined codes, Excel only up to a size, and the
dataset's risk panel measured by a worker for large files."""

from __future__ import annotations

import io
import random
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse

from releases.background import recovery
from releases.core import storage
from releases.datasets import column_store
from releases.datasets import risk as datasets
from releases.models import OutboxMessage, Role
from releases.requests import package
from releases.requests import run as release_run
from releases.requests import services as release
from releases.requests.parameters import ReleaseParameters
from tests.support import factories
from tests.support.workflow import run, tag

pytestmark = pytest.mark.django_db


def _notes_csv(rows: int = 300) -> str:
    rng = random.Random(11)
    lines = ["ref,age,sex,diagnosis,note"]
    for i in range(rows):
        note = rng.choice(["=SUM(A1)", '"quoted", text', "-3", "@home", "plain"])
        cell = '"' + f"{note} #{i}".replace('"', '""') + '"'
        disease = rng.choice(["flu", "asthma"])
        lines.append(f"R{i:05d},{rng.randint(20, 70)},{rng.choice('FM')},{disease},{cell}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def notes(steward):
    dataset = factories.make_dataset(steward, _notes_csv(), "notes.csv")
    tag(
        steward,
        dataset,
        {
            "ref": Role.IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "diagnosis": Role.SENSITIVE,
            "note": Role.INSENSITIVE,
        },
    )
    return dataset


def _package(dataset, snapshot, tmp_path, name):
    frame, _ = release_run.load_released(dataset, snapshot)
    built = release_run.build_release(
        frame, snapshot, ReleaseParameters(k=3, suppression_limit=0.1), 7
    )
    folder = tmp_path / name
    folder.mkdir()
    written = package.write_package(built.data, folder)
    return frame, {fmt: (f.sha256, f.path.read_bytes()) for fmt, f in written.items()}


def test_a_column_with_a_value_per_row_read_as_arrow_strings_writes_the_same_files(notes, tmp_path):
    snapshot = release.tagging_snapshot(notes)
    frame, as_categories = _package(notes, snapshot, tmp_path, "categories")
    assert isinstance(frame["note"].dtype, pd.CategoricalDtype)
    assert "ref" not in frame  # identifiers never reach the worker's memory
    with mock.patch.object(column_store, "CATEGORICAL_MAX_VALUES", 100):
        frame, as_arrow = _package(notes, snapshot, tmp_path, "arrow")
    assert isinstance(frame["note"].dtype, pd.ArrowDtype)
    assert isinstance(frame["age"].dtype, pd.CategoricalDtype)  # few values: still codes
    assert {fmt: sha for fmt, (sha, _) in as_arrow.items()} == {
        fmt: sha for fmt, (sha, _) in as_categories.items()
    }
    csv = pd.read_csv(io.BytesIO(as_arrow["csv"][1]), dtype=str, keep_default_na=False)
    assert csv["note"].str.startswith("'=SUM(A1)").any()
    assert not csv["note"].str.startswith("=").any()
    assert (csv["note"].str.startswith("-3 #")).sum() == 0  # "-3 #1" is no number: neutralised
    assert csv["note"].str.contains('"quoted", text', regex=False).any()


def test_sensitive_values_per_class_counted_from_codes_match_a_group_by():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {
            "age": pd.Categorical(
                rng.choice(["20-29", "30-39"], 500), categories=["20-29", "30-39", "unused"]
            ),
            "zip": rng.choice(["021*", "022*", "023*"], 500),
            "diagnosis": pd.Categorical(rng.choice(["flu", "asthma", "gout"], 500)),
        }
    )
    counted = release_run.value_counts_by_class(frame, ["age", "zip"], "diagnosis")
    grouped = frame.groupby(["age", "zip", "diagnosis"], observed=True).size()
    expected: dict = {}
    for (age, zip_code, value), count in grouped.items():
        expected.setdefault((age, zip_code), {})[value] = int(count)
    assert counted == expected
    assert not any("unused" in key for key in counted)


def test_excel_is_offered_up_to_xlsx_max_cells_and_the_page_says_why(
    notes, steward, officer, client, settings
):
    settings.XLSX_MAX_CELLS = 100
    ready = run(
        release.request_release(
            steward,
            notes,
            ReleaseParameters(k=3, suppression_limit=0.1),
            justifications={"note": "Free text the recipient needs; reviewed for names."},
        )
    )
    assert sorted(ready.files.values_list("format", flat=True)) == ["csv", "parquet"]
    # The review's "every class passes" check reads the run's count of the stored classes.
    assert ready.summary["failing_classes"] == ready.classes.exclude(fails=[]).count()
    assert "XLSX_MAX_CELLS" in ready.summary["xlsx_refusal"]
    client.force_login(officer)
    page = client.get(reverse("releases:request_detail", args=[ready.pk])).content.decode()
    assert "Excel is not offered" in page and "XLSX_MAX_CELLS" in page


def test_the_risk_panel_of_a_large_dataset_is_measured_by_a_worker(notes, steward, client):
    client.force_login(steward)
    url = reverse("releases:dataset_risk", args=[notes.pk])
    small = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="unique-rows"' in small  # measured in the request
    with mock.patch.object(datasets, "INLINE_RISK_ROWS", 10):
        pending = client.get(url, HTTP_HX_REQUEST="true").content.decode()
        assert 'id="risk-pending"' in pending and 'hx-trigger="load delay:2s"' in pending
        recovery.sweep()  # the sweeper asks a worker (the panel only reads)
        assert OutboxMessage.objects.filter(task_name="releases.dataset_risk").count() == 1
        client.get(url, HTTP_HX_REQUEST="true")  # asked once, not once per poll
        assert OutboxMessage.objects.filter(task_name="releases.dataset_risk").count() == 1
        datasets.store_risk(notes.pk)  # the task's body
        done = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="unique-rows"' in done and "risk-pending" not in done
    figures = (notes.__class__.objects.get(pk=notes.pk)).risk
    assert figures["quasi_identifiers"] == ["age", "sex"] and figures["rows"] == 300
    assert done.count('id="unique-rows"') == 1
    assert f">{figures['unique_rows']}<" in done


def test_a_role_change_on_a_large_dataset_asks_a_worker_once_and_the_panel_only_reads(
    notes, steward, client
):
    client.force_login(steward)
    age = notes.columns.get(name="age")
    url = reverse("releases:dataset_risk", args=[notes.pk])
    asked = OutboxMessage.objects.filter(task_name="releases.dataset_risk")
    with mock.patch.object(datasets, "INLINE_RISK_ROWS", 10):
        client.post(
            reverse("releases:column_update", args=[notes.pk, age.pk]),
            {f"role-{age.pk}": Role.INSENSITIVE},
            HTTP_HX_REQUEST="true",
        )
        assert asked.count() == 1 and asked.get().args == [notes.pk]
        for _ in range(2):  # polled: read, never asked again
            page = client.get(url, HTTP_HX_REQUEST="true").content.decode()
            assert 'id="risk-pending"' in page
        recovery.sweep()  # asked moments ago: not again
        assert asked.count() == 1
        datasets.store_risk(notes.pk)
        done = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="unique-rows"' in done
    assert notes.__class__.objects.get(pk=notes.pk).risk["quasi_identifiers"] == ["sex"]


def test_the_package_moves_into_local_storage_and_uploads_to_object_storage(notes, tmp_path):
    """Local storage takes the written files by a move (no copy of a gigabyte); the stored
    bytes are those hashed while writing."""
    written = tmp_path / "extract.csv"
    written.write_bytes(b"a,b\n1,2\n")
    name = storage.save_file("extracts", ".csv", written, move=True)
    assert not written.exists()
    assert storage.read_bytes(name) == b"a,b\n1,2\n"
    kept = tmp_path / "kept.csv"
    kept.write_bytes(b"x\n")
    storage.save_file("extracts", ".csv", kept)
    assert kept.exists()
