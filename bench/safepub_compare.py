"""SafePub against ARX 3.9.2 on Adult: ``python bench/safepub_compare.py [--arx] [--runs N]``.

* k and β for several (ε, δ): ARX's ``ParameterCalculation`` against
  :func:`releases.engine.criteria.safepub.parameters` (must be equal, to the last bit of β);
* data-independent releases (a scheme's levels, or ARX's degree "medium"): ARX's deterministic
  sample is given to the engine, and levels, sampled rows, suppressed rows and classes must be
  equal (``tests/engine/test_safepub.py`` asserts the same from the stored results);
* the data-dependent search: both are random, so only the distributions are compared, loosely:
  SafePub's Loss score (higher is better) of the transformation each run releases, over N runs
  of ARX (fresh randomness) and N seeds of the engine, with the same ε, δ, ε_search and steps.

``--arx`` runs ARX again (``bench/arx/run-safepub.sh``, which builds ARX from its source the
first time) and rewrites ``bench/arx/results/safepub-*.json``; otherwise the stored runs are
read.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from releases.engine import (  # noqa: E402
    AnonymizationConfig,
    Hierarchy,
    PrivacyModel,
    anonymize,
    safepub,  # noqa: E402
)
from releases.engine.api import encode  # noqa: E402
from releases.engine.criteria.safepub import parameters  # noqa: E402

ADULT = ROOT / "tests" / "data" / "adult"
RESULTS = ROOT / "bench" / "arx" / "results"
QIS = ["age", "sex", "race", "marital-status", "education"]
DEPENDENT = {"epsilon": 1.0, "delta": 1e-5, "search_budget": 0.1, "steps": 20}


def arx(*args: str) -> dict[str, Any]:
    qis = [a for q in QIS for a in ("--qi", f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}")]
    out = subprocess.run(
        [str(ROOT / "bench" / "arx" / "run-safepub.sh"), "--data", str(ADULT / "adult.csv"), *qis,
         *args],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def engine_scores(data: pd.DataFrame, runs: int) -> list[float]:
    """The score of the transformation the engine releases, for seeds 0..runs-1."""
    hierarchies = {
        q: Hierarchy.from_arx_csv(ADULT / f"adult_hierarchy_{q}.csv", attribute=q) for q in QIS
    }
    scores = []
    for seed in range(runs):
        model = PrivacyModel.from_spec([{"model": "safepub", **DEPENDENT, "seed": seed}])
        config = AnonymizationConfig(quasi_identifiers=hierarchies, model=model)
        result = anonymize(data, config)
        prepared, run = safepub.prepare(len(data), config)
        assert run is not None
        enc, context = encode(data, prepared)
        levels = tuple(result.levels[q] for q in QIS) if result.levels else ()
        scores.append(safepub.loss_score(enc, prepared.model, context, levels, run.criterion.k))
    return scores


def summary(values: list[float]) -> str:
    return (
        f"mean {statistics.mean(values):8.1f}, median {statistics.median(values):8.1f}, "
        f"best {max(values):8.1f}, worst {min(values):8.1f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arx", action="store_true", help="run ARX again and store its output")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    data = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    path = RESULTS / "safepub-data-dependent.json"
    if args.arx:
        run = arx(*[a for k, v in DEPENDENT.items() for a in (f"--{k.replace('_', '-')}", str(v))],
                  "--runs", str(args.runs))  # fmt: skip
        path.write_text(json.dumps({"safepub": DEPENDENT, "qis": QIS, "arx": run}, indent=1) + "\n")
    stored = json.loads(path.read_text())
    failed = False
    for case in json.loads((RESULTS / "safepub-parameters.json").read_text())["parameters"]:
        mine = parameters(float(case["epsilon"]), float(case["delta"]))
        same = mine == (case["k"], case["beta"])
        failed |= not same
        print(f"ε={case['epsilon']:<4} δ={case['delta']:<10} ARX k={case['k']:<4} β={case['beta']!r:<22} "
              f"engine k={mine[0]:<4} β={mine[1]!r:<22} {'same' if same else 'DIFFERS'}")  # fmt: skip
    arx_scores = [r["loss"] for r in stored["arx"]["runs"]]
    mine = engine_scores(data, len(arx_scores))
    print(f"data-dependent, {len(arx_scores)} runs each, SafePub Loss score of the release:")
    print(f"  ARX    {summary(arx_scores)}")
    print(f"  engine {summary(mine)}")
    # Loose: the means within a quarter of the spread of ARX's runs plus 10% of its mean.
    tolerance = 0.25 * (max(arx_scores) - min(arx_scores)) + 0.1 * abs(statistics.mean(arx_scores))
    close = abs(statistics.mean(mine) - statistics.mean(arx_scores)) <= tolerance
    print(f"  means {'close' if close else 'FAR APART'} (tolerance {tolerance:.1f})")
    return 1 if failed or not close else 0


if __name__ == "__main__":
    sys.exit(main())
