"""Snapshots of an install (the database and every stored file) and their restore.

``backup(target)`` writes a consistent snapshot while the app runs: the database first (SQLite
through its online backup API, PostgreSQL through ``pg_dump`` in its custom format, both a
consistent copy of one moment), then every file of the private storage, read through the
storage API (a local folder or S3 alike). Stored files are never changed once written (each
attempt writes new names), so every file the database names was written before the dump and is
copied after it. Everything goes to ``<target>.partial``, renamed to ``target`` once complete:
a snapshot that stopped half-way never looks complete.

``restore(source)`` rebuilds an empty install from a snapshot: it refuses a database that holds
data, checks every file of the manifest (exists, size, SHA-256) before writing anything, then
restores the database, applies the migrations (an older snapshot is upgraded), copies the files
back to storage and checks every file whose SHA-256 the database records.

Refusals are :class:`BackupError`, a sentence for the operator; the commands turn it into a
``CommandError``.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files import File
from django.core.management import call_command
from django.db import connection, connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from releases.core import storage
from releases.models import AttackerFile, AuditEvent, Dataset, ReleaseFile, ReleaseRequest

#: Version of the snapshot's layout (manifest.json); a restore refuses another one.
FORMAT = 1
MANIFEST = "manifest.json"
FILES = "files"
SQLITE, POSTGRESQL = "sqlite", "postgresql"
ENGINES = {
    "django.db.backends.sqlite3": SQLITE,
    "django.db.backends.postgresql": POSTGRESQL,
}
#: The database's file in the snapshot, by kind.
DUMPS = {SQLITE: "database.sqlite3", POSTGRESQL: "database.pgdump"}


class BackupError(Exception):
    """A refusal, said in a sentence for the operator."""


@dataclass
class Entry:
    """One file of a snapshot: ``path`` relative to the snapshot, ``name`` its storage name
    (empty for the database)."""

    path: str
    size: int
    sha256: str
    name: str = ""

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "size": self.size, "sha256": self.sha256}
        if self.name:
            data["name"] = self.name
        return data


@dataclass
class Summary:
    """What a backup or a restore did, for the command's last lines."""

    where: Path
    files: int = 0
    file_bytes: int = 0
    database_bytes: int = 0
    checked: int = 0
    #: Recorded files the storage held with other bytes than recorded, or not at all.
    warnings: list[str] = field(default_factory=list)


# --- The database ---------------------------------------------------------------------------


def database_kind() -> str:
    engine = settings.DATABASES["default"]["ENGINE"]
    try:
        return ENGINES[engine]
    except KeyError:
        raise BackupError(f"Backups cover SQLite and PostgreSQL databases, not {engine}.") from None


def _pg_binary(name: str) -> str:
    """``pg_dump`` or ``pg_restore``: on the PATH, else Debian's newest under /usr/lib."""
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None
    )
    if not found:
        raise BackupError(
            f"PostgreSQL's {name} is not installed here (Debian: apt-get install "
            "postgresql-client, of the server's major version or later)."
        )
    return found


def _pg_environment() -> dict[str, str]:
    """The connection of the default database for libpq's tools (the password stays off the
    command line)."""
    database: dict[str, Any] = dict(settings.DATABASES["default"])
    env = dict(os.environ)
    for variable, key in (
        ("PGHOST", "HOST"),
        ("PGPORT", "PORT"),
        ("PGUSER", "USER"),
        ("PGPASSWORD", "PASSWORD"),
    ):
        if database.get(key):
            env[variable] = str(database[key])
    options = database.get("OPTIONS") or {}
    if options.get("sslmode"):
        env["PGSSLMODE"] = str(options["sslmode"])
    return env


