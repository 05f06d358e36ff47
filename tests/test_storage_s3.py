"""Private files on S3-compatible object storage, against a real S3 API server (moto's server
mode on 127.0.0.1): upload, profiling into the column store, reading columns back, deletion."""

from __future__ import annotations

import socket

import pytest

from releases.models import Dataset
from releases.services import column_store, datasets, storage
from tests.support.factories import make_dataset
from tests.support.tiers import refuse_in_fast_tier

BUCKET = "anonymizer-test"
PREFIX = "private"

pytestmark = pytest.mark.s3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server(request):
    refuse_in_fast_tier(request, "s3", "moto's S3 server")
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_storage(s3_server, settings, tmp_path):
    import boto3

    options = {
        "bucket_name": BUCKET,
        "endpoint_url": s3_server,
        "region_name": "us-east-1",
        "access_key": "testing",
        "secret_key": "testing",
        "location": PREFIX,
        "default_acl": "private",
        "file_overwrite": False,
    }
    client = boto3.client(
        "s3",
        endpoint_url=s3_server,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=BUCKET)
    settings.STORAGES = {
        **settings.STORAGES,
        "private": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options},
    }
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    yield client
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    for item in listed:
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def _keys(client) -> set[str]:
    return {item["Key"] for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def test_upload_profile_and_column_store_live_in_object_storage(s3_storage, steward, settings):
    content = "name;age;weight\nAda;36;72,5\nBob;41;80,25\nCyd;29;64\n"
    dataset = make_dataset(steward, content.encode("cp1252"), "people.csv")
    assert dataset.status == Dataset.Status.READY, dataset.error
    keys = _keys(s3_storage)
    assert f"{PREFIX}/{dataset.file_path}" in keys
    assert f"{PREFIX}/{column_store.name_of(dataset)}" in keys
    # Nothing of it reached the local media folder.
    assert not settings.MEDIA_ROOT.exists() or not any(settings.MEDIA_ROOT.rglob("*"))
    # The stored original is the uploaded bytes.
    assert storage.read_bytes(dataset.file_path) == content.encode("cp1252")
    assert storage.sha256_of(dataset.file_path) == dataset.sha256
    # Columns read back from the store on object storage (a temporary local copy).
    frame = datasets.load_frame(dataset, ["weight", "name"])
    assert list(frame.columns) == ["weight", "name"]
    assert frame["weight"].tolist() == ["72,5", "80,25", "64"]
    weight = dataset.columns.get(name="weight")
    assert weight.inferred_type == "decimal"
    assert (weight.profile["min"], weight.profile["max"]) == (64, 80.25)


def test_deleting_a_dataset_removes_its_objects(s3_storage, steward):
    dataset = make_dataset(steward, "a,b\n1,x\n2,y\n", "small.csv")
    assert len(_keys(s3_storage)) == 2
    datasets.delete_dataset(steward, dataset)
    assert _keys(s3_storage) == set()


def test_a_refused_file_leaves_nothing_in_object_storage(s3_storage, steward):
    dataset = make_dataset(steward, "a,b\n1,2\n3,4,5\n", "ragged.csv")
    assert dataset.status == Dataset.Status.FAILED
    assert "Line 3 has 3 fields" in dataset.error
    assert _keys(s3_storage) == set()


def test_a_release_package_is_uploaded_whole_to_object_storage(s3_storage, steward, settings):
    """The run gives its written files up for a move; object storage uploads them instead."""
    from releases.models import Role
    from tests.support.workflow import request_release, run, tag

    rows = "".join(f"{20 + i % 30};{'FM'[i % 2]};{'ab'[i % 3 == 0]}\n" for i in range(120))
    dataset = make_dataset(steward, ("age;sex;note\n" + rows).encode(), "small.csv")
    tag(
        steward,
        dataset,
        {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER, "note": Role.SENSITIVE},
    )
    ready = run(request_release(steward, dataset, k=2))
    assert ready.state == "ready", ready.error
    keys = _keys(s3_storage)
    for stored in ready.files.all():
        assert f"{PREFIX}/{stored.path}" in keys
        assert storage.sha256_of(stored.path) == stored.sha256
    assert not settings.MEDIA_ROOT.exists() or not any(settings.MEDIA_ROOT.rglob("*"))
