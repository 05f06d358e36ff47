"""Datasets registered in place (``manage.py register_dataset``): a file in an allowed server
folder, an object on moto's S3 server (a process of its own), a table or query in the tests'
PostgreSQL. Each is profiled where it stays and checked against pandas reading the same source
independently; each refusal is a clear error that leaves no dataset behind."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import boto3
import pandas as pd
import psycopg
import pytest
from django.core.management import CommandError, call_command

from releases.core import backup, storage
from releases.datasets import column_store, profiling, sources
from releases.models import AuditEvent, Dataset
from tests.conftest import make_user
from tests.support.api import client_for, token_for
from tests.support.factories import synthetic_csv
from tests.support.processes import free_port, wait_until

BUCKET = "registered-data"


def register(source: str, owner: str = "steward", **options) -> Dataset:
    call_command("register_dataset", source, project="default", owner=owner, **options)
    return Dataset.objects.get()


def profiled(dataset: Dataset) -> Dataset:
    profiling.profile_dataset(dataset.pk)
    dataset.refresh_from_db()
    return dataset


def refused(source: str, owner: str = "steward") -> str:
    """The command's error for ``source``; no dataset (and no audit of one) is left."""
    with pytest.raises(CommandError) as caught:
        register(source, owner)
    assert not Dataset.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.REGISTERED).exists()
    return str(caught.value)


def assert_same_as(dataset: Dataset, expected: pd.DataFrame, column: str) -> None:
    """Row count, header and one column's value counts, as profiled, equal pandas's."""
    assert dataset.status == Dataset.Status.READY, dataset.error
    assert dataset.row_count == len(expected)
    assert [c.name for c in dataset.columns.order_by("position")] == list(expected.columns)
    read = column_store.read(dataset, [column])[column]
    assert read.value_counts().to_dict() == expected[column].value_counts().to_dict()
    profile = dataset.columns.get(name=column)
    assert profile.distinct_values == expected[column].nunique()


# --- A server folder ----------------------------------------------------------------------


@pytest.fixture
def allowed(settings, tmp_path) -> Path:
    folder = tmp_path / "import"
    folder.mkdir()
    settings.DATA_IMPORT_DIRS = [str(folder)]
    return folder


def test_a_folder_file_is_registered_and_profiled_in_place(steward, allowed, client):
    path = allowed / "people.csv"
    path.write_text(synthetic_csv(500))
    dataset = register(str(path), name="People")
    assert dataset.source_kind == Dataset.SourceKind.FOLDER
    assert dataset.source_locator == str(path)
    assert dataset.status == Dataset.Status.PENDING
    event = AuditEvent.objects.get(action=AuditEvent.Action.REGISTERED)
    assert event.dataset_id == dataset.pk and event.detail["locator"] == str(path)
    # Nothing copied into private storage: only the column store is written there.
    assert not storage.exists(dataset.file_path)
    dataset = profiled(dataset)
    expected = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert_same_as(dataset, expected, "zip")
    client.force_login(steward)
    page = client.get(f"/datasets/{dataset.pk}/").content.decode()
    assert str(path) in page and "Server folder" in page
    # A backup's check of stored files does not look for an original in storage.
    assert f"dataset #{dataset.pk}" not in " ".join(r.what for r in backup.recorded_files())
    # Deleting the dataset leaves the source where it is.
    client.post(f"/datasets/{dataset.pk}/delete/")
    assert not Dataset.objects.exists() and path.exists()


def test_a_folder_file_changed_after_registration_is_refused(steward, allowed):
    path = allowed / "people.csv"
    path.write_text(synthetic_csv(50))
    dataset = register(str(path))
    path.write_text(synthetic_csv(50, seed=8))
    dataset = profiled(dataset)
    assert dataset.status == Dataset.Status.FAILED
    assert "SHA-256" in dataset.error


