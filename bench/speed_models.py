"""Each privacy model's speed against ARX 3.9.2 on a 1M-row Adult-like table.

    python bench/speed_models.py [--rows 1000000] [--repeat 2] [--timeout 600]
                                 [--arx-heap 6g] [--case NAME ...] [--keep DIR]

A seeded Adult-like table (``bench/generate.py``, seed 2024) of ``--rows`` rows is written to a
temporary directory (``--keep DIR`` keeps it, and reuses a table already there), with the Adult
hierarchies of ``tests/data/adult/`` and a research subset (the rows for which
``numpy.random.default_rng(25).random(rows) < 0.2``, for k-map counted in the population and
δ-presence). For every case of :data:`CASES` (the models ARX's harness takes), each in a fresh
process, ``--repeat`` times, keeping the faster run:

* ours: ``python manage.py anonymize INPUT --out OUT.csv --report REPORT.json ...``, the command
  as a user types it (reading the CSV, the search, writing the extract and the report): its wall
  time and peak RSS (``os.wait4``), and the search's own time from the report;
* ARX: ``bench/arx/run.sh`` (or ``run-safepub.sh``) in a fresh JVM with ``-Xmx`` of
  ``--arx-heap``, writing its released table too (``--output``; SafePub's harness writes none):
  ARX's own time for the anonymization (``ARXResult.getTime()``), the wall time of the JVM
  (start, reading, search, writing) and its peak RSS.

A run that takes longer than ``--timeout`` seconds is stopped and recorded as such. Results go to
``bench/arx/results/speed-models-1m.json`` (with the load average before and after, the heap
and the machine). ``ARX_CACHE`` is honoured (the shared build of ``bench/arx/run.sh``; point it
at a private copy when another process may be rebuilding the harness).

``--profile NAME`` instead runs one case of ours once under cProfile (in-process, through
:func:`releases.engine.cli.run`) and prints the 25 functions with the most cumulative time.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import pstats  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import QIS, hierarchy_file  # noqa: E402
from generate import SEED, generate  # noqa: E402

from releases.engine import cli  # noqa: E402

RESULTS = ROOT / "bench" / "arx" / "results"
RUN = ROOT / "bench" / "arx" / "run.sh"
RUN_SAFEPUB = ROOT / "bench" / "arx" / "run-safepub.sh"

#: Quasi-identifiers of the cases with a sensitive attribute (occupation).
QIS_SENSITIVE = [q for q in QIS if q != "occupation"]
SUBSET_SEED = 25
SUBSET_FRACTION = 0.2

#: name -> quasi-identifiers, suppression limit, the harness's options and ours (the same
#: model in each; "SUBSET" stands for the research subset's file).
CASES: dict[str, dict[str, Any]] = {
    "k-anonymity": {"qis": QIS, "arx": ["--k", "5"], "ours": ["--k", "5"]},
    "l-diversity-distinct": {
        "qis": QIS_SENSITIVE,
        "arx": ["--sensitive", "occupation", "--l", "3"],
        "ours": ["--sensitive", "occupation", "--l", "3", "--l-variant", "distinct"],
    },
    "l-diversity-entropy": {
        "qis": QIS_SENSITIVE,
        "arx": ["--sensitive", "occupation", "--l", "3", "--l-variant", "entropy"],
        "ours": ["--sensitive", "occupation", "--l", "3", "--l-variant", "entropy"],
    },
    "l-diversity-recursive": {
        "qis": QIS_SENSITIVE,
        "arx": ["--sensitive", "occupation", "--l", "3", "--l-variant", "recursive", "--c", "4"],
        "ours": ["--sensitive", "occupation", "--l", "3", "--l-variant", "recursive", "--c", "4"],
    },
    "t-closeness-equal": {
        "qis": QIS_SENSITIVE,
        "arx": ["--sensitive", "occupation", "--t", "0.2"],
        "ours": ["--sensitive", "occupation", "--t", "0.2", "--t-distance", "equal"],
    },
    "k-map-estimated": {
        "qis": QIS,
        "arx": ["--k-map", "50", "--estimator", "poisson", "--significance", "0.01"]
        + ["--population-size", "10000000"],
        "ours": ["--k-map", "50", "--k-map-estimator", "poisson", "--significance", "0.01"]
        + ["--population-size", "10000000"],
    },
    "k-map-subset": {
        "qis": QIS,
        "arx": ["--k-map", "10", "--subset", "SUBSET"],
        "ours": ["--k-map", "10", "--research-subset", "SUBSET"],
    },
    "delta-presence": {
        "qis": QIS,
        "arx": ["--delta-presence", "0.0,0.3", "--subset", "SUBSET"],
        "ours": ["--delta-presence", "0.0,0.3", "--research-subset", "SUBSET"],
    },
    "weights-and-level-limits": {
        "qis": QIS,
        "suppression_limit": 0.02,
        "arx": ["--k", "10", "--weights", "age=0.2,marital-status=1.0,sex=1.0,salary-class=0.8"]
        + ["--level-limits", "education=1:2,native-country=0:1"],
        "ours": ["--k", "10", "--weights", "age=0.2,marital-status=1.0,sex=1.0,salary-class=0.8"]
        + ["--level-limits", "education=1:2,native-country=0:1"],
    },
    "microaggregation-mean": {
        "qis": QIS,
        "arx": ["--k", "5", "--microaggregate", "age=mean"],
        "ours": ["--k", "5", "--microaggregate", "age=mean"],
    },
    "heuristic": {
        "qis": QIS,
        "arx": ["--k", "5", "--heuristic", "30", "--heuristic-steps", "300"],
        "ours": ["--k", "5", "--algorithm", "heuristic", "--time-limit", "30"]
        + ["--step-limit", "300"],
    },
    "safepub-data-independent": {
        "qis": QIS,
        "safepub": True,
        "arx": ["--epsilon", "1", "--delta", "1e-7", "--degree", "medium"],
        "ours": ["--safepub", "1,1e-7", "--safepub-search-budget", "0"]
        + ["--safepub-degree", "medium", "--safepub-seed", "1"],
    },
}


def prepare(directory: Path, rows: int) -> dict[str, Path]:
    """The table and its research subset in ``directory`` (reused when already there)."""
    table = directory / f"adult-{rows}.csv"
    subset = directory / f"adult-{rows}-subset.csv"
    if not table.exists():
        generate(rows, table, SEED)
    if not subset.exists():
        data = pd.read_csv(table, sep=";", dtype=str, keep_default_na=False)
        chosen = np.random.default_rng(SUBSET_SEED).random(len(data)) < SUBSET_FRACTION
        data[chosen].to_csv(subset, sep=";", index=False, lineterminator="\n")
    return {"table": table, "subset": subset}


def _run(command: list[str], timeout: float) -> dict[str, Any]:
    """Run ``command``; wall time, peak RSS (MB), exit status and stdout (a temporary file)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=err, start_new_session=True
        )
        deadline = started + timeout
        status = None
        rusage = None
        while True:
            pid, raw, rusage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(raw)
                break
            if time.perf_counter() > deadline:
                os.killpg(process.pid, signal.SIGKILL)
                _, raw, rusage = os.wait4(process.pid, 0)
                break
            time.sleep(0.05)
        process.returncode = status if status is not None else -9
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        return {
            "wall_seconds": round(wall, 3),
            "peak_rss_mb": round(rusage.ru_maxrss / 1024, 1),
            "status": status,
            "timed_out": status is None,
            "stdout": out.read().decode("utf-8", "replace"),
            "stderr": err.read().decode("utf-8", "replace")[-2000:],
        }


