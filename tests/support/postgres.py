"""A throwaway PostgreSQL cluster in a temporary folder, for tests whose behaviour depends on it
(and for the benchmarks, which also stop and start it: ``Cluster``)."""

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


class Cluster:
    """A cluster in a temporary folder of its own, on a port chosen at once (``url`` is known
    before it starts): :meth:`create` makes and starts it with an empty database
    ``anonymizer``, :meth:`stop` and :meth:`start` stop it (every connection is ended) and
    start it again with its data, :meth:`destroy` stops it and removes the folder."""

    def __init__(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="anonymizer-pg-"))
        self.data, self.sockets = self.workdir / "data", self.workdir / "sockets"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/anonymizer"

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        subprocess.run(
            _as_postgres([_binary("pg_ctl"), "-D", str(self.data), *args]),
            check=check,
            capture_output=True,
        )

    def create(self) -> None:
        self.data.mkdir()
        self.sockets.mkdir()
        if os.geteuid() == 0:
            postgres = pwd.getpwnam("postgres")
            for path in (self.workdir, self.data, self.sockets):
                os.chown(path, postgres.pw_uid, postgres.pw_gid)
        subprocess.run(
            _as_postgres(
                [
                    _binary("initdb"),
                    "-D",
                    str(self.data),
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
        self.start()
        subprocess.run(
            _as_postgres(
                [
                    _binary("psql"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-U",
                    "postgres",
                    "-c",
                    "CREATE DATABASE anonymizer",
                ]
            ),
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg_ctl("-o", options, "-l", str(self.workdir / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` ends every connection and shuts down cleanly,
        ``immediate`` as a crash would."""
        self._pg_ctl("-m", mode, "-w", "stop", check=False)

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.workdir, ignore_errors=True)


@contextlib.contextmanager
def postgres_cluster() -> Iterator[str]:
    """Start a cluster on a free port; yield a DATABASE_URL of an empty database."""
    cluster = Cluster()
    try:
        cluster.create()
        yield cluster.url
    finally:
        cluster.destroy()


def create_database(server_url: str, name: str) -> str:
    """A new empty database ``name`` in the cluster of ``server_url``; its DATABASE_URL."""
    import psycopg

    with psycopg.connect(server_url.replace("postgres://", "postgresql://"), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + "/" + name
