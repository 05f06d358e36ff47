"""`manage.py backup` and `manage.py restore`: a snapshot taken while the app runs rebuilds an
empty install on which recipients download the same bytes, the audit trail is the same row for
row and the privacy budgets have the same ε left; a damaged snapshot or a database holding data
is refused, naming what is wrong, before anything is written.

The restores that rebuild an install run the command in a process of its own, with the
environment of another install (its own database and MEDIA_ROOT); the refusals run here.
"""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from releases.models import AuditEvent, ReleaseFile
from tests.support import backup_scenario, processes
from tests.support.postgres import create_database
from tests.support.workflow import approve

pytestmark = pytest.mark.django_db(transaction=True)

SCENARIO = ("-m", "tests.support.backup_scenario")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def media_files(root: Path) -> dict[str, bytes]:
    """Every file under a local storage folder, by its name relative to the folder."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def take_backup(target: Path) -> str:
    out = io.StringIO()
    call_command("backup", str(target), stdout=out, stderr=out)
    return out.getvalue()


@pytest.fixture
def approved(ready_request, officer, recipient):
    return approve(officer, ready_request, recipient)


@pytest.fixture
def snapshot(approved, tmp_path):
    """A snapshot of an install with an approved extract."""
    target = tmp_path / "snapshot"
    take_backup(target)
    return target


def empty_install(settings, tmp_path) -> Path:
    """This test's database emptied and a new MEDIA_ROOT: an install with nothing in it."""
    call_command("flush", interactive=False, verbosity=0)
    settings.MEDIA_ROOT = tmp_path / "new-media"
    return settings.MEDIA_ROOT


# --- Backup ---------------------------------------------------------------------------------


def test_a_snapshot_holds_the_database_and_every_stored_file_with_their_sha256(
    approved, tmp_path, private_media_root
):
    target = tmp_path / "snapshot"
    printed = take_backup(target)
    stored = media_files(private_media_root)
    assert len(stored) >= 4  # the original, its column store, the extract's formats
    manifest = json.loads((target / "manifest.json").read_text())
    listed = {item["name"]: item for item in manifest["files"]}
    assert set(listed) == set(stored)
    for name, data in stored.items():
        copy = target / listed[name]["path"]
        assert copy.read_bytes() == data
        assert listed[name]["size"] == len(data)
        assert listed[name]["sha256"] == hashlib.sha256(data).hexdigest()
    database = manifest["database"]
    assert database["kind"] == "sqlite"
    assert database["sha256"] == sha256(target / database["path"])
    assert database["size"] == (target / database["path"]).stat().st_size
    # The copy is a database of its own holding this install's rows.
    with sqlite3.connect(target / database["path"]) as copy:
        copied = copy.execute("SELECT id, action FROM releases_auditevent ORDER BY id").fetchall()
    assert copied == list(AuditEvent.objects.order_by("id").values_list("id", "action"))
    assert manifest["migrations"]["releases"] == max(
        p.stem for p in (Path(settings.BASE_DIR) / "releases" / "migrations").glob("0*.py")
    )
    assert manifest["format"] == 1 and manifest["created_at"] and manifest["app_version"]
    assert not (tmp_path / "snapshot.partial").exists()
    assert f"{len(stored)} files" in printed and str(target) in printed


def test_a_backup_refuses_a_folder_that_is_not_empty(approved, tmp_path):
    target = tmp_path / "snapshot"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(CommandError, match="is not an empty folder"):
        take_backup(target)
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    # An empty folder is fine.
    empty = tmp_path / "empty"
    empty.mkdir()
    take_backup(empty)
    assert (empty / "manifest.json").exists()


def test_a_backup_that_fails_half_way_leaves_no_snapshot(approved, tmp_path, private_media_root):
    # A stored name whose file is gone by the time it is copied.
    (private_media_root / "extracts" / "zz-gone.csv").symlink_to(tmp_path / "nowhere")
    target = tmp_path / "snapshot"
    with pytest.raises(CommandError, match="extracts/zz-gone.csv could not be read"):
        take_backup(target)
    assert not target.exists() and not (tmp_path / "snapshot.partial").exists()