def _replace(args: list[str], files: dict[str, Path]) -> list[str]:
    return [str(files["subset"]) if a == "SUBSET" else a for a in args]


def ours_command(case: dict[str, Any], files: dict[str, Path], out: Path) -> list[str]:
    args = [sys.executable, "manage.py", "anonymize", str(files["table"])]
    args += ["--out", str(out / "out.csv"), "--report", str(out / "report.json")]
    for q in case["qis"]:
        args += ["--qi", f"{q}={hierarchy_file(q)}"]
    args += ["--suppression-limit", str(case.get("suppression_limit", 0.05))]
    if case.get("safepub"):
        # SafePub sets its own suppression (every class below k).
        args = args[:-2]
    return args + _replace(case["ours"], files)


def arx_command(case: dict[str, Any], files: dict[str, Path], out: Path) -> list[str]:
    args = ["--data", str(files["table"]), "--delimiter", ";"]
    for q in case["qis"]:
        args += ["--qi", f"{q}={hierarchy_file(q)}"]
    if case.get("safepub"):
        return [str(RUN_SAFEPUB), *args, *case["arx"]]
    args += ["--suppression-limit", str(case.get("suppression_limit", 0.05))]
    args += ["--output", str(out / "arx-out.csv")]
    return [str(RUN), *args, *_replace(case["arx"], files)]


