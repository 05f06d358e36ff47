"""ARX 3.9.2 against the engine on recorded cases: ``python bench/arx_compare.py``.

Each case of :data:`CASES` is a configuration on a table of :data:`TABLES` (``"table"``,
Adult by default: ``tests/data/adult/``, ARX's hierarchies; ``integer-adult``, Adult recoded
to integers by ``bench/integer_table.py``) with the Loss metric. ``--arx`` runs ARX on it (``bench/arx/run.sh``, which builds ARX
from its source the first time, see ``bench/arx/Harness.java``) and writes
``bench/arx/results/<case>.json``: the case and ARX's optimum (levels, suppressed records,
classes, Loss) with ARX's own time for the anonymization (one run in a fresh JVM, so a cold
one). Without ``--arx`` the stored results are read. The engine then runs every case and a
line per case compares the two; the exit status is 1 when one differs (a case marked
``differs`` is one where the engine departs from ARX on purpose, and must differ).
``tests/engine/test_arx_models.py`` asserts the same from the stored results.

A research subset (``"subset": {"seed": S, "fraction": F}``) is the table's rows for which
``numpy.random.default_rng(S).random(30162) < F``: ARX is given them as a second CSV file,
matched to Adult's rows by content; the engine as a :class:`ResearchSubset` of those rows.

A case with ``"microaggregate"`` also has the harness write ARX's released table; its SHA-256
and the value ARX wrote for each class (``released``) must equal the engine's release laid out
the same way (every row in order, "*" in the quasi-identifiers of a suppressed one).

A case with ``"heuristic": {"seconds": S, "steps": N}`` runs ARX's Lightning and the
engine's heuristic search with that time and step limit (the time limit is generous, so the
step limit ends both searches, deterministically).

``--arx --derived-k`` also records ARX's derived k of estimated k-map over a grid of k,
significance levels and population sizes (``bench/arx/results/k-map-derived-k.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from common import QIS, ROOT

sys.path.insert(0, str(ROOT))

from releases.engine import AnonymizationConfig, Hierarchy, PrivacyModel, anonymize  # noqa: E402
from releases.engine.subset import ResearchSubset  # noqa: E402

ADULT = Path("tests/data/adult")
#: table name -> its folder, holding <name>.csv and <name>_hierarchy_<column>.csv.
TABLES = {"adult": ADULT, "integer-adult": Path("tests/data/integer-adult")}
RESULTS = ROOT / "bench" / "arx" / "results"
RUN = ROOT / "bench" / "arx" / "run.sh"
SUBSET = {"seed": 25, "fraction": 0.2}

#: name -> quasi-identifiers, suppression limit, criteria (engine specs), population, subset.
CASES: dict[str, dict[str, Any]] = {
    "adult-k-anonymity": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "k-anonymity", "k": 5}],
    },
    "adult-k-map-poisson": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "k-map", "k": 50, "estimator": "poisson", "significance": 0.01}],
        "population": {"population_size": 301_620},
    },
    "adult-k-map-zero-truncated-poisson": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [
            {
                "model": "k-map",
                "k": 100,
                "estimator": "zero-truncated-poisson",
                "significance": 0.05,
            }
        ],
        "population": {"sampling_fraction": 0.05},
    },
    "adult-k-map-subset": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "k-map", "k": 10}],
        "subset": SUBSET,
    },
    "adult-delta-presence": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "delta-presence", "dmin": 0.0, "dmax": 0.3}],
        "subset": SUBSET,
    },
    "adult-delta-presence-bounds": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "delta-presence", "dmin": 0.15, "dmax": 0.25}],
        "subset": SUBSET,
    },
    # Utility controls: attribute weights in the Loss (the others weigh ARX's default 0.5)
    # and per-quasi-identifier level limits.
    "adult-k-anonymity-weights": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "k-anonymity", "k": 5}],
        "weights": {"age": 1.0, "education": 0.9, "occupation": 1.0, "native-country": 0.1},
    },
    "adult-k-anonymity-level-limits": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "k-anonymity", "k": 5}],
        "level_limits": {"age": [1, 2], "occupation": [0, 1], "race": [1, 1]},
    },
    "adult-k-anonymity-weights-and-limits": {
        "qis": QIS,
        "suppression_limit": 0.02,
        "criteria": [{"model": "k-anonymity", "k": 10}],
        "weights": {"age": 0.2, "marital-status": 1.0, "sex": 1.0, "salary-class": 0.8},
        "level_limits": {"education": [1, 2], "native-country": [0, 1]},
    },
    # Microaggregation of age (ARX without clustering: the other quasi-identifiers form the
    # classes, age is replaced by its class's aggregate); ARX's released table is compared too.
    "adult-microaggregation-mean": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "k-anonymity", "k": 5}],
        "microaggregate": {"age": "mean"},
    },
    "adult-microaggregation-interval": {
        "qis": QIS,
        "suppression_limit": 0.02,
        "criteria": [{"model": "k-anonymity", "k": 10}],
        "microaggregate": {"age": "interval"},
    },
    "adult-microaggregation-median": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "k-anonymity", "k": 5}],
        "microaggregate": {"age": "median"},
    },
    "adult-microaggregation-mode": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [{"model": "k-anonymity", "k": 5}],
        "microaggregate": {"age": "mode"},
    },
    # Where the engine departs from ARX on purpose: with a minimal class size (k-anonymity),
    # ARX checks it first and ignores δ-presence on the population's classes without a
    # released row, so its optimum leaves people of the population whose class is absent from
    # the release (presence 0, below δmin); the engine refuses such a transformation.
    "adult-delta-presence-with-k": {
        "qis": QIS,
        "suppression_limit": 0.05,
        "criteria": [
            {"model": "k-anonymity", "k": 2},
            {"model": "delta-presence", "dmin": 0.15, "dmax": 0.25},
        ],
        "subset": SUBSET,
        "differs": "ARX ignores δmin on population classes without a released row when k is set",
    },
}

# The same configurations on Adult recoded to integers (ranks, shuffled rows; see
# bench/integer_table.py), and ARX's heuristic search stopped by a step limit.
INTEGER_CASES = [
    "k-anonymity",
    "k-map-poisson",
    "k-map-subset",
    "delta-presence",
    "delta-presence-bounds",
    "k-anonymity-weights-and-limits",
    "microaggregation-mean",
    "microaggregation-interval",
]
CASES.update(
    {f"integer-adult-{n}": {**CASES[f"adult-{n}"], "table": "integer-adult"} for n in INTEGER_CASES}
)
CASES["integer-adult-heuristic-steps"] = {
    "table": "integer-adult",
    "qis": QIS,
    "suppression_limit": 0.05,
    "criteria": [{"model": "k-anonymity", "k": 5}],
    "heuristic": {"seconds": 600, "steps": 100},
}

#: The grid of ARX's derived k recorded with --derived-k.
DERIVED_K = {
    "sample_size": 30162,
    "ks": [1, 2, 3, 5, 10, 20, 50, 100, 500],
    "significances": [0.001, 0.01, 0.05, 0.1, 0.3],
    "population_sizes": [30162, 33513, 60324, 301620, 3016200, 30162000],
}


def table_file(case: dict[str, Any], column: str | None = None) -> Path:
    """The case's table (relative to the repository), or a column's hierarchy."""
    name = case.get("table", "adult")
    folder = TABLES[name]
    return folder / (f"{name}.csv" if column is None else f"{name}_hierarchy_{column}.csv")


def read_table(case: dict[str, Any]) -> pd.DataFrame:
    return pd.read_csv(ROOT / table_file(case), sep=";", dtype=str, keep_default_na=False)


def subset_rows(case: dict[str, Any], n: int) -> np.ndarray | None:
    """The research subset of a case: a boolean per row of Adult (None without one)."""
    rule = case.get("subset")
    if not rule:
        return None
    return np.random.default_rng(int(rule["seed"])).random(n) < float(rule["fraction"])


def harness_arguments(case: dict[str, Any], subset_file: Path | None) -> list[str]:
    args = ["--data", str(table_file(case)), "--delimiter", ";"]
    for q in case["qis"]:
        args += ["--qi", f"{q}={table_file(case, q)}"]
    args += ["--suppression-limit", str(case["suppression_limit"])]
    for c in case["criteria"]:
        if c["model"] == "k-anonymity":
            args += ["--k", str(c["k"])]
        elif c["model"] == "k-map" and case.get("subset"):
            args += ["--k-map", str(c["k"])]
        elif c["model"] == "k-map":
            args += ["--k-map", str(c["k"]), "--estimator", c["estimator"]]
            args += ["--significance", str(c["significance"])]
            for key, value in case["population"].items():
                args += [f"--{key.replace('_', '-')}", str(value)]
        elif c["model"] == "delta-presence":
            args += ["--delta-presence", f"{c['dmin']},{c['dmax']}"]
        else:
            raise ValueError(f"no harness option for {c['model']}")
    if subset_file is not None:
        args += ["--subset", str(subset_file)]
    if case.get("weights"):
        args += ["--weights", ",".join(f"{q}={w}" for q, w in case["weights"].items())]
    if case.get("level_limits"):
        limits = case["level_limits"].items()
        args += ["--level-limits", ",".join(f"{q}={lo}:{hi}" for q, (lo, hi) in limits)]
    if case.get("microaggregate"):
        functions = case["microaggregate"].items()
        args += ["--microaggregate", ",".join(f"{q}={f}" for q, f in functions)]
    if case.get("heuristic"):
        limits = case["heuristic"]
        args += ["--heuristic", str(limits["seconds"]), "--heuristic-steps", str(limits["steps"])]
    return args


def released_summary(released: pd.DataFrame, case: dict[str, Any]) -> dict[str, Any]:
    """What a released table (every input row in input order, a suppressed one with "*" in
    each quasi-identifier, as ARX writes it) says of its microaggregated columns: the SHA-256
    of the whole table (';'-joined lines) and, per microaggregated column, the value of each
    class (the other quasi-identifiers' released values, '|'-joined)."""
    lines = released.astype(str).agg(";".join, axis=1)
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    micro = case["microaggregate"]
    others = [q for q in case["qis"] if q not in micro]
    keys = released[others].astype(str).agg("|".join, axis=1)
    values: dict[str, dict[str, str]] = {}
    for column in micro:
        pairs = pd.DataFrame({"key": keys, "value": released[column]}).drop_duplicates()
        if pairs["key"].duplicated().any():
            raise ValueError(f"a class of the release holds two values of {column!r}")
        values[column] = dict(sorted(zip(pairs["key"], pairs["value"], strict=True)))
    return {"sha256": digest, "aggregates": values}


def full_release(adult: pd.DataFrame, case: dict[str, Any], result: Any) -> pd.DataFrame:
    """The engine's extract laid out as ARX writes its output: every input row in order, the
    suppressed ones with "*" in each quasi-identifier."""
    out = adult.copy()
    out[case["qis"]] = "*"
    out.iloc[result.source_rows] = result.data[list(adult.columns)].to_numpy()
    return out


def run_arx(name: str, case: dict[str, Any]) -> dict[str, Any]:
    adult = read_table(case)
    rows = subset_rows(case, len(adult))
    with tempfile.TemporaryDirectory() as tmp:
        subset_file = None
        if rows is not None:
            subset_file = Path(tmp) / "subset.csv"
            adult[rows].to_csv(subset_file, sep=";", index=False)
        args = harness_arguments(case, subset_file)
        output_file = Path(tmp) / "output.csv"
        if case.get("microaggregate"):
            args += ["--output", str(output_file)]
        out = subprocess.run(
            [str(RUN), *args], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        arx = json.loads(out)
        if case.get("microaggregate"):
            written = pd.read_csv(output_file, sep=";", dtype=str, keep_default_na=False)
            arx["released"] = released_summary(written, case)
    arx["arguments"] = [a for a in arx["arguments"] if a != str(output_file)]
    if case.get("microaggregate"):
        arx["arguments"].remove("--output")
    arx["arguments"] = [
        a if subset_file is None else a.replace(str(subset_file), "SUBSET.csv")
        for a in arx["arguments"]
    ]
    return {"case": name, **case, "arx": arx}


def heuristic_options(case: dict[str, Any]) -> dict[str, Any]:
    """The engine's options for a case's heuristic search (none for the optimal one)."""
    limits = case.get("heuristic")
    if not limits:
        return {}
    return {
        "algorithm": "heuristic",
        "time_limit": limits["seconds"],
        "step_limit": limits["steps"],
    }


def run_ours(case: dict[str, Any]) -> dict[str, Any]:
    adult = read_table(case)
    hierarchies = {
        q: Hierarchy.from_arx_csv(ROOT / table_file(case, q), attribute=q) for q in case["qis"]
    }
    model = PrivacyModel.from_spec(
        {
            "criteria": case["criteria"],
            "suppression_limit": case["suppression_limit"],
            "population": case.get("population"),
        }
    )
    rows = subset_rows(case, len(adult))
    limits = case.get("level_limits") or {}
    config = AnonymizationConfig(
        quasi_identifiers=hierarchies,
        model=model,
        research_subset=None if rows is None else ResearchSubset(rows),
        weights=dict(case.get("weights") or {}),
        min_levels={q: lo for q, (lo, _) in limits.items()},
        max_levels={q: hi for q, (_, hi) in limits.items()},
        microaggregate=dict(case.get("microaggregate") or {}),
        **heuristic_options(case),
    )
    result = anonymize(adult, config)
    released = None
    if case.get("microaggregate"):
        released = released_summary(full_release(adult, case, result), case)
    return {
        "released": released,
        "levels": result.levels,
        "suppressed": result.suppressed,
        "classes": len(result.classes),
        "loss": result.metrics["loss"],
        "seconds": result.seconds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arx", action="store_true", help="re-run ARX and store its results")
    parser.add_argument("--derived-k", action="store_true", help="with --arx: the k-map grid")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.arx and args.derived_k:
        grid = [
            "--derived-k", "yes",
            "--sample-size", str(DERIVED_K["sample_size"]),
            "--ks", ",".join(map(str, DERIVED_K["ks"])),
            "--significances", ",".join(map(str, DERIVED_K["significances"])),
            "--population-sizes", ",".join(map(str, DERIVED_K["population_sizes"])),
        ]  # fmt: skip
        out = subprocess.run([str(RUN), *grid], cwd=ROOT, check=True, capture_output=True)
        (RESULTS / "k-map-derived-k.json").write_bytes(out.stdout)
    differ = 0
    for name in args.case or list(CASES):
        path = RESULTS / f"{name}.json"
        if args.arx:
            stored = run_arx(name, CASES[name])
            path.write_text(json.dumps(stored, indent=2) + "\n")
        stored = json.loads(path.read_text())
        arx = stored["arx"]
        ours = run_ours(stored)
        qis = [q for q in stored["qis"] if q not in (stored.get("microaggregate") or {})]
        same = (
            ours["levels"] == {q: arx["levels"][q] for q in qis}
            and ours["released"] == arx.get("released")
            and ours["suppressed"] == arx["suppressed"]
            and ours["classes"] == arx["classes"]
            and round(ours["loss"], 4) == round(arx["loss"], 4)
        )
        expected = stored.get("differs")
        differ += same == bool(expected)
        verdict = "same" if same else f"differs ({expected})" if expected else "DIFFERENT"
        print(
            f"{name:38} {verdict}: "
            f"ARX {[arx['levels'][q] for q in qis]} {arx['suppressed']} suppressed, "
            f"{arx['classes']} classes, Loss {arx['loss']:.4f} | ours "
            f"{[ours['levels'][q] for q in qis]} {ours['suppressed']} suppressed, "
            f"{ours['classes']} classes, Loss {ours['loss']:.4f}; "
            f"ARX {arx['milliseconds'] / 1000:.2f} s, ours {ours['seconds']:.2f} s"
        )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