def test_a_backup_warns_of_a_stored_file_that_differs_from_its_recorded_sha256(
    approved, tmp_path, private_media_root
):
    extract = private_media_root / approved.extract_path
    extract.write_bytes(extract.read_bytes() + b"x")
    printed = take_backup(tmp_path / "snapshot")
    assert f"Warning: {approved.extract_path} (the csv of request #{approved.pk}" in printed
    assert "differs from its recorded SHA-256" in printed


# --- Refused restores -----------------------------------------------------------------------


def test_a_restore_refuses_a_database_that_holds_data(snapshot, settings, tmp_path):
    users = list(User.objects.values_list("username", flat=True))
    settings.MEDIA_ROOT = tmp_path / "new-media"
    with pytest.raises(CommandError, match=r"already holds data \(users, datasets, audit events\)"):
        call_command("restore", str(snapshot))
    assert list(User.objects.values_list("username", flat=True)) == users
    assert not settings.MEDIA_ROOT.exists()


def test_a_damaged_snapshot_is_refused_naming_every_wrong_file_before_anything_is_written(
    snapshot, settings, tmp_path
):
    manifest = json.loads((snapshot / "manifest.json").read_text())
    extract = next(f for f in manifest["files"] if f["name"].endswith(".csv"))
    others = [f for f in manifest["files"] if f is not extract]
    tampered = snapshot / extract["path"]
    data = bytearray(tampered.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one byte, same size
    tampered.write_bytes(bytes(data))
    (snapshot / others[0]["path"]).unlink()
    database = snapshot / manifest["database"]["path"]
    database.write_bytes(database.read_bytes() + b"\0")
    media = empty_install(settings, tmp_path)
    with pytest.raises(CommandError) as refused:
        call_command("restore", str(snapshot))
    message = str(refused.value)
    assert "nothing was restored (3 files)" in message
    assert f"{extract['path']} differs from its SHA-256 in the manifest" in message
    assert f"{others[0]['path']} is missing" in message
    assert f"database.sqlite3 has {database.stat().st_size} bytes" in message
    assert not User.objects.exists() and not AuditEvent.objects.exists()
    assert not media.exists()


def test_a_snapshot_of_a_newer_version_is_refused(snapshot, settings, tmp_path):
    path = snapshot / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["migrations"]["releases"] = "9999_from_the_future"
    path.write_text(json.dumps(manifest))
    empty_install(settings, tmp_path)
    with pytest.raises(CommandError, match="releases 9999_from_the_future"):
        call_command("restore", str(snapshot))
    assert not User.objects.exists()


def test_a_folder_without_a_manifest_is_not_a_snapshot(tmp_path):
    with pytest.raises(CommandError, match="holds no manifest.json"):
        call_command("restore", str(tmp_path))


# --- Restores into another install (a process of its own) -----------------------------------


def other_install(tmp_path: Path, database_url: str, name: str) -> dict:
    folder = tmp_path / name
    folder.mkdir()
    return processes.app_environment(
        database_url, "redis://127.0.0.1:1/0", folder / "media", folder
    )


def run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=processes.REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def observed(env: dict) -> dict:
    done = run(env, *SCENARIO, "observe")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def epsilons(seen: dict) -> dict[str, tuple[Decimal, Decimal]]:
    return {name: (Decimal(e), Decimal(d)) for name, (e, d) in seen["remaining"].items()}


def assert_same_install(original: dict, restored: dict, ids: dict) -> None:
    assert restored["audit"] == original["audit"]
    column = [f.attname for f in AuditEvent._meta.concrete_fields].index("action")
    actions = {row[column] for row in original["audit"]}
    assert {"review", "revoke", "download", "budget_spend"} <= actions, actions
    assert restored["remaining"] == original["remaining"]
    # ε 2 set, two queries of ε 0.25 spent.
    assert epsilons(original) == {"people.csv": (Decimal("1.5"), Decimal(0))}
    assert restored["downloads"] == original["downloads"]
    for key in ("approved", "statistics"):
        csv = ReleaseFile.objects.get(request_id=ids[key], format="csv")
        assert original["downloads"][f"{ids[key]} recipient"] == csv.sha256
    assert original["downloads"][f"{ids['revoked']} recipient"].startswith("refused")


@pytest.mark.process
def test_a_restore_rebuilds_an_empty_install_that_serves_the_same_bytes(
    steward, officer, recipient, tmp_path, private_media_root
):
    ids = backup_scenario.build(steward, officer, recipient)
    snapshot = tmp_path / "snapshot"
    take_backup(snapshot)
    original = backup_scenario.observe()
    env = other_install(tmp_path, f"sqlite:///{tmp_path / 'restored' / 'db.sqlite3'}", "restored")
    done = run(env, "manage.py", "restore", str(snapshot))
    assert done.returncode == 0, done.stderr
    assert "every one of the" in done.stdout and "matches its SHA-256" in done.stdout
    assert media_files(Path(env["MEDIA_ROOT"])) == media_files(private_media_root)
    assert_same_install(original, observed(env), ids)
    # Restoring again onto the install it made is refused, naming why.
    again = run(env, "manage.py", "restore", str(snapshot))
    assert again.returncode == 1
    assert "CommandError: The database already holds data" in again.stderr
    assert "Traceback" not in again.stderr


@pytest.mark.process
def test_a_restore_refuses_an_install_whose_files_differ_from_what_the_database_records(
    approved, tmp_path, private_media_root
):
    extract = private_media_root / approved.extract_path
    extract.write_bytes(extract.read_bytes()[:-1])
    snapshot = tmp_path / "snapshot"
    take_backup(snapshot)
    env = other_install(tmp_path, f"sqlite:///{tmp_path / 'restored' / 'db.sqlite3'}", "restored")
    done = run(env, "manage.py", "restore", str(snapshot))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"{approved.extract_path} (the csv of request #{approved.pk} round 1)" in done.stderr
    assert f"{approved.extract_path} (the extract of request" not in done.stderr  # named once
    assert "do not use it" in done.stderr


@pytest.mark.postgres
def test_a_postgres_install_is_backed_up_with_pg_dump_and_restored_with_pg_restore(
    postgres_server, tmp_path
):
    source = other_install(tmp_path, create_database(postgres_server, "backup_source"), "source")
    target = other_install(tmp_path, create_database(postgres_server, "backup_target"), "target")
    processes.manage(source, "migrate", "--noinput")
    # The target was migrated too (its tables exist, empty): the restore replaces them.
    processes.manage(target, "migrate", "--noinput")
    ids = json.loads(processes.python(source, *SCENARIO, "demo").strip().splitlines()[-1])
    snapshot = tmp_path / "snapshot"
    done = run(source, "manage.py", "backup", str(snapshot))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((snapshot / "manifest.json").read_text())
    assert manifest["database"]["kind"] == "postgresql"
    dump = snapshot / manifest["database"]["path"]
    assert dump.read_bytes()[:5] == b"PGDMP"  # pg_dump's custom format
    original = observed(source)
    done = run(target, "manage.py", "restore", str(snapshot))
    assert done.returncode == 0, done.stderr
    restored = observed(target)
    with psycopg.connect(
        target["DATABASE_URL"].replace("postgres://", "postgresql://")
    ) as connection:
        files = dict(
            connection.execute(
                "SELECT request_id, sha256 FROM releases_releasefile WHERE format = 'csv'"
            ).fetchall()
        )
    for key in ("approved", "statistics"):
        assert original["downloads"][f"{ids[key]} recipient"] == files[ids[key]]
    assert restored["audit"] == original["audit"]
    assert restored["remaining"] == original["remaining"]
    assert epsilons(original) == {"people.csv": (Decimal("1.5"), Decimal(0))}
    assert restored["downloads"] == original["downloads"]
    assert media_files(Path(target["MEDIA_ROOT"])) == media_files(Path(source["MEDIA_ROOT"]))
    # A snapshot of PostgreSQL is not restored into SQLite.
    sqlite = other_install(tmp_path, f"sqlite:///{tmp_path / 'lite.sqlite3'}", "lite")
    done = run(sqlite, "manage.py", "restore", str(snapshot))
    assert done.returncode == 1 and "holds a postgresql database" in done.stderr