def run_ours(case: dict[str, Any], files: dict[str, Path], timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        run = _run(ours_command(case, files, Path(tmp)), timeout)
        report_path = Path(tmp) / "report.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
    row: dict[str, Any] = {
        k: run[k] for k in ("wall_seconds", "peak_rss_mb", "status", "timed_out")
    }
    if run["status"] not in (0, None):
        row["error"] = run["stderr"].strip().splitlines()[-1:]
    if report:
        row["engine_seconds"] = report.get("seconds")
        row["search"] = {
            k: v
            for k, v in (report.get("search") or {}).items()
            if k in ("seconds", "steps", "stopped", "proven_optimal")
        }
        row["levels"] = report.get("levels")
        row["suppressed"] = report.get("suppressed")
        row["loss"] = (report.get("metrics") or {}).get("loss")
    return row


def run_arx(case: dict[str, Any], files: dict[str, Path], timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        run = _run(arx_command(case, files, Path(tmp)), timeout)
    row: dict[str, Any] = {
        k: run[k] for k in ("wall_seconds", "peak_rss_mb", "status", "timed_out")
    }
    if run["status"] != 0:
        if run["status"] is not None:
            row["error"] = run["stderr"].strip().splitlines()[-3:]
        return row
    printed = json.loads(run["stdout"])
    result = printed["runs"][0] if case.get("safepub") else printed
    row["search_seconds"] = result["milliseconds"] / 1000
    row["levels"] = result.get("levels")
    row["suppressed"] = result.get("suppressed")
    row["loss"] = result.get("loss")
    if "optimum_found" in result:
        row["optimum_found"] = result["optimum_found"]
    return row


def _faster(runs: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in runs if r.get("status") == 0]
    best = min(done, key=lambda r: r["wall_seconds"]) if done else runs[-1]
    return {**best, "wall_seconds_each": [r["wall_seconds"] for r in runs]}


def _machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "recorded": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def bench(files: dict[str, Path], names: list[str], args: argparse.Namespace) -> int:
    os.environ["ARX_JAVA_OPTS"] = f"-Xmx{args.arx_heap}"
    load_before = _machine()
    started = time.perf_counter()
    with open(files["table"], encoding="utf-8") as table:
        n = sum(1 for _ in table) - 1
    rows: list[dict[str, Any]] = []
    for name in names:
        case = CASES[name]
        ours_runs, arx_runs = [], []
        for _ in range(args.repeat):
            arx_runs.append(run_arx(case, files, args.timeout))
            ours_runs.append(run_ours(case, files, args.timeout))
        ours, arx = _faster(ours_runs), _faster(arx_runs)
        # SafePub's data-independent release draws its own sample in each tool: Loss differs.
        same = (
            not case.get("safepub")
            and ours.get("loss") is not None
            and arx.get("loss") is not None
            and abs(float(ours["loss"]) - float(arx["loss"])) < 1e-9
        )
        row = {"case": name, "ours": ours, "arx": arx, "same_loss": same}
        if ours.get("status") == 0 and arx.get("status") == 0:
            row["ours_wall_over_arx_wall"] = round(ours["wall_seconds"] / arx["wall_seconds"], 2)
        rows.append(row)
        print(
            f"{name}: ours {ours['wall_seconds']:.1f} s wall ({ours.get('engine_seconds')} s "
            f"engine, {ours['peak_rss_mb']:.0f} MB, status {ours['status']}); ARX "
            f"{arx['wall_seconds']:.1f} s wall ({arx.get('search_seconds')} s search, "
            f"{arx['peak_rss_mb']:.0f} MB, status {arx['status']}); same Loss {same}",
            flush=True,
        )
        # Written after every case, so that a bench stopped early keeps what it measured.
        out = {
            "data": f"bench/generate.py {n} rows (seed {SEED}), Adult hierarchies; research "
            f"subset default_rng({SUBSET_SEED}).random(rows) < {SUBSET_FRACTION}",
            "arx_java_opts": os.environ["ARX_JAVA_OPTS"],
            "repeat": args.repeat,
            "timeout_seconds": args.timeout,
            "machine": load_before,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "bench_seconds": round(time.perf_counter() - started, 1),
            "rows": rows,
        }
        args.output.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    return 0


def profile(files: dict[str, Path], name: str) -> None:
    """Ours on one case under cProfile, in-process (the same code path as the command)."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = ours_command(CASES[name], files, Path(tmp))[3:]
        profiler = cProfile.Profile()
        profiler.enable()
        status = cli.run(argv, stdout=sys.stdout, stderr=sys.stderr, prog="anonymize")
        profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
    print(f"status {status}\n{text.getvalue()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--arx-heap", default="6g")
    parser.add_argument("--case", action="append", choices=list(CASES), default=[])
    parser.add_argument("--keep", type=Path, help="directory for the table (kept and reused)")
    parser.add_argument("--profile", choices=list(CASES))
    parser.add_argument("--output", type=Path, default=RESULTS / "speed-models-1m.json")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        files = prepare(args.keep, args.rows)
        if args.profile:
            profile(files, args.profile)
            return 0
        return bench(files, args.case or list(CASES), args)
    with tempfile.TemporaryDirectory() as tmp:
        files = prepare(Path(tmp), args.rows)
        if args.profile:
            profile(files, args.profile)
            return 0
        return bench(files, args.case or list(CASES), args)


if __name__ == "__main__":
    sys.exit(main())
