"""A download reads the stored file once, hashing it as it streams, and stops short, with the
failure logged, when the bytes are not the approved ones."""

from __future__ import annotations

import hashlib

import pytest
from django.test import Client
from django.urls import reverse

from releases.core import storage
from releases.models import AuditEvent
from releases.requests import downloads
from releases.requests import services as sharing
from tests.support.workflow import approve

pytestmark = pytest.mark.django_db


@pytest.fixture
def approved(ready_request, officer, recipient):
    approve(officer, ready_request, recipient)
    sharing.accept_terms(recipient, ready_request.pk)
    return ready_request


def get_file(user, release_request):
    client = Client()
    client.force_login(user)
    return client.get(reverse("releases:download_file", args=[release_request.pk, "csv"]))


def test_the_download_is_read_once_and_carries_its_sha256(approved, recipient, monkeypatch):
    opened = []
    real_open = storage.open_file
    monkeypatch.setattr(
        storage, "open_file", lambda name, *a: opened.append(name) or real_open(name, *a)
    )
    response = get_file(recipient, approved)
    assert response.status_code == 200
    content = b"".join(response.streaming_content)
    assert opened == [approved.extract_path]
    assert hashlib.sha256(content).hexdigest() == response["X-Content-SHA256"]
    assert response["X-Content-SHA256"] == approved.extract_sha256
    assert int(response["Content-Length"]) == len(content)
    assert (
        AuditEvent.objects.filter(action=AuditEvent.Action.DOWNLOAD, actor=recipient).count() == 1
    )


def test_bytes_changed_in_place_end_the_stream_short_and_are_logged(
    approved, recipient, settings, monkeypatch
):
    # Same size, one byte changed: the size check before streaming cannot see it.
    monkeypatch.setattr(storage, "CHUNK_BYTES", 64)
    path = settings.MEDIA_ROOT / approved.extract_path
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    response = get_file(recipient, approved)
    assert response.status_code == 200  # the headers are gone before the last byte is read
    received = b""
    with pytest.raises(downloads.StreamAborted):
        for chunk in response.streaming_content:
            received += chunk
    assert 0 < len(received) < len(data)  # never the whole changed file
    refused = AuditEvent.objects.get(action=AuditEvent.Action.DOWNLOAD_REFUSED)
    assert refused.actor == recipient and refused.request_id == approved.pk
    assert "did not match the approved SHA-256" in refused.detail["reason"]