def test_paths_outside_the_allowed_folders_are_refused(steward, allowed, tmp_path):
    outside = tmp_path / "secret.csv"
    outside.write_text(synthetic_csv(5))
    assert "outside the folders" in refused(str(outside))
    assert "outside the folders" in refused(f"{allowed}/../secret.csv")
    (allowed / "link.csv").symlink_to(outside)
    assert "outside the folders" in refused(str(allowed / "link.csv"))
    assert "not a file" in refused(str(allowed / "missing.csv"))
    assert "absolute path" in refused("people.csv")


def test_no_folder_is_allowed_unless_configured(steward, settings, tmp_path):
    settings.DATA_IMPORT_DIRS = []
    path = tmp_path / "people.csv"
    path.write_text(synthetic_csv(5))
    assert "DATA_IMPORT_DIRS" in refused(str(path))


def test_the_bounds_of_uploads_hold_at_registration(steward, allowed, settings):
    path = allowed / "people.csv"
    path.write_text(synthetic_csv(200))
    settings.MAX_UPLOAD_BYTES = 1000
    assert "MAX_UPLOAD_BYTES" in refused(str(path))
    settings.MAX_UPLOAD_BYTES = 10**9
    settings.MAX_COLUMNS = 3
    assert "MAX_COLUMNS" in refused(str(path))
    (allowed / "data.bin").write_bytes(b"\x00\x01binary" * 100)
    settings.MAX_COLUMNS = 100
    assert "binary" in refused(str(allowed / "data.bin"))


def test_bounds_found_while_reading_refuse_the_dataset(steward, allowed, settings):
    path = allowed / "people.csv"
    path.write_text(synthetic_csv(200))
    settings.MAX_ROWS = 100
    dataset = profiled(register(str(path)))
    assert dataset.status == Dataset.Status.FAILED and "MAX_ROWS" in dataset.error
    assert path.exists()


def test_the_owner_must_be_a_steward_of_the_project(steward, allowed, db):
    make_user("reader", "Recipients")
    path = allowed / "people.csv"
    path.write_text(synthetic_csv(5))
    assert "not a data steward of Default" in refused(str(path), owner="reader")
    assert "No such project" in str(
        pytest.raises(
            CommandError,
            call_command,
            "register_dataset",
            str(path),
            project="nowhere",
            owner="steward",
        ).value
    )
    assert not Dataset.objects.exists()


# --- Object storage: moto's S3 server as a process ----------------------------------------


@pytest.fixture(scope="module")
def moto_server():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1)  # noqa: S310 - local server
        except OSError:
            return process.poll() is not None  # stop waiting for a server that died
        return True

    try:
        wait_until(answers, 30, "moto's S3 server")
        assert process.poll() is None, "moto's S3 server did not start"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def bucket(moto_server, settings):
    settings.SOURCE_S3_ENDPOINT_URL = moto_server
    settings.SOURCE_S3_REGION = "us-east-1"
    settings.SOURCE_S3_ACCESS_KEY_ID = "testing"
    settings.SOURCE_S3_SECRET_ACCESS_KEY = "testing"
    settings.SOURCE_S3_BUCKETS = [BUCKET]
    client = boto3.client(
        "s3",
        endpoint_url=moto_server,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=BUCKET)
    yield client
    for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def _object_frame(client, key: str) -> pd.DataFrame:
    raw = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    if key.endswith(".parquet"):
        return pd.read_parquet(io.BytesIO(raw)).astype(str)
    return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)


@pytest.mark.s3
def test_an_s3_object_is_registered_and_profiled_in_place(steward, bucket, monkeypatch):
    # Small ranges: the file is read by many GETs, each asking for the registered ETag.
    monkeypatch.setattr(sources, "RANGE_BYTES", 4096)
    bucket.put_object(Bucket=BUCKET, Key="in/people.csv", Body=synthetic_csv(2000).encode())
    etag = bucket.head_object(Bucket=BUCKET, Key="in/people.csv")["ETag"]
    dataset = register(f"s3://{BUCKET}/in/people.csv")
    assert dataset.source_kind == Dataset.SourceKind.S3
    assert dataset.source_version.split(" ")[0] == etag
    assert dataset.original_filename == "people.csv"
    dataset = profiled(dataset)
    assert_same_as(dataset, _object_frame(bucket, "in/people.csv"), "diagnosis")


