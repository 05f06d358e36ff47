"""Start real redis-server, Celery worker and web server processes for integration tests."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


@contextlib.contextmanager
def producer_for(url: str) -> Iterator[None]:
    """This test process sends its Celery tasks to ``url`` for the block.

    ``Celery.close()`` forgets the connection pool but not the producer pool built on it, whose
    connections would still point at the broker used before (a test that ran earlier)."""
    from anonymizer_site.celery import app

    def drop() -> None:
        app.close()
        app.amqp._producer_pool = None

    previous = app.conf.broker_url
    drop()
    app.conf.broker_url = url
    try:
        yield
    finally:
        app.conf.broker_url = previous
        drop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"Timed out after {timeout:.0f}s waiting for {what}.")


def _stop(process: subprocess.Popen, timeout: float = 10) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def redis_server(workdir: Path, port: int | None = None, persistent: bool = False) -> Iterator[str]:
    """A throwaway redis-server on a free port (or ``port``); yields its URL.

    ``persistent``: with an append-only file in ``workdir``, as ``make run`` starts it, so a
    restart on the same port and folder keeps the queue."""
    executable = shutil.which("redis-server")
    if executable is None:
        raise RuntimeError("redis-server is not installed (make test installs it).")
    port = port or free_port()
    log = open(  # noqa: SIM115 - open for the life of the process
        workdir / "redis.log", "wb"
    )
    process = subprocess.Popen(
        [
            executable,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if persistent else "no",
            "--appendfsync",
            "always",
            "--dir",
            str(workdir),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def answers() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    try:
        wait_until(answers, 15, "redis-server")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(process)
        log.close()


class RestartableRedis:
    """A persistent redis-server (append-only file) on a fixed port that can be stopped and
    started again with its data (the queue survives a restart)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._running: contextlib.ExitStack | None = None

    def start(self) -> None:
        stack = contextlib.ExitStack()
        stack.enter_context(redis_server(self.folder, self.port, persistent=True))
        self._running = stack

    def stop(self) -> None:
        if self._running is not None:
            self._running.close()
            self._running = None


def app_environment(database_url: str, redis_url: str, media_root: Path, var_dir: Path) -> dict:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="anonymizer_site.settings",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        MEDIA_ROOT=str(media_root),
        VAR_DIR=str(var_dir),
        DEBUG="1",
        CELERY_TASK_ALWAYS_EAGER="0",
        PYTHONUNBUFFERED="1",
    )
    return env


@contextlib.contextmanager
def celery_worker(
    env: dict, workdir: Path, pool: str = "solo", beat: bool = False, name: str = "worker"
) -> Iterator[subprocess.Popen]:
    """A real Celery worker process; yields once it is ready to take tasks.

    ``pool="prefork"`` runs tasks in a child process (one), as production does, so a test can
    kill that child; ``beat=True`` also runs Celery beat (the sweeper) in the worker."""
    log_path = workdir / f"{name}.log"
    log = open(  # noqa: SIM115 - open for the life of the process
        log_path, "wb"
    )
    process = subprocess.Popen(
        [
            str(VENV_BIN / "celery"),
            "-A",
            "anonymizer_site",
            "worker",
            "--loglevel=INFO",
            "--concurrency=1",
            f"--pool={pool}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--hostname={name}@%h",
            *(["-B", f"--schedule={workdir / (name + '-beat-schedule')}"] if beat else []),
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(
            lambda: process.poll() is not None or b"ready." in log_path.read_bytes(),
            60,
            "the Celery worker",
        )
        if process.poll() is not None:
            raise RuntimeError("The Celery worker exited:\n" + log_path.read_text())
        yield process
    finally:
        _stop(process)
        log.close()


@contextlib.contextmanager
def web_server(env: dict, workdir: Path) -> Iterator[str]:
    """The Django development server in a process of its own; yields its base URL."""
    port = free_port()
    log_path = workdir / "web.log"
    log = open(  # noqa: SIM115 - open for the life of the process
        log_path, "wb"
    )
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError("The web server exited:\n" + log_path.read_text())
        try:
            with urllib.request.urlopen(url + "/accounts/login/", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        wait_until(answers, 60, "the web server")
        yield url
    finally:
        _stop(process)
        log.close()


def manage(env: dict, *args: str) -> str:
    return python(env, "manage.py", *args)


def python(env: dict, *args: str) -> str:
    """Run this Python in the repository with ``env``; its standard output."""
    completed = subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"python {' '.join(args)} failed:\n{completed.stderr}")
    return completed.stdout


@contextlib.contextmanager
def app_stack(
    workdir: Path, *, seed: Sequence[Sequence[str]] = (), **settings: str
) -> Iterator[dict]:
    """The whole app on real processes: a migrated SQLite database with the demo accounts,
    redis-server, a Celery worker and the web server. Extra environment settings apply to all.

    ``seed``: Python command lines run with the app's environment before the worker and the
    web server start (``("-m", "tests.support.a11y_scenario")``); their outputs are the
    stack's ``"seeded"``, in order.
    """
    with redis_server(workdir) as redis_url:
        env = app_environment(
            database_url=f"sqlite:///{workdir / 'db.sqlite3'}",
            redis_url=redis_url,
            media_root=workdir / "media",
            var_dir=workdir,
        )
        env.update(settings)
        manage(env, "migrate", "--noinput")
        manage(env, "seed_demo")
        seeded = [python(env, *argv) for argv in seed]
        accounts = json.loads((workdir / "demo-accounts.txt").read_text())
        with celery_worker(env, workdir), web_server(env, workdir) as url:
            yield {"url": url, "accounts": accounts, "workdir": workdir, "seeded": seeded}


def child_pids(pid: int) -> list[int]:
    """The direct children of a process (a prefork worker's pool processes)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]
