"""A real standalone Spark cluster for the tests: a master and two workers, each a process of
its own started with the pyspark package's ``spark-class``, on free ports of 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tests.support.processes import free_port, wait_until


def spark_home() -> Path:
    return Path(pyspark.__file__).parent


def spark_env() -> dict[str, str]:
    """The environment of the cluster's processes and of a driver started as a command: the
    executors run the engine in this interpreter."""
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # Small JVMs: two workers and a driver share a loaded two-core machine.
        "SPARK_DAEMON_MEMORY": "256m",
    }


@dataclass
class Cluster:
    master: str
    workdir: Path
    workers: list[subprocess.Popen] = field(default_factory=list)

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers have started (their children running
        ``CoarseGrainedExecutorBackend``)."""
        return [
            pid
            for worker in self.workers
            for pid in children(worker.pid)
            if b"CoarseGrainedExecutorBackend" in _cmdline(pid)
        ]

    def python_workers(self, executor: int) -> list[int]:
        """The Python processes an executor runs tasks in (present once a Python task ran)."""
        return [pid for pid in children(executor) if b"python" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (any of its threads started them)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The command name (field 2) may hold spaces: the parent follows its ")".
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                out.append(int(stat.parent.name))
    return out


def _spark_class(*args: str) -> list[str]:
    return [str(spark_home() / "bin" / "spark-class"), *args]


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        # spark-class execs java; its executors are its children, in its process group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextlib.contextmanager
def standalone_cluster(workdir: Path, workers: int = 2) -> Iterator[Cluster]:
    """A master and ``workers`` workers (one core, 1 GB each); yields the cluster, stops it."""
    if shutil.which("java") is None:
        raise RuntimeError("java is not installed (make test installs it).")
    env = spark_env()
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    cluster = Cluster(master_url, workdir)
    processes: list[subprocess.Popen] = []
    logs = []
    try:
        log = open(workdir / "master.log", "wb")  # noqa: SIM115 - open for the process's life
        logs.append(log)
        master = subprocess.Popen(
            _spark_class(
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        processes.append(master)
        wait_until(
            lambda: (
                b"I have been elected leader" in (workdir / "master.log").read_bytes()
                or master.poll() is not None
            ),
            60,
            "the Spark master",
        )
        if master.poll() is not None:
            raise RuntimeError(f"the Spark master stopped: see {workdir / 'master.log'}")
        for i in range(workers):
            folder = workdir / f"worker-{i + 1}"
            folder.mkdir()
            log = open(workdir / f"worker-{i + 1}.log", "wb")  # noqa: SIM115
            logs.append(log)
            worker = subprocess.Popen(
                _spark_class(
                    "org.apache.spark.deploy.worker.Worker",
                    master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(folder),
                ),
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            processes.append(worker)
            cluster.workers.append(worker)
        wait_until(
            lambda: (workdir / "master.log").read_bytes().count(b"Registering worker") >= workers,
            60,
            "the Spark workers to register",
        )
        time.sleep(0.2)
        yield cluster
    finally:
        for process in reversed(processes):
            _stop(process)
        for log in logs:
            log.close()
