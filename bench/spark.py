"""The command line on Spark: ``python bench/spark.py [--rows N ...] [--spark MASTER | --cluster]``.

Runs ``manage.py anonymize ROWS.csv --out ... --qi (8 Adult quasi-identifiers with their
hierarchies) --k 5 --suppression-limit 0.05 --spark MASTER`` in a subprocess on adult-like rows
(``bench/generate.py``, seeded) and prints, per size, the wall time, rows per second and the
driver's peak memory: the resident set of the driver's whole process tree (the Python process
and the JVM it starts; with ``local[N]`` the executors run inside that JVM too), sampled every
0.2 s. ``--in-process`` adds the same command without ``--spark`` for comparison.
``--cluster`` starts a local standalone cluster first (a master and two one-core workers on
127.0.0.1, as ``make run-spark`` and the tests do): the executors are then separate processes
and the driver's figure is the driver alone.

On a shared machine the times are upper bounds; the memory figures are reliable.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from common import anonymize_command  # noqa: E402
from generate import generate  # noqa: E402

from releases.engine.memory import status_kb  # noqa: E402
from tests.support.spark import children, spark_env, standalone_cluster  # noqa: E402


def _rss_kb(pid: int) -> int:
    return status_kb("VmRSS", pid) or 0


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children(current))
    return out


def run_measured(command: list[str], env: dict[str, str]) -> tuple[float, float, int, str]:
    """(wall seconds, peak MB of the process tree, exit status, stderr) of ``command``."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, sum(_rss_kb(p) for p in _tree(proc.pid)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, stderr = proc.communicate()
    done.set()
    sampler.join()
    return time.perf_counter() - started, peak / 1024, proc.returncode, stderr.decode()


@contextlib.contextmanager
def master_for(args: argparse.Namespace, tmp: Path) -> Iterator[str]:
    if not args.cluster:
        yield args.spark
        return
    folder = tmp / "cluster"
    folder.mkdir()
    with standalone_cluster(folder) as cluster:
        yield cluster.master


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark `manage.py anonymize --spark`.")
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--spark", default="local[2]", metavar="MASTER")
    parser.add_argument("--cluster", action="store_true", help="start a local cluster first")
    parser.add_argument("--in-process", action="store_true", help="also run without Spark")
    parser.add_argument("--tmp", type=Path, help="folder for the inputs and outputs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.tmp) as name:
        tmp = Path(name)
        env = spark_env()
        with master_for(args, tmp) as master:
            print(f"manage.py anonymize --spark {master}: 8 QIs, k=5, 5 % suppression")
            print(f"{'rows':>12} {'where':>24} {'wall s':>8} {'rows/s':>10} {'peak MB':>8}")
            for rows in args.rows:
                source = generate(rows, tmp / f"rows-{rows}.csv")
                out = tmp / "out.csv"
                command = anonymize_command(source, out, "--seed", "1")
                runs = [("spark " + master, [*command, "--spark", master])]
                if args.in_process:
                    runs.append(("in process", command))
                for label, cmd in runs:
                    wall, peak, status, stderr = run_measured(cmd, env)
                    if status != 0:
                        print(f"  {label} failed (exit {status}): {stderr.strip()[-500:]}")
                        sys.exit(1)
                    print(
                        f"{rows:>12,} {label[:24]:>24} {wall:>8.1f} {rows / wall:>10,.0f} "
                        f"{peak:>8.0f}",
                        flush=True,
                    )
                source.unlink()


if __name__ == "__main__":
    main()