@pytest.mark.s3
def test_an_s3_parquet_object_is_read_by_ranges(steward, bucket, monkeypatch):
    monkeypatch.setattr(sources, "RANGE_BYTES", 4096)
    frame = pd.read_csv(io.StringIO(synthetic_csv(3000)), dtype=str, keep_default_na=False)
    body = io.BytesIO()
    frame.to_parquet(body, row_group_size=500)
    bucket.put_object(Bucket=BUCKET, Key="people.parquet", Body=body.getvalue())
    dataset = profiled(register(f"s3://{BUCKET}/people.parquet"))
    assert dataset.file_format == "parquet"
    assert_same_as(dataset, _object_frame(bucket, "people.parquet"), "age")


@pytest.mark.s3
def test_an_object_changed_after_registration_is_refused(steward, bucket):
    bucket.put_object(Bucket=BUCKET, Key="people.csv", Body=synthetic_csv(100).encode())
    dataset = register(f"s3://{BUCKET}/people.csv")
    bucket.put_object(Bucket=BUCKET, Key="people.csv", Body=synthetic_csv(100, seed=9).encode())
    dataset = profiled(dataset)
    assert dataset.status == Dataset.Status.FAILED
    assert "changed since it was registered; register it again" in dataset.error
    assert not storage.exists(column_store.name_of(dataset) if dataset.file_path else "x")


@pytest.mark.s3
def test_an_object_changed_while_it_is_read_is_refused_not_mixed(steward, bucket, monkeypatch):
    monkeypatch.setattr(sources, "RANGE_BYTES", 4096)
    bucket.put_object(Bucket=BUCKET, Key="people.csv", Body=synthetic_csv(3000).encode())
    dataset = register(f"s3://{BUCKET}/people.csv")
    store = column_store.name_of(dataset)
    real_get = sources.S3Object.get
    calls = []

    def get_then_replace(self, start, end):
        calls.append(start)
        if len(calls) == 5:  # the object is replaced in the middle of the read
            bucket.put_object(Bucket=BUCKET, Key="people.csv", Body=b"name,age\nx,1\n")
        return real_get(self, start, end)

    monkeypatch.setattr(sources.S3Object, "get", get_then_replace)
    dataset = profiled(dataset)
    assert len(calls) >= 5
    assert dataset.status == Dataset.Status.FAILED
    assert "changed since it was registered" in dataset.error
    assert not storage.exists(store)


@pytest.mark.s3
def test_s3_refusals_leave_no_dataset(steward, bucket, settings):
    bucket.put_object(Bucket=BUCKET, Key="people.csv", Body=synthetic_csv(300).encode())
    assert "There is no object" in refused(f"s3://{BUCKET}/missing.csv")
    assert "SOURCE_S3_BUCKETS" in refused("s3://other-bucket/people.csv")
    settings.MAX_UPLOAD_BYTES = 100
    assert "MAX_UPLOAD_BYTES" in refused(f"s3://{BUCKET}/people.csv")


# --- PostgreSQL: the tests' cluster --------------------------------------------------------


@pytest.fixture(scope="module")
def warehouse(postgres_database):
    """A database with a table ``people`` a role ``reader_<database>`` may read and a table ``secret`` it
    may not; the reader's connection URL."""
    frame = pd.read_csv(io.StringIO(synthetic_csv(1500)), dtype=str, keep_default_na=False)
    admin = postgres_database.replace("postgres://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE people (name text, age integer, zip text, sex text, diagnosis text)"
        )
        with connection.cursor().copy("COPY people FROM STDIN") as copy:
            for row in frame.itertuples(index=False):
                copy.write_row(list(row))
        connection.execute("CREATE TABLE secret (id integer)")
        connection.execute("INSERT INTO secret VALUES (1)")
        # Roles belong to the whole cluster and this module's database may be set up twice in
        # one test process: a reader of its own for each database.
        role = "reader_" + admin.rsplit("/", 1)[-1]
        connection.execute(f'CREATE ROLE "{role}" LOGIN')
        connection.execute(f'GRANT SELECT ON people TO "{role}"')
    return admin.replace("postgresql://postgres@", f"postgresql://{role}@")


