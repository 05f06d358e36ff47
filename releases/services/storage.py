"""Private file storage under MEDIA_ROOT: never served by URL, read back only through services."""

from __future__ import annotations

import hashlib
import uuid

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage


def private_storage() -> FileSystemStorage:
    # base_url=None: a stored file has no public URL.
    return FileSystemStorage(location=settings.MEDIA_ROOT, base_url=None)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_bytes(folder: str, suffix: str, data: bytes) -> str:
    """Store ``data`` under a fresh name in ``folder``; return its storage path."""
    return private_storage().save(f"{folder}/{uuid.uuid4().hex}{suffix}", ContentFile(data))


def read_bytes(path: str) -> bytes:
    with private_storage().open(path, "rb") as handle:
        return handle.read()


def delete_quietly(path: str) -> None:
    storage = private_storage()
    if path and storage.exists(path):
        storage.delete(path)
