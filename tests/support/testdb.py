"""The SQLite test database, migrated once and copied.

Migrating from an empty file costs about 7 s of CPU, and every pytest process (each xdist
worker, each run) used to pay it. The first process that needs the database migrates it as
Django always does, then keeps a copy under ``VAR_DIR`` named after a digest of every
migration file of every installed app and of Django's version: the next processes, in this run
and later ones, copy that file and run ``migrate`` on it, which finds nothing to apply. A
changed, added or removed migration changes the digest, so a stale copy is never used (and is
deleted when the new one is kept). A lock file orders the processes: one migrates, the others
wait for its copy.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import django
from django.conf import settings
from django.db import connections
from django.db.migrations.loader import MigrationLoader

PREFIX = "test-db-template-"


def usable(config) -> bool:
    """Whether this run's database can come from the copy: one SQLite database, migrated (not
    ``--nomigrations``), made afresh (not ``--reuse-db``)."""
    databases = settings.DATABASES
    return (
        list(databases) == ["default"]
        and databases["default"]["ENGINE"] == "django.db.backends.sqlite3"
        and not config.getvalue("nomigrations")
        and not config.getvalue("reuse_db")
    )


def template_path() -> Path:
    """Where the migrated copy for the current migrations is kept."""
    digest = hashlib.sha256(django.get_version().encode())
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for key in sorted(loader.disk_migrations):
        migration = loader.disk_migrations[key]
        digest.update(repr(key).encode())
        digest.update(Path(sys.modules[migration.__module__].__file__).read_bytes())
    return Path(settings.VAR_DIR) / f"{PREFIX}{digest.hexdigest()[:16]}.sqlite3"


@contextlib.contextmanager
def locked(template: Path) -> Iterator[None]:
    """Held by one process at a time (of any run sharing ``VAR_DIR``)."""
    template.parent.mkdir(parents=True, exist_ok=True)
    with open(template.parent / (PREFIX + "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _remove(database: Path) -> None:
    """The database file and its WAL files (a left-over WAL would be replayed into a copy)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)


def place_copy(template: Path, test_database: Path) -> bool:
    """Copies ``template`` to ``test_database`` if there is one; whether it did."""
    if not template.exists():
        return False
    _remove(test_database)
    partial = test_database.with_name(test_database.name + ".partial")
    shutil.copyfile(template, partial)
    os.replace(partial, test_database)
    return True


def keep_copy(template: Path) -> None:
    """Writes the freshly migrated test database (the default connection's) to ``template``,
    through SQLite's backup (consistent whatever is still in the WAL), and removes the copies
    kept for other migrations."""
    for stale in template.parent.glob(PREFIX + "*.sqlite3"):
        if stale != template:
            _remove(stale)
    partial = template.with_name(template.name + ".partial")
    _remove(partial)
    connection = connections["default"]
    connection.ensure_connection()
    target = sqlite3.connect(partial)
    try:
        connection.connection.backup(target)
        # A plain file, readable without its WAL: the copies are made with a file copy.
        target.execute("PRAGMA journal_mode=DELETE")
    finally:
        target.close()
    os.replace(partial, template)