@pytest.fixture
def source_databases(settings, warehouse):
    settings.SOURCE_DATABASES = {"warehouse": warehouse}
    return warehouse


def _select(url: str, query: str) -> pd.DataFrame:
    with psycopg.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(query)
        names = [c.name for c in cursor.description or []]
        rows = cursor.fetchall()
    return pd.DataFrame(rows, columns=names).astype(str)


@pytest.mark.postgres
def test_a_table_is_registered_and_profiled_in_place(steward, source_databases):
    dataset = register("postgres://warehouse?table=people")
    assert dataset.source_kind == Dataset.SourceKind.POSTGRES
    assert dataset.row_count == 1500  # counted at registration
    dataset = profiled(dataset)
    assert_same_as(dataset, _select(source_databases, "SELECT * FROM people"), "zip")
    assert dataset.source_version  # the digest of its rows, for later reads


@pytest.mark.postgres
def test_a_query_is_registered_and_profiled_in_place(steward, source_databases):
    query = "SELECT zip, sex, age FROM people WHERE age > 40"
    dataset = profiled(register(f"postgres://warehouse?query={query}"))
    assert_same_as(dataset, _select(source_databases, query), "sex")


@pytest.mark.postgres
def test_a_table_changed_since_its_first_read_is_refused(steward, source_databases, warehouse):
    dataset = profiled(register("postgres://warehouse?table=people"))
    storage.delete_quietly(column_store.name_of(dataset))  # a later read: the store rebuilt
    admin = "postgresql://postgres@" + warehouse.split("@", 1)[1]
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute("UPDATE people SET zip = '99999' WHERE name = 'Person 7'")
    try:
        with pytest.raises(Exception, match="changed since it was first read"):
            column_store.read(dataset, ["zip"])
        assert not storage.exists(column_store.name_of(dataset))
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute("UPDATE people SET zip = '02139' WHERE name = 'Person 7'")


@pytest.mark.postgres
def test_database_refusals_leave_no_dataset(steward, source_databases, settings):
    message = refused("postgres://warehouse?table=secret")
    assert "secret" in message and "SELECT" in message
    message = refused("postgres://warehouse?query=SELECT id FROM secret")
    assert "permission denied for table secret" in message
    assert "single SELECT" in refused("postgres://warehouse?query=DELETE FROM people")
    assert "single SELECT" in refused("postgres://warehouse?query=SELECT 1; DROP TABLE people")
    assert "single SELECT" in refused(
        "postgres://warehouse?query=WITH d AS (DELETE FROM people RETURNING *) SELECT * FROM d"
    )
    # Read in a read-only transaction: a lock is refused too.
    assert "would write or lock" in refused(
        "postgres://warehouse?query=SELECT * FROM people FOR UPDATE"
    )
    assert "no table nothere" in refused("postgres://warehouse?table=nothere")
    assert "SOURCE_DATABASES" in refused("postgres://elsewhere?table=people")
    settings.MAX_ROWS = 1000
    assert "MAX_ROWS" in refused("postgres://warehouse?table=people")
    settings.MAX_ROWS = 10**6
    settings.MAX_COLUMNS = 2
    assert "MAX_COLUMNS" in refused("postgres://warehouse?table=people")
    # Nothing was written or deleted: the table is as it was.
    assert len(_select(source_databases, "SELECT * FROM people")) == 1500


# --- The API --------------------------------------------------------------------------------


def _register_over_api(user, **body):
    return client_for(token_for(user)).post(
        "/api/v1/datasets/register", body, content_type="application/json"
    )


