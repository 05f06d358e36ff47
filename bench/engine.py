"""Engine benchmark: ``python bench/engine.py``.

Each case runs in a fresh Python process (``python bench/engine.py --case NAME``), which
reports its own timings and peak memory (``ru_maxrss``) as one JSON line:

* ``adult-optimal``  - Adult (30,162 rows, 8 quasi-identifiers with ARX's hierarchies), k=5,
  suppression limit 0.05, optimal full-domain search;
* ``million``        - 1,000,000 adult-like rows (each a random Adult row whose age and
  native-country come from two other random rows; seed 2024), same configuration;
* ``adult-mondrian`` - Adult, k=5, Mondrian;
* ``adult-anjana``   - the same Adult configuration with the PyPI package ``anjana``
  (``anjana.anonymity.k_anonymity``, suppression 5 %), for the ratio anjana / ours.

Figures: ``wall`` = the child process from start to exit (interpreter start, imports, reading
the CSV, anonymizing); ``anonymize`` = the ``anonymize()`` call; ``search`` = the lattice
search inside it (``releases.engine.api.search``, timed by a wrapper); ``peak`` = the child's
``ru_maxrss``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT / "tests" / "data" / "adult"
QIS = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "occupation",
    "race",
    "salary-class",
    "sex",
]
K = 5
SUPPRESSION = 0.05
MILLION = 1_000_000
SEED = 2024
TARGETS = {
    "adult-optimal": "search < 0.5 s",
    "million": "< 5 s end to end (fresh process), peak < 1.5 GB",
    "adult-mondrian": "anonymize < 1 s",
}


def _met(case: str, r: dict) -> bool:
    if case == "adult-optimal":
        return r["search"] < 0.5
    if case == "million":
        return r["wall"] < 5 and r["peak_mb"] < 1536
    return r["anonymize"] < 1


def _peak_mb() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _read(path: Path):
    import pandas as pd

    return pd.read_csv(path, sep=";", dtype=str, keep_default_na=False)


def _config(algorithm: str):
    from releases.engine.hierarchy import Hierarchy
    from releases.engine.types import AnonymizationConfig, PrivacyModel

    hierarchies = {
        q: Hierarchy.from_arx_csv(ADULT / f"adult_hierarchy_{q}.csv", attribute=q) for q in QIS
    }
    return AnonymizationConfig(
        quasi_identifiers=hierarchies,
        model=PrivacyModel(k=K, suppression_limit=SUPPRESSION),
        algorithm=algorithm,  # type: ignore[arg-type]
    )


def _child_engine(csv_path: Path, algorithm: str) -> dict:
    sys.path.insert(0, str(ROOT))
    import releases.engine.api as api

    searched = {"seconds": 0.0}
    if hasattr(api, "search"):
        inner = api.search

        def timed_search(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                searched["seconds"] += time.perf_counter() - t0

        api.search = timed_search

    t0 = time.perf_counter()
    data = _read(csv_path)
    read_s = time.perf_counter() - t0
    config = _config(algorithm)
    t0 = time.perf_counter()
    result = api.anonymize(data, config)
    anonymize_s = time.perf_counter() - t0
    return {
        "rows": len(data),
        "read": read_s,
        "anonymize": anonymize_s,
        "search": searched["seconds"] if algorithm == "optimal" else None,
        "checked": result.transformations_checked,
        "levels": result.levels,
        "suppressed": result.suppressed,
        "classes": len(result.classes),
        "achieved_k": result.achieved_k,
        "loss": result.metrics.get("loss"),
    }


def _child_anjana() -> dict:
    import pandas as pd
    from anjana.anonymity import k_anonymity

    data = _read(ADULT / "adult.csv")
    hierarchies = {}
    for q in QIS:
        levels = pd.read_csv(
            ADULT / f"adult_hierarchy_{q}.csv",
            sep=";",
            header=None,
            dtype=str,
            keep_default_na=False,
        )
        hierarchies[q] = {i: levels[i].tolist() for i in levels.columns}
    t0 = time.perf_counter()
    out = k_anonymity(data, [], QIS, K, SUPPRESSION * 100, hierarchies)
    seconds = time.perf_counter() - t0
    sizes = out.groupby(QIS).size() if len(out) else None
    return {
        "rows": len(data),
        "anonymize": seconds,
        "rows_out": len(out),
        "achieved_k": int(sizes.min()) if sizes is not None else 0,
    }


def make_million(path: Path) -> float:
    """Write the 1M-row adult-like table; returns the seconds it took."""
    import numpy as np

    t0 = time.perf_counter()
    adult = _read(ADULT / "adult.csv")
    rng = np.random.default_rng(SEED)
    n = len(adult)
    rows = adult.iloc[rng.integers(0, n, MILLION)].reset_index(drop=True)
    rows["age"] = adult["age"].to_numpy()[rng.integers(0, n, MILLION)]
    rows["native-country"] = adult["native-country"].to_numpy()[rng.integers(0, n, MILLION)]
    rows.to_csv(path, sep=";", index=False)
    return time.perf_counter() - t0


def run_case(case: str, csv_path: Path | None = None, timeout: float = 900) -> dict:
    args = [sys.executable, str(Path(__file__).resolve()), "--case", case]
    if csv_path is not None:
        args += ["--csv", str(csv_path)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    figures = json.loads(lines[-1])
    figures["wall"] = wall
    return figures


def _fmt(x: float | None, unit: str = "s") -> str:
    return "n/a" if x is None else f"{x:.3f} {unit}"


def report() -> None:
    print(
        f"Engine benchmark (Python {sys.version.split()[0]}); k={K}, "
        f"suppression limit {SUPPRESSION}, QIs: {', '.join(QIS)}"
    )
    results = {}

    print("\n[1] Adult, optimal search (30,162 rows)")
    r = results["adult"] = run_case("adult-optimal")
    _print_engine(r, "adult-optimal")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "million.csv"
        # Generated in its own process: a child forked from a big parent would inherit the
        # parent's ru_maxrss and report it as its own peak.
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--make-million", str(path)],
            check=True,
            cwd=ROOT,
        )
        made = time.perf_counter() - t0
        print(
            f"\n[2] 1,000,000 adult-like rows, optimal search (table generated in {made:.1f} s,"
            f" not counted)"
        )
        r = results["million"] = run_case("million", path)
        _print_engine(r, "million")

    print("\n[3] Adult, Mondrian")
    r = results["mondrian"] = run_case("adult-mondrian")
    _print_engine(r, "adult-mondrian")

    print("\n[4] anjana (PyPI) on Adult, same configuration (k_anonymity, suppression 5 %)")
    r = results["anjana"] = run_case("adult-anjana")
    if "error" in r:
        print(f"    failed: {r['error']}")
    else:
        print(
            f"    anonymize: {_fmt(r['anonymize'])}   wall: {_fmt(r['wall'])}   "
            f"peak: {r['peak_mb']:.0f} MB   rows out: {r['rows_out']}   "
            f"achieved k: {r['achieved_k']}"
        )
        ours = results["adult"].get("anonymize")
        if ours:
            print(
                f"    ratio anjana / ours (anonymize call): {r['anonymize'] / ours:.1f}x  "
                f"(ours {ours:.3f} s)"
            )


def _print_engine(r: dict, case: str) -> None:
    if "error" in r:
        print(f"    failed: {r['error']}")
        return
    target = TARGETS.get(case, "")
    print(
        f"    wall (fresh process): {_fmt(r['wall'])}   read CSV: {_fmt(r['read'])}   "
        f"anonymize: {_fmt(r['anonymize'])}   search: {_fmt(r['search'])}"
    )
    print(
        f"    transformations checked: {r['checked']}   peak memory: {r['peak_mb']:.0f} MB   "
        f"levels: {r['levels']}"
    )
    print(
        f"    suppressed: {r['suppressed']}   classes: {r['classes']}   "
        f"achieved k: {r['achieved_k']}   loss: {r['loss']:.4f}"
    )
    print(f"    target: {target} -> {'met' if _met(case, r) else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--case", choices=["adult-optimal", "million", "adult-mondrian", "adult-anjana"]
    )
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--make-million", type=Path, metavar="PATH")
    args = parser.parse_args()
    if args.make_million:
        make_million(args.make_million)
        return
    if args.case is None:
        report()
        return
    if args.case == "adult-anjana":
        figures = _child_anjana()
    else:
        algorithm = "mondrian" if args.case == "adult-mondrian" else "optimal"
        figures = _child_engine(args.csv or ADULT / "adult.csv", algorithm)
    figures["peak_mb"] = _peak_mb()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