def _run_pg(command: list[str], what: str) -> None:
    done = subprocess.run(
        command, env=_pg_environment(), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit status {done.returncode}"
        raise BackupError(f"{what} failed: {reason}")


def _dump_database(kind: str, target: Path) -> None:
    if kind == SQLITE:
        connection.close()
        source = sqlite3.connect(str(settings.DATABASES["default"]["NAME"]))
        copy = sqlite3.connect(str(target))
        try:
            # The online backup API: a consistent copy while other processes write.
            source.backup(copy)
            # A single file, readable without its -wal/-shm companions.
            copy.execute("PRAGMA journal_mode=DELETE")
        finally:
            copy.close()
            source.close()
    else:
        name = str(settings.DATABASES["default"]["NAME"])
        _run_pg(
            [_pg_binary("pg_dump"), "--format=custom", f"--file={target}", f"--dbname={name}"],
            "pg_dump",
        )


def _load_database(kind: str, dump: Path) -> None:
    """Replace the (empty) default database with the snapshot's."""
    connections.close_all()
    if kind == SQLITE:
        path = Path(settings.DATABASES["default"]["NAME"])
        path.parent.mkdir(parents=True, exist_ok=True)
        source = sqlite3.connect(f"file:{dump}?mode=ro", uri=True)
        destination = sqlite3.connect(str(path))
        try:
            source.backup(destination)
        finally:
            destination.close()
            source.close()
    else:
        name = str(settings.DATABASES["default"]["NAME"])
        # --clean --if-exists: the empty database may hold the tables of a migrated install.
        _run_pg(
            [
                _pg_binary("pg_restore"),
                "--no-owner",
                "--no-privileges",
                "--clean",
                "--if-exists",
                "--exit-on-error",
                "--single-transaction",
                f"--dbname={name}",
                str(dump),
            ],
            "pg_restore",
        )
    connections.close_all()


def latest_migrations() -> dict[str, str]:
    """The last migration applied of each app, by name (they are numbered)."""
    latest: dict[str, str] = {}
    for app, name in MigrationRecorder(connection).applied_migrations():
        latest[app] = max(latest.get(app, name), name)
    return dict(sorted(latest.items()))


def holds_data() -> list[str]:
    """What the default database already holds that a restore would overwrite."""
    tables = set(connection.introspection.table_names())
    found = []
    for model, what in (
        (get_user_model(), "users"),
        (Dataset, "datasets"),
        (AuditEvent, "audit events"),
    ):
        if model._meta.db_table in tables and model.objects.exists():
            found.append(what)
    return found


# --- Hashing and copying --------------------------------------------------------------------


def _sha256_of_path(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(storage.CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_hashed(source, target: Path) -> tuple[int, str]:
    """Copy an open binary stream to ``target`` (synced to disk); its size and SHA-256."""
    digest = hashlib.sha256()
    size = 0
    with open(target, "wb") as out:
        while chunk := source.read(storage.CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return size, digest.hexdigest()


def _sync_folder(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def stored_names(folder: str = "") -> Iterator[str]:
    """Every file of the private storage (at any depth), through the storage API."""
    folders, files = storage.private_storage().listdir(folder)
    prefix = f"{folder}/" if folder else ""
    for name in sorted(files):
        yield prefix + name
    for sub in sorted(folders):
        yield from stored_names(prefix + sub)


def _safe_name(name: str) -> str:
    """A storage name from a manifest, refused when it could leave the snapshot or storage."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\\" in name:
        raise BackupError(f"The manifest names a file outside the snapshot: {name!r}.")
    return name


# --- Files the database records -------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """A stored file whose SHA-256 the database records, and what it is to a person."""

    name: str
    sha256: str
    what: str


def recorded_files() -> list[Recorded]:
    """Every stored file the database records a SHA-256 of: release files (an extract's
    formats, a statistics release's tables), the extract of each request, uploaded datasets'
    originals and attacker files."""
    found: dict[str, Recorded] = {}

    def add(name: str, sha256: str, what: str) -> None:
        if name and sha256 and name not in found:
            found[name] = Recorded(name, sha256, what)

    for release_file in ReleaseFile.objects.order_by("id"):
        add(
            release_file.path,
            release_file.sha256,
            f"the {release_file.format} of request #{release_file.request_id} round "
            f"{release_file.round}",
        )
    for request_id, path, sha256 in ReleaseRequest.objects.order_by("id").values_list(
        "id", "extract_path", "extract_sha256"
    ):
        add(path, sha256, f"the extract of request #{request_id}")
    # A registered source stays where it is: storage holds no original of it.
    uploads = Dataset.objects.filter(source_kind=Dataset.SourceKind.UPLOAD)
    for dataset_id, path, sha256 in uploads.order_by("id").values_list("id", "file_path", "sha256"):
        add(path, sha256, f"the original of dataset #{dataset_id}")
    for request_id, path, sha256 in AttackerFile.objects.order_by("id").values_list(
        "request_id", "path", "sha256"
    ):
        add(path, sha256, f"the attacker file of request #{request_id}")
    return list(found.values())


def _mismatches(records: list[Recorded], actual: Callable[[str], str | None]) -> list[str]:
    """A line for each recorded file whose bytes differ from its SHA-256 or that is missing;
    ``actual(name)`` gives a file's SHA-256, None when there is no such file."""
    lines = []
    for record in records:
        sha256 = actual(record.name)
        if sha256 is None:
            lines.append(f"{record.name} ({record.what}) is missing")
        elif sha256 != record.sha256:
            lines.append(f"{record.name} ({record.what}) differs from its recorded SHA-256")
    return lines


# --- Backup ---------------------------------------------------------------------------------


def _app_version() -> str:
    try:
        return metadata.version("anonymizer")
    except metadata.PackageNotFoundError:
        return "unknown"


def backup(target: Path) -> Summary:
    """Write a snapshot of the database and the private storage to ``target``."""
    target = Path(target)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupError(
            f"{target} is not an empty folder: a snapshot goes to a new or empty folder, so "
            "that it never mixes with another."
        )
    partial = target.with_name(target.name + ".partial")
    if partial.exists():
        raise BackupError(
            f"{partial} exists: another backup is writing there, or one stopped half-way. "
            "Remove it once no backup is running, then try again."
        )
    kind = database_kind()
    try:
        partial.mkdir(parents=True)
    except OSError as exc:
        raise BackupError(f"Cannot create {partial}: {exc.strerror}.") from None
    try:
        summary = _write_snapshot(kind, partial)
        _sync_folder(partial)
        if target.exists():
            target.rmdir()
        partial.rename(target)
        _sync_folder(target.parent)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    summary.where = target
    return summary


def _write_snapshot(kind: str, folder: Path) -> Summary:
    created_at = datetime.now(UTC).isoformat(timespec="seconds")
    migrations = latest_migrations()
    dump = folder / DUMPS[kind]
    try:
        _dump_database(kind, dump)
    except (OSError, sqlite3.Error) as exc:
        raise BackupError(f"The database could not be copied: {exc}.") from None
    database = Entry(dump.name, dump.stat().st_size, _sha256_of_path(dump))
    summary = Summary(where=folder, database_bytes=database.size)
    entries: list[Entry] = []
    hashes: dict[str, str] = {}
    store = storage.private_storage()
    for name in stored_names():
        local = folder / FILES / name
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            with store.open(name, "rb") as source:
                size, sha256 = _copy_hashed(source, local)
        except OSError as exc:
            raise BackupError(
                f"The stored file {name} could not be read: {exc.strerror or exc}."
            ) from None
        entries.append(Entry(f"{FILES}/{name}", size, sha256, name))
        hashes[name] = sha256
        summary.files += 1
        summary.file_bytes += size
    summary.warnings = _mismatches(recorded_files(), hashes.get)
    manifest = {
        "format": FORMAT,
        "created_at": created_at,
        "app_version": _app_version(),
        "migrations": migrations,
        "database": {"kind": kind, **database.as_dict()},
        "files": [entry.as_dict() for entry in entries],
    }
    with open(folder / MANIFEST, "w", encoding="utf-8") as out:
        json.dump(manifest, out, indent=1)
        out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    return summary


# --- Restore --------------------------------------------------------------------------------


def read_manifest(source: Path) -> dict[str, Any]:
    path = Path(source) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BackupError(
            f"{source} holds no {MANIFEST}: it is not a snapshot written by "
            "`manage.py backup`, or that backup did not finish."
        ) from None
    except (OSError, ValueError) as exc:
        raise BackupError(f"{path} cannot be read as a snapshot's manifest: {exc}.") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(
            f"{path} is not a snapshot of format {FORMAT} (it says "
            f"{manifest.get('format') if isinstance(manifest, dict) else manifest!r})."
        )
    return manifest


def _entries(manifest: dict[str, Any]) -> tuple[str, Entry, list[Entry]]:
    try:
        database = manifest["database"]
        kind = database["kind"]
        dump = Entry(_safe_name(database["path"]), int(database["size"]), database["sha256"])
        files = [
            Entry(
                _safe_name(item["path"]),
                int(item["size"]),
                item["sha256"],
                _safe_name(item["name"]),
            )
            for item in manifest["files"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise BackupError(f"The manifest is incomplete ({exc}): it cannot be restored.") from None
    return kind, dump, files


def _check_migrations(manifest: dict[str, Any]) -> None:
    """Refuse a snapshot made by a newer version: its migrations are unknown here."""
    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    unknown = [
        f"{app} {name}"
        for app, name in (manifest.get("migrations") or {}).items()
        if (app, name) not in known
    ]
    if unknown:
        raise BackupError(
            "The snapshot was taken by a newer version of the app (these migrations are unknown "
            f"here: {', '.join(unknown)}). Restore it with that version or a later one."
        )


def verify(source: Path, manifest: dict[str, Any]) -> list[str]:
    """A line for every file of the manifest that is missing or differs in size or SHA-256."""
    _, dump, files = _entries(manifest)
    problems = []
    for entry in [dump, *files]:
        path = Path(source) / entry.path
        if not path.is_file():
            problems.append(f"{entry.path} is missing")
        elif path.stat().st_size != entry.size:
            problems.append(
                f"{entry.path} has {path.stat().st_size} bytes, the manifest says {entry.size}"
            )
        elif _sha256_of_path(path) != entry.sha256:
            problems.append(f"{entry.path} differs from its SHA-256 in the manifest")
    return problems


def restore(source: Path, progress: Callable[[str], None] = lambda line: None) -> Summary:
    """Rebuild this (empty) install from the snapshot in ``source``."""
    source = Path(source)
    manifest = read_manifest(source)
    kind, dump, files = _entries(manifest)
    here = database_kind()
    if kind != here:
        raise BackupError(
            f"The snapshot holds a {kind} database and this install uses {here}: restore it "
            f"into a {kind} database."
        )
    _check_migrations(manifest)
    if found := holds_data():
        raise BackupError(
            f"The database already holds data ({', '.join(found)}): a snapshot is restored "
            "into an empty install only. Point DATABASE_URL at a new, empty database."
        )
    problems = verify(source, manifest)
    if problems:
        raise BackupError(
            f"The snapshot is damaged, nothing was restored ({len(problems)} "
            f"file{'s' if len(problems) != 1 else ''}): " + "; ".join(problems) + "."
        )
    store = storage.private_storage()
    taken = [entry.name for entry in files if store.exists(entry.name)]
    if taken:
        raise BackupError(
            "The storage already holds files of the snapshot, nothing was restored: "
            + ", ".join(taken[:10])
            + (f" and {len(taken) - 10} more" if len(taken) > 10 else "")
            + ". Restore into an empty folder or bucket."
        )
    progress(f"Verified the database and {len(files)} files against the manifest.")
    try:
        _load_database(kind, source / dump.path)
    except sqlite3.Error as exc:
        raise BackupError(f"The database could not be restored: {exc}.") from None
    call_command("migrate", interactive=False, verbosity=0)
    progress("Restored the database and applied the migrations.")
    summary = Summary(where=source, database_bytes=dump.size)
    for entry in files:
        with open(source / entry.path, "rb") as handle:
            saved = store.save(entry.name, File(handle, name=entry.name))
        if saved != entry.name:
            raise BackupError(f"The storage stored {entry.name} as {saved}: restore stopped.")
        summary.files += 1
        summary.file_bytes += entry.size
    progress(f"Copied {summary.files} files back to storage.")
    records = recorded_files()
    wrong = _mismatches(
        records, lambda name: storage.sha256_of(name) if store.exists(name) else None
    )
    if wrong:
        raise BackupError(
            "The restored install holds files that are not what the database records; do not "
            "use it (restore another snapshot): " + "; ".join(wrong) + "."
        )
    summary.checked = len(records)
    return summary


@contextlib.contextmanager
def refusals() -> Iterator[None]:
    """Turn what the operating system refuses into a :class:`BackupError` sentence."""
    try:
        yield
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise BackupError(f"{exc.strerror or exc}{where}.") from None
