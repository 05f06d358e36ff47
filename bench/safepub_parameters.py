"""How long deriving SafePub's k from (ε, δ) takes across the request form's range:
``python bench/safepub_parameters.py [--limit SECONDS]``.

The form derives k when it validates a request (``SafePub.validate``), so every (ε, δ) it
accepts must be derived quickly. Each pair of the grid (ε from 0.0001 to the form's maximum 10,
δ from 10⁻³⁰⁰ to 0.99) is derived from a cold cache; a pair either gives k or is refused with
the smallest δ its ε allows. Exits 1 when a pair takes longer than ``--limit`` (default 1 s).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from releases.engine import EngineError  # noqa: E402
from releases.engine.criteria.safepub import parameters  # noqa: E402

EPSILONS = [1e-4, 1e-3, 0.01, 0.05, 0.1, 0.5, 0.9, 1, 2, 3, 4, 5, 5.5, 7, 10]
DELTAS = [1e-300, 1e-100, 1e-30, 1e-12, 1e-9, 1e-6, 1e-5, 1e-3, 0.1, 0.5, 0.99]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=1.0, help="seconds allowed per pair")
    args = parser.parse_args()
    slowest = (0.0, 0.0, 0.0)
    refused = 0
    print(f"{'ε':>8} {'δ':>8} {'seconds':>8}  k")
    for epsilon in EPSILONS:
        for delta in DELTAS:
            parameters.cache_clear()
            started = time.perf_counter()
            try:
                outcome = str(parameters(epsilon, delta)[0])
            except EngineError as exc:
                outcome, refused = f"refused: {exc}", refused + 1
            seconds = time.perf_counter() - started
            slowest = max(slowest, (seconds, epsilon, delta))
            print(f"{epsilon:8g} {delta:8g} {seconds:8.3f}  {outcome[:100]}")
    seconds, epsilon, delta = slowest
    print(
        f"slowest: ε={epsilon:g}, δ={delta:g} in {seconds:.3f} s; "
        f"{refused} of {len(EPSILONS) * len(DELTAS)} pairs refused"
    )
    return 0 if seconds <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
