"""A throwaway PostgreSQL cluster in a temporary folder, for tests whose behaviour depends on it."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.processes import free_port


def _binary(name: str) -> str:
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None
    )
    if not found:
        raise RuntimeError(
            f"PostgreSQL's {name} is not installed (Debian: apt-get install postgresql)."
        )
    return found


def _as_postgres(command: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root: run its tools as the postgres user then.
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextlib.contextmanager
def postgres_cluster() -> Iterator[str]:
    """Start a cluster on a free port; yield a DATABASE_URL of an empty database."""
    workdir = Path(tempfile.mkdtemp(prefix="anonymizer-pg-"))
    data, sockets = workdir / "data", workdir / "sockets"
    data.mkdir()
    sockets.mkdir()
    if os.geteuid() == 0:
        postgres = pwd.getpwnam("postgres")
        for path in (workdir, data, sockets):
            os.chown(path, postgres.pw_uid, postgres.pw_gid)
    port = free_port()
    pg_ctl = _binary("pg_ctl")
    subprocess.run(
        _as_postgres(
            [
                _binary("initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ]
        ),
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        _as_postgres(
            [pg_ctl, "-D", str(data), "-o", options, "-l", str(workdir / "log"), "-w", "start"]
        ),
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            _as_postgres(
                [
                    _binary("psql"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-U",
                    "postgres",
                    "-c",
                    "CREATE DATABASE anonymizer",
                ]
            ),
            check=True,
            capture_output=True,
        )
        yield f"postgres://postgres@127.0.0.1:{port}/anonymizer"
    finally:
        subprocess.run(
            _as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(workdir, ignore_errors=True)


def create_database(server_url: str, name: str) -> str:
    """A new empty database ``name`` in the cluster of ``server_url``; its DATABASE_URL."""
    import psycopg

    with psycopg.connect(server_url.replace("postgres://", "postgresql://"), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + "/" + name
