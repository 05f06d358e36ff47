"""Engine benchmark: ``python bench/engine.py``.

Each case runs in a fresh Python process (``python bench/engine.py --case NAME``), which
reports its own timings and peak memory (``ru_maxrss``) as one JSON line:

* ``adult-optimal``  - Adult (30,162 rows, 8 quasi-identifiers with ARX's hierarchies), k=5,
  suppression limit 0.05, optimal full-domain search;
* ``million``        - 1,000,000 adult-like rows (each a random Adult row whose age and
  native-country come from two other random rows; seed 2024), same configuration;
* ``adult-mondrian`` - Adult, k=5, Mondrian;
* ``adult-anjana``   - the same Adult configuration with the PyPI package ``anjana``
  (``anjana.anonymity.k_anonymity``, suppression 5 %), for the ratio anjana / ours; anjana
  pins older pandas and numpy than the app, so this case runs in .venv-pycanon (where
  ``make bench`` installs it; ``ANJANA_PYTHON`` names another interpreter);
* the other privacy models on Adult, suppression limit 0.05, optimal search (:data:`MODELS`):
  δ-disclosure and β-likeness (basic, enhanced) with ``occupation`` sensitive and the 7 other
  quasi-identifiers; highest and average re-identification risk; population uniqueness with
  Dankar's rule and Zayatz at a 1 % sample and SNB at a 50 % sample. These cases also print
  the risk before and after (prosecutor, journalist, marketer, population-uniqueness estimates).

Figures: ``wall`` = the child process from start to exit (interpreter start, imports, reading
the CSV, anonymizing); ``anonymize`` = the ``anonymize()`` call; ``search`` = the lattice
search inside it (``releases.engine.api.search``, timed by a wrapper), with ``search cpu`` its
CPU time (the machine may be shared: CPU time is the steadier figure); ``peak`` = the child's
``ru_maxrss``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ADULT, QIS, ROOT, hierarchy_file, peak_mb, run_child_case

#: The interpreter of the venv that has anjana (it cannot share the app's pandas).
ANJANA_PYTHON = Path(os.environ.get("ANJANA_PYTHON") or ROOT / ".venv-pycanon" / "bin" / "python")
K = 5
SUPPRESSION = 0.05
MILLION = 1_000_000
SEED = 2024
QIS7 = [q for q in QIS if q != "occupation"]
#: The other privacy models: (quasi-identifiers, sensitive, criteria, population).
MODELS = {
    "adult-delta-disclosure": (
        QIS7,
        ["occupation"],
        [{"model": "delta-disclosure", "delta": 1.2}],
        None,
    ),
    "adult-beta-basic": (QIS7, ["occupation"], [{"model": "beta-likeness", "beta": 1.0}], None),
    "adult-beta-enhanced": (
        QIS7,
        ["occupation"],
        [{"model": "beta-likeness", "beta": 1.0, "variant": "enhanced"}],
        None,
    ),
    "adult-highest-risk": (QIS, [], [{"model": "highest-risk", "risk": 0.1}], None),
    "adult-average-risk": (QIS, [], [{"model": "average-risk", "risk": 0.05}], None),
    "adult-population-dankar": (
        QIS,
        [],
        [{"model": "population-uniqueness", "risk": 0.01, "estimator": "dankar"}],
        {"sampling_fraction": 0.01},
    ),
    "adult-population-zayatz": (
        QIS,
        [],
        [{"model": "population-uniqueness", "risk": 0.01, "estimator": "zayatz"}],
        {"sampling_fraction": 0.01},
    ),
    "adult-population-snb": (
        QIS,
        [],
        [{"model": "population-uniqueness", "risk": 0.01, "estimator": "snb"}],
        {"sampling_fraction": 0.5},
    ),
}
TARGETS = {
    "adult-optimal": "search < 0.5 s",
    "million": "< 5 s end to end (fresh process), peak < 1.5 GB",
    "adult-mondrian": "anonymize < 1 s",
    **{name: "search < 1 s" for name in MODELS},
}


def _met(case: str, r: dict) -> bool:
    if case == "adult-optimal":
        return r["search"] < 0.5
    if case == "million":
        return r["wall"] < 5 and r["peak_mb"] < 1536
    if case in MODELS:
        return r["search"] < 1
    return r["anonymize"] < 1


def _read(path: Path):
    import pandas as pd

    return pd.read_csv(path, sep=";", dtype=str, keep_default_na=False)


def _config(algorithm: str, case: str | None = None):
    from releases.engine.hierarchy import Hierarchy
    from releases.engine.types import AnonymizationConfig, PrivacyModel

    hierarchies = {q: Hierarchy.from_arx_csv(hierarchy_file(q), attribute=q) for q in QIS}
    if case in MODELS:
        qis, sensitive, criteria, population = MODELS[case]
        return AnonymizationConfig(
            quasi_identifiers={q: hierarchies[q] for q in qis},
            model=PrivacyModel.from_spec(
                {"criteria": criteria, "suppression_limit": SUPPRESSION, "population": population}
            ),
            sensitive=sensitive,
        )
    return AnonymizationConfig(
        quasi_identifiers=hierarchies,
        model=PrivacyModel(k=K, suppression_limit=SUPPRESSION),
        algorithm=algorithm,  # type: ignore[arg-type]
    )


def _child_engine(csv_path: Path, algorithm: str, case: str | None = None) -> dict:
    sys.path.insert(0, str(ROOT))
    import releases.engine.api as api

    searched = {"seconds": 0.0, "cpu": 0.0}
    if hasattr(api, "search"):
        inner = api.search

        def timed_search(*args, **kwargs):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                searched["seconds"] += time.perf_counter() - t0
                searched["cpu"] += time.process_time() - c0

        api.search = timed_search

    t0 = time.perf_counter()
    data = _read(csv_path)
    read_s = time.perf_counter() - t0
    config = _config(algorithm, case)
    t0 = time.perf_counter()
    result = api.anonymize(data, config)
    anonymize_s = time.perf_counter() - t0
    figures = {
        "rows": len(data),
        "read": read_s,
        "anonymize": anonymize_s,
        "search": searched["seconds"] if algorithm == "optimal" else None,
        "search_cpu": searched["cpu"] if algorithm == "optimal" else None,
        "checked": result.transformations_checked,
        "levels": result.levels,
        "suppressed": result.suppressed,
        "classes": len(result.classes),
        "achieved_k": result.achieved_k,
        "loss": result.metrics.get("loss"),
    }
    if case in MODELS:
        figures["model"] = config.model.describe()
        figures["achieved"] = result.models
        figures["risk_before"] = result.risk_before.as_dict()
        figures["risk_after"] = result.risk_after.as_dict()
        figures["candidates"] = len(result.candidates)
    return figures


def _child_anjana() -> dict:
    import pandas as pd
    from anjana.anonymity import k_anonymity

    data = _read(ADULT / "adult.csv")
    hierarchies = {}
    for q in QIS:
        levels = pd.read_csv(
            hierarchy_file(q),
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


def run_case(
    case: str, csv_path: Path | None = None, timeout: float = 900, python: Path | None = None
) -> dict:
    args = [str(python or sys.executable), str(Path(__file__).resolve()), "--case", case]
    if csv_path is not None:
        args += ["--csv", str(csv_path)]
    return run_child_case(args, timeout)


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
    if ANJANA_PYTHON.exists():
        r = results["anjana"] = run_case("adult-anjana", python=ANJANA_PYTHON)
    else:
        r = {"error": f"no {ANJANA_PYTHON}: `make bench` installs anjana there"}
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

    for number, case in enumerate(MODELS, start=5):
        print(f"\n[{number}] Adult, {case.removeprefix('adult-')}")
        r = results[case] = run_case(case)
        _print_engine(r, case)
        if "error" not in r:
            _print_model(r)


def _pct(x: float | None) -> str:
    return "failed" if x is None else f"{100 * x:.3f}%"


def _print_model(r: dict) -> None:
    print(f"    model: {r['model']}   Pareto candidates: {r['candidates']}")
    for entry in r["achieved"]:
        print(f"    achieved ({entry['description']}): {json.dumps(entry['achieved'])}")
    for when in ("risk_before", "risk_after"):
        risk = r[when]
        line = (
            f"    {when.replace('_', ' ')}: prosecutor highest {_pct(risk['highest'])}, "
            f"average {_pct(risk['average'])}; journalist highest "
            f"{_pct(risk['journalist']['highest'])}, average "
            f"{_pct(risk['journalist']['average'])}; marketer {_pct(risk['marketer']['average'])}"
        )
        print(line)
        population = risk.get("population")
        if population:
            print(
                f"      population uniques ({population['population_size']:,} people, "
                f"sample uniques {_pct(population['sample_uniques'])}): Pitman "
                f"{_pct(population['pitman'])}, Zayatz {_pct(population['zayatz'])}, SNB "
                f"{_pct(population['snb'])}; Dankar -> {population['dankar_model']} "
                f"{_pct(population['dankar'])}"
            )


def _print_engine(r: dict, case: str) -> None:
    if "error" in r:
        print(f"    failed: {r['error']}")
        return
    target = TARGETS.get(case, "")
    print(
        f"    wall (fresh process): {_fmt(r['wall'])}   read CSV: {_fmt(r['read'])}   "
        f"anonymize: {_fmt(r['anonymize'])}   search: {_fmt(r['search'])} "
        f"(cpu {_fmt(r.get('search_cpu'))})"
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
        "--case",
        choices=["adult-optimal", "million", "adult-mondrian", "adult-anjana", *MODELS],
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
        figures = _child_engine(args.csv or ADULT / "adult.csv", algorithm, args.case)
    figures["peak_mb"] = peak_mb()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
