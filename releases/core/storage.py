"""Private file storage: uploads, column stores and extracts. Never served by URL.

Everything goes through Django's storage API (the ``private`` entry of ``STORAGES``), so the
same code runs on a local folder (the default, ``MEDIA_ROOT``) or on object storage. Callers
never build paths themselves: they save a file (getting its storage name back), open it as a
stream, hash it in chunks, or ask for a local copy when a reader needs a real file.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage, storages

CHUNK_BYTES = 1024 * 1024


def private_storage() -> Storage:
    """The private storage backend (``STORAGES["private"]``), or MEDIA_ROOT with no URL."""
    if "private" in getattr(settings, "STORAGES", {}):
        return storages["private"]
    # base_url=None: a stored file has no public URL.
    return FileSystemStorage(location=settings.MEDIA_ROOT, base_url=None)


def new_name(folder: str, suffix: str) -> str:
    """A fresh storage name in ``folder`` (nothing is written)."""
    return f"{folder}/{uuid.uuid4().hex}{suffix}"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_bytes(folder: str, suffix: str, data: bytes) -> str:
    """Store ``data`` under a fresh name in ``folder``; return its storage name."""
    return private_storage().save(new_name(folder, suffix), ContentFile(data))


class _GivenUpFile(File):
    """A local file its owner no longer needs: a local storage moves it into place (Django
    does so for anything with a ``temporary_file_path``) instead of copying it."""

    def temporary_file_path(self) -> str:
        return str(self.name)


def save_file(
    folder: str, suffix: str, local_path: str | Path, name: str = "", move: bool = False
) -> str:
    """Store a local file (streamed, never read whole) under a fresh name; return the name.

    ``move``: the local file may be moved (a gigabyte extract is then renamed into a local
    storage, not copied; object storage uploads it as usual)."""
    with open(local_path, "rb") as handle:
        content = _GivenUpFile(handle, name=str(local_path)) if move else File(handle)
        return private_storage().save(name or new_name(folder, suffix), content)


def open_file(name: str, mode: str = "rb") -> IO[bytes]:
    """A stream of a stored file; the caller closes it."""
    return private_storage().open(name, mode)


def read_bytes(name: str) -> bytes:
    with open_file(name) as handle:
        return handle.read()


def iter_chunks(name: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    with open_file(name) as handle:
        while chunk := handle.read(chunk_bytes):
            yield chunk


def sha256_of(name: str) -> str:
    """SHA-256 of a stored file, read in chunks."""
    digest = hashlib.sha256()
    for chunk in iter_chunks(name):
        digest.update(chunk)
    return digest.hexdigest()


def exists(name: str) -> bool:
    return bool(name) and private_storage().exists(name)


def size(name: str) -> int:
    return private_storage().size(name)


@contextlib.contextmanager
def local_path(name: str) -> Iterator[Path]:
    """A local filesystem path holding the stored file, for readers that need a real file.

    On a local folder this is the file itself (read it, never change it); on object storage
    it is a temporary copy, removed on exit.
    """
    store = private_storage()
    try:
        direct = Path(store.path(name))
    except NotImplementedError:  # object storage has no local path
        direct = None
    if direct is not None:
        yield direct
        return
    suffix = Path(name).suffix
    with tempfile.NamedTemporaryFile(suffix=suffix, dir=settings.FILE_UPLOAD_TEMP_DIR) as temp:
        with store.open(name, "rb") as source:
            shutil.copyfileobj(source, temp, CHUNK_BYTES)
        temp.flush()
        yield Path(temp.name)


def list_files(folder: str) -> list[str]:
    """The names of the files under ``folder`` (at any depth); none when it does not exist."""
    store = private_storage()
    try:
        folders, files = store.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    names = [f"{folder}/{name}" for name in files]
    for sub in folders:
        names += list_files(f"{folder}/{sub}")
    return names


def delete_quietly(name: str) -> None:
    store = private_storage()
    if name and store.exists(name):
        store.delete(name)