def test_a_site_administrator_registers_a_folder_file_over_the_api(steward, allowed):
    steward.is_staff = True
    steward.save(update_fields=["is_staff"])
    path = allowed / "people.csv"
    path.write_text(synthetic_csv(40))
    read_only = client_for(token_for(steward, "read")).post(
        "/api/v1/datasets/register", {"source": str(path)}, content_type="application/json"
    )
    assert read_only.status_code == 403 and not Dataset.objects.exists()
    answer = _register_over_api(steward, source=str(path), name="Folder people")
    assert answer.status_code == 201, answer.content
    dataset = profiled(Dataset.objects.get(pk=answer.json()["id"]))
    assert dataset.owner == steward and dataset.name == "Folder people"
    assert_same_as(dataset, pd.read_csv(path, dtype=str, keep_default_na=False), "sex")
    event = AuditEvent.objects.get(action=AuditEvent.Action.REGISTERED)
    assert event.actor == steward and event.detail["via"] == "api"


def test_a_steward_may_not_register_a_folder_file_over_the_api(steward, allowed):
    path = allowed / "people.csv"
    path.write_text(synthetic_csv(40))
    answer = _register_over_api(steward, source=str(path))
    assert answer.status_code == 403
    assert "site administrators" in answer.json()["detail"]
    # Whether a path exists is not told either.
    assert _register_over_api(steward, source=str(allowed / "nothing.csv")).status_code == 403
    assert not Dataset.objects.exists()


def test_only_configured_sources_are_registered_over_the_api(steward, settings):
    settings.SOURCE_S3_BUCKETS = []
    settings.SOURCE_DATABASES = {}
    for source in ("s3://any-bucket/people.csv", "postgres://warehouse?table=people"):
        answer = _register_over_api(steward, source=source)
        assert answer.status_code == 400, answer.content
    assert (
        "SOURCE_S3_BUCKETS" in _register_over_api(steward, source="s3://b-1/x.csv").json()["detail"]
    )
    assert not Dataset.objects.exists()


def test_a_recipient_may_not_register(recipient, steward, settings):
    settings.SOURCE_S3_BUCKETS = ["any-bucket"]
    answer = _register_over_api(recipient, source="s3://any-bucket/people.csv")
    assert answer.status_code == 403
    assert not Dataset.objects.exists()


# --- A real worker --------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.s3
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_profiles_registered_sources_in_place(
    steward, bucket, source_databases, start_worker, settings
):
    """The worker process reads its settings from the environment, like the web's."""
    bucket.put_object(Bucket=BUCKET, Key="people.csv", Body=synthetic_csv(700).encode())
    environment = {
        "SOURCE_S3_BUCKETS": BUCKET,
        "SOURCE_S3_ENDPOINT_URL": settings.SOURCE_S3_ENDPOINT_URL,
        "SOURCE_S3_REGION": "us-east-1",
        "SOURCE_S3_ACCESS_KEY_ID": "testing",
        "SOURCE_S3_SECRET_ACCESS_KEY": "testing",
        "SOURCE_DATABASES": json.dumps(settings.SOURCE_DATABASES),
    }
    with start_worker(**environment):
        call_command(
            "register_dataset", f"s3://{BUCKET}/people.csv", project="default", owner="steward"
        )
        call_command(
            "register_dataset",
            "postgres://warehouse?table=people",
            project="default",
            owner="steward",
        )

        def all_final() -> bool:
            return all(d.is_final for d in Dataset.objects.all())

        wait_until(all_final, 120, "the worker to profile the registered datasets")
    from_s3 = Dataset.objects.get(source_kind=Dataset.SourceKind.S3)
    from_table = Dataset.objects.get(source_kind=Dataset.SourceKind.POSTGRES)
    assert_same_as(from_s3, _object_frame(bucket, "people.csv"), "zip")
    assert_same_as(from_table, _select(source_databases, "SELECT * FROM people"), "diagnosis")
