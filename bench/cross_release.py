"""Releases judged together, timed: ``python bench/cross_release.py``.

On 1,000,000 adult-like rows (``bench/generate.py``, seed 2024, read as the command line reads
it), each case in a fresh Python process reporting its timings and peak memory (``ru_maxrss``)
as one JSON line:

* ``cross-release`` - a new extract (Adult's 8 quasi-identifiers, k=5, 5 % suppression) judged
  against 5 earlier extracts of the same rows (each a different set of quasi-identifiers and
  levels, k=5, 5 % suppression). ``reapply``: the 5 earlier releases re-applied to the input
  from their levels (what ``--earlier-report`` does) and the new extract's classes read off it;
  ``check``: the 5 joint partitions measured (smallest joint class, rows below k, joint
  classes); ``check_lt``: the same with distinct and entropy l and t-closeness of
  ``occupation`` in the joint classes. The target is on ``reapply + check``.
* ``linkage`` - 100,000 attacker records (rows of the source, known by age, sex, race,
  native-country and workclass, which the extract releases unchanged) linked to the
  1,000,000-row extract: ``link``, the attack itself.

The anonymization that makes the extracts is not timed (``bench/engine.py`` times it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import QIS, ROOT, hierarchy_file, peak_mb, run_child_case

sys.path.insert(0, str(ROOT))

ROWS = 1_000_000
ATTACKER_ROWS = 100_000
#: The earlier extracts' quasi-identifiers (each released at its optimum).
EARLIER = [
    ["age", "education", "sex", "race", "marital-status"],
    ["age", "workclass", "sex", "native-country"],
    ["age", "occupation", "salary-class", "sex"],
    ["education", "marital-status", "race", "workclass", "sex"],
    ["age", "education", "native-country", "sex", "race"],
]
KNOWN = ["age", "sex", "race", "native-country", "workclass"]
TARGETS = {"cross-release": 5.0, "linkage": 30.0}


def _hierarchies(columns):
    from releases.engine import Hierarchy

    return {q: Hierarchy.from_arx_csv(hierarchy_file(q), attribute=q) for q in columns}


def _read(path: Path):
    from releases.engine.tabular import read_path

    return read_path(path)[0]


def case_cross_release(path: Path) -> dict:
    from releases.engine import AnonymizationConfig, PrivacyModel, anonymize
    from releases.engine.cross_release import (
        cross_release_check,
        extract_membership,
        release_membership,
        sensitive_context,
    )

    data = _read(path)
    model = PrivacyModel(k=5, suppression_limit=0.05)
    configs = []
    for qis in EARLIER:
        found = anonymize(data, AnonymizationConfig(_hierarchies(qis), model))
        configs.append(AnonymizationConfig(_hierarchies(qis), model, levels=found.levels))
    new = anonymize(data, AnonymizationConfig(_hierarchies(QIS), model))

    t0 = time.perf_counter()
    earlier = [release_membership(data, config) for config in configs]
    mine = extract_membership(new.data, new.source_rows, len(data), QIS)
    reapply = time.perf_counter() - t0

    t0 = time.perf_counter()
    checks = [cross_release_check(mine, other, 5) for other in earlier]
    check = time.perf_counter() - t0

    context = sensitive_context(data, ["occupation"])
    t0 = time.perf_counter()
    for other in earlier:
        cross_release_check(mine, other, 5, sensitive=context, entropy=True, t_distance="equal")
    check_lt = time.perf_counter() - t0
    return {
        "rows": len(data),
        "reapply": reapply,
        "check": check,
        "check_lt": check_lt,
        "total": reapply + check,
        "results": [
            {
                "smallest_joint_class": c.smallest_joint_class,
                "rows_below_k": c.rows_below_k,
                "joint_classes": c.joint_classes,
            }
            for c in checks
        ],
    }


def case_linkage(path: Path) -> dict:
    import numpy as np

    from releases.engine import AnonymizationConfig, PrivacyModel, anonymize
    from releases.engine.linkage import ColumnRule, link

    data = _read(path)
    hierarchies = _hierarchies(QIS)
    result = anonymize(
        data, AnonymizationConfig(hierarchies, PrivacyModel(k=5, suppression_limit=0.05))
    )
    rng = np.random.default_rng(7)
    attacker = data.iloc[rng.choice(len(data), ATTACKER_ROWS, replace=False)][KNOWN]
    attacker = attacker.reset_index(drop=True)
    rules = {q: ColumnRule(h, result.levels[q]) for q, h in hierarchies.items()}
    t0 = time.perf_counter()
    found = link(attacker, result.data, 5, rules)
    seconds = time.perf_counter() - t0
    return {
        "rows": len(result.data),
        "attacker_rows": len(attacker),
        "link": seconds,
        "total": seconds,
        "linkage": found.as_dict(),
    }


CASES = {"cross-release": case_cross_release, "linkage": case_linkage}


def run_case(case: str, path: Path) -> dict:
    args = [sys.executable, str(Path(__file__).resolve()), "--case", case, "--csv", str(path)]
    return run_child_case(args, timeout=1800)


def report() -> None:
    print(f"Releases judged together (Python {sys.version.split()[0]}), {ROWS:,} adult-like rows")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "million.csv"
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "generate.py"), str(ROWS), str(path)],
            check=True,
            cwd=ROOT,
        )
        for case in CASES:
            r = run_case(case, path)
            print(f"\n[{case}]")
            if "error" in r:
                print(f"    failed: {r['error']}")
                continue
            if case == "cross-release":
                print(
                    f"    5 earlier releases re-applied + new classes: {r['reapply']:.3f} s   "
                    f"5 joint partitions: {r['check']:.3f} s   with l and t: "
                    f"{r['check_lt']:.3f} s"
                )
                for i, c in enumerate(r["results"], start=1):
                    print(f"    earlier {i}: {json.dumps(c)}")
            else:
                print(
                    f"    {r['attacker_rows']:,} attacker records x {r['rows']:,} released rows: "
                    f"link {r['link']:.3f} s"
                )
                print(f"    {json.dumps(r['linkage'])}")
            target = TARGETS[case]
            met = "met" if r["total"] < target else "MISSED"
            print(
                f"    peak memory: {r['peak_mb']:.0f} MB   wall (fresh process, with the "
                f"anonymization): {r['wall']:.1f} s"
            )
            print(f"    target: < {target:g} s -> {met} ({r['total']:.3f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=list(CASES))
    parser.add_argument("--csv", type=Path)
    args = parser.parse_args()
    if args.case is None:
        report()
        return
    figures = CASES[args.case](args.csv)
    figures["peak_mb"] = peak_mb()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
