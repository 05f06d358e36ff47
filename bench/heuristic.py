"""The heuristic search against ARX 3.9.2's Lightning, and each model's speed against ARX.

    python bench/heuristic.py [--wide] [--speed] [--seconds 10] [--repeat 3]

``--wide`` (the default when neither is given): the 20-quasi-identifier table of
``bench/generate_wide.py`` (20 000 rows, seeded) is written to a temporary directory; for each
case of :data:`WIDE_CASES` ARX's Lightning (``bench/arx/run.sh ... --heuristic SECONDS``, a fresh
JVM) and the engine's heuristic search (``algorithm="heuristic"``, ``time_limit=SECONDS``) run
on it, and both Loss values (None when a search found no valid transformation in time), the
transformations each checked and whether each proved its result optimal go to
``bench/arx/results/heuristic-wide.json``. The exit status is 1 when the engine's Loss is worse
than ARX's (or it found nothing where ARX found something).

``--speed``: every recorded Adult case of ``bench/arx_compare.py`` (the models the harness
supports: k-anonymity, k-map with a research subset and with both estimators, δ-presence,
weights and level limits) with ARX's optimal search (its own time for the anonymization, a
cold JVM) and the engine's (the fastest of ``--repeat`` runs in one process, so warm), to
``bench/arx/results/speed-models.json``.

Numerical libraries run on one thread (``OPENBLAS_NUM_THREADS=1``, set before numpy loads):
on a loaded machine BLAS threads spinning for a core slow the small products of the search
by an order of magnitude. The figures depend on the machine and its load; the JSON records
the load average at the start.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from arx_compare import CASES, run_arx, run_ours  # noqa: E402
from generate_wide import QUASI_IDENTIFIERS, generate  # noqa: E402

from releases.engine import (  # noqa: E402
    AnonymizationConfig,
    EngineError,
    Hierarchy,
    PrivacyModel,
    anonymize,
)

RESULTS = ROOT / "bench" / "arx" / "results"
RUN = ROOT / "bench" / "arx" / "run.sh"

#: name -> k and suppression limit on the wide table.
WIDE_CASES: dict[str, dict[str, Any]] = {
    "wide-k5": {"k": 5, "suppression_limit": 0.05},
    "wide-k2": {"k": 2, "suppression_limit": 0.1},
}


def _arx_wide(directory: Path, case: dict[str, Any], seconds: float) -> dict[str, Any]:
    args = ["--data", str(directory / "wide.csv"), "--delimiter", ";"]
    for q in QUASI_IDENTIFIERS:
        args += ["--qi", f"{q}={directory / f'wide_hierarchy_{q}.csv'}"]
    args += ["--suppression-limit", str(case["suppression_limit"]), "--k", str(case["k"])]
    args += ["--heuristic", str(seconds)]
    out = subprocess.run(
        [str(RUN), *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    arx = json.loads(out)
    arx["arguments"] = [a.replace(str(directory), "WIDE") for a in arx["arguments"]]
    return arx


def _ours_wide(directory: Path, case: dict[str, Any], seconds: float) -> dict[str, Any]:
    data = pd.read_csv(directory / "wide.csv", sep=";", dtype=str, keep_default_na=False)
    hierarchies = {
        q: Hierarchy.from_arx_csv(directory / f"wide_hierarchy_{q}.csv", attribute=q)
        for q in QUASI_IDENTIFIERS
    }
    config = AnonymizationConfig(
        hierarchies,
        PrivacyModel(k=case["k"], suppression_limit=case["suppression_limit"]),
        algorithm="heuristic",
        time_limit=seconds,
    )
    try:
        result = anonymize(data, config)
    except EngineError as exc:
        return {"loss": None, "error": str(exc)}
    return {
        "levels": result.levels,
        "suppressed": result.suppressed,
        "classes": len(result.classes),
        "loss": result.metrics["loss"],
        "transformations_checked": result.search["steps"],
        "stopped": result.search["stopped"],
        "proven_optimal": result.search["proven_optimal"],
        "search_seconds": result.search["seconds"],
        "seconds": result.seconds,
    }


def wide(seconds: float) -> int:
    worse = 0
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        generate(directory)
        for name, case in WIDE_CASES.items():
            arx = _arx_wide(directory, case, seconds)
            ours = _ours_wide(directory, case, seconds)
            arx_loss = arx.get("loss")
            our_loss = ours.get("loss")
            ok = arx_loss is None or (our_loss is not None and our_loss <= arx_loss + 1e-9)
            worse += not ok
            print(
                f"{name}: ARX Lightning Loss {arx_loss} ({arx.get('transformations_checked')} "
                f"checked), ours {our_loss} ({ours.get('transformations_checked')} checked, "
                f"{ours.get('stopped')}) {'ok' if ok else 'WORSE'}"
            )
            records.append({"case": name, **case, "seconds": seconds, "arx": arx, "ours": ours})
    out = {
        "table": "bench/generate_wide.py (20 000 rows, 20 quasi-identifiers, seed 2025)",
        "machine": _machine(),
        "cases": records,
    }
    (RESULTS / "heuristic-wide.json").write_text(json.dumps(out, indent=2) + "\n")
    return 1 if worse else 0


def speed(repeat: int) -> int:
    rows = []
    for name, case in CASES.items():
        arx = run_arx(name, case)["arx"]
        times = []
        ours: dict[str, Any] = {}
        for _ in range(repeat):
            started = time.perf_counter()
            ours = run_ours(case)
            times.append(time.perf_counter() - started)
        row = {
            "case": name,
            "models": [c["model"] for c in case["criteria"]],
            "arx_seconds": arx["milliseconds"] / 1000,
            "ours_seconds": min(times),
            "ours_engine_seconds": ours["seconds"],
            "same_loss": arx.get("loss") is not None
            and abs(float(arx["loss"]) - float(ours["loss"])) < 1e-9,
        }
        rows.append(row)
        print(
            f"{name}: ARX {row['arx_seconds']:.2f} s, ours {row['ours_seconds']:.2f} s "
            f"(same Loss: {row['same_loss']})"
        )
    out = {"data": "Adult (30 162 rows, 8 quasi-identifiers)", "machine": _machine(), "rows": rows}
    (RESULTS / "speed-models.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


def _machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "recorded": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wide", action="store_true")
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    status = 0
    if args.wide or not args.speed:
        status |= wide(args.seconds)
    if args.speed:
        status |= speed(args.repeat)
    return status


if __name__ == "__main__":
    sys.exit(main())
