"""k-map and δ-presence with a research subset: the search against an exhaustive one written
here, the matching of the released rows to the population, the command line and the review's
check lines.

The brute force generalizes the population with ``Series.map`` on each hierarchy level, counts
every class in the population and in the subset with pandas, applies ARX's semantics (classes
failing the model are suppressed and their subset rows counted against the limit; a class
without subset rows is never suppressed, and when it fails δ-presence the transformation is
invalid) and scores ARX's Loss over the subset's rows.
"""

from __future__ import annotations

import io
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, PrivacyModel, anonymize
from releases.engine.cli import run
from releases.engine.criteria import DeltaPresence, KAnonymity, KMap, checks
from releases.engine.criteria.k_map import derived_k
from releases.engine.risk import PopulationModel
from releases.engine.subset import ResearchSubset
from tests.conftest import ADULT, ADULT_QUASI_IDENTIFIERS

QIS = ["age", "zip", "sex", "marital"]
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "arx" / "results"


class SubsetBruteForce:
    def __init__(self, data: pd.DataFrame, hierarchies, rows: np.ndarray) -> None:
        self.data, self.h, self.rows = data, hierarchies, rows
        self.n = int(rows.sum())
        self.nodes = list(itertools.product(*[range(hierarchies[q].height) for q in QIS]))
        # What depends on the transformation alone is computed once per node and shared by
        # every case of the module (the fixture is module-scoped).
        self._generalized: dict[tuple, pd.DataFrame] = {}
        self._classes: dict[tuple, np.ndarray] = {}
        self._row_shares: dict[tuple, pd.Series] = {}

    def generalized(self, node) -> pd.DataFrame:
        if node not in self._generalized:
            self._generalized[node] = pd.DataFrame(
                {
                    q: self.data[q].map(self.h[q].mapping(lv))
                    for q, lv in zip(QIS, node, strict=True)
                }
            )
        return self._generalized[node]

    def classes(self, node) -> np.ndarray:
        if node not in self._classes:
            grouped = self.generalized(node).groupby(QIS, sort=False)
            self._classes[node] = grouped.ngroup().to_numpy()
        return self._classes[node]

    def row_shares(self, node, q: str, lv: int) -> pd.Series:
        """Per row: the share of the hierarchy's values under the row's label of ``q``."""
        key = (node, q)
        if key not in self._row_shares:
            labels = [r[lv] for r in self.h[q].rows]
            share = {lab: labels.count(lab) / len(labels) for lab in set(labels)}
            self._row_shares[key] = self.generalized(node)[q].map(share)
        return self._row_shares[key]

    def judge(self, node, criteria) -> tuple[bool, np.ndarray]:
        """(blocked, per row: suppressed) under ``criteria``, limit ignored."""
        cls = self.classes(node)
        people = np.bincount(cls)
        count = np.bincount(cls[self.rows], minlength=len(people))
        fails = np.zeros(len(people), dtype=bool)
        blocked = False
        for c in criteria:
            if isinstance(c, KMap):
                fails |= people < c.k
            elif isinstance(c, KAnonymity):
                fails |= count < c.k
            elif isinstance(c, DeltaPresence):
                presence = np.where(count > 0, count / people, 0.0)
                out = (presence < c.dmin) | (presence > c.dmax)
                blocked |= bool(out[count == 0].any())
                fails |= out
        fails &= count > 0
        return blocked, fails[cls] & self.rows

    def loss(self, node, suppressed: np.ndarray) -> float:
        kept_rows = self.rows & ~suppressed
        values = []
        for q, lv in zip(QIS, node, strict=True):
            total = self.row_shares(node, q, lv)[kept_rows].sum() + suppressed.sum()
            low = self.n / len(self.h[q].rows)
            values.append(max(0.0, (total - low) / (self.n - low)))
        return float(np.prod([(v + 1) ** (1 / len(values)) for v in values]) - 1)

    def optimum(self, criteria, limit: float):
        allowed = math.floor(limit * self.n + 1e-9)
        best = None
        for node in self.nodes:
            blocked, suppressed = self.judge(node, criteria)
            if blocked or suppressed.sum() > allowed:
                continue
            key = (self.loss(node, suppressed), sum(node), node)
            if (
                best is None
                or key[0] < best[0] - 1e-12
                or (abs(key[0] - best[0]) <= 1e-12 and key[1:] < best[1:3])
            ):
                best = (*key, int(suppressed.sum()))
        return best


@pytest.fixture(scope="module")
def brute(table_factory):
    data, hierarchies, _ = table_factory(13, n=300)
    rows = np.random.default_rng(5).random(len(data)) < 0.4
    return SubsetBruteForce(data, hierarchies, rows)


MODELS = {
    "k-map-3": [KMap(k=3)],
    "k-map-12": [KMap(k=12)],
    "delta-0-0.5": [DeltaPresence(dmin=0, dmax=0.5)],
    "delta-0.2-0.7": [DeltaPresence(dmin=0.2, dmax=0.7)],
    "delta-0.3-0.55": [DeltaPresence(dmin=0.3, dmax=0.55)],
    "k-map-4-delta-0-0.6": [KMap(k=4), DeltaPresence(dmin=0, dmax=0.6)],
    "k2-k-map-8": [KAnonymity(k=2), KMap(k=8)],
    "k2-delta-0.25-0.6": [KAnonymity(k=2), DeltaPresence(dmin=0.25, dmax=0.6)],
}
CASES = [(name, limit) for name in MODELS for limit in (0.0, 0.05, 0.15)]


@pytest.mark.parametrize(("name", "limit"), CASES, ids=[f"{n}-{lim}" for n, lim in CASES])
def test_search_with_a_research_subset_matches_brute_force(brute, name, limit):
    criteria = MODELS[name]
    config = AnonymizationConfig(
        quasi_identifiers=brute.h,
        model=PrivacyModel(criteria=criteria, suppression_limit=limit),
        identifiers=["name"],
        research_subset=ResearchSubset(brute.rows),
    )
    expected = brute.optimum(criteria, limit)
    if expected is None:
        with pytest.raises(EngineError, match="No generalization satisfies"):
            anonymize(brute.data, config)
        return
    result = anonymize(brute.data, config)
    assert tuple(result.levels[q] for q in QIS) == expected[2]
    assert result.suppressed == expected[3]
    assert result.metrics["loss"] == pytest.approx(expected[0], abs=1e-9)
    # The extract is the subset's rows that are not suppressed.
    released = brute.data.loc[result.source_rows, "row"].tolist()
    _, suppressed = brute.judge(expected[2], criteria)
    assert sorted(released) == sorted(brute.data.loc[brute.rows & ~suppressed, "row"])
    assert result.rows_in == brute.n and len(result.data) == brute.n - result.suppressed


def test_estimated_k_map_is_k_anonymity_with_the_derived_k(brute):
    data, hierarchies = brute.data, brute.h
    population = PopulationModel(sampling_fraction=0.05)
    for estimator in ("poisson", "zero-truncated-poisson"):
        kmap = KMap(k=40, estimator=estimator, significance=0.05)
        k, _ = derived_k(40, 0.05, len(data), population.size(len(data)), estimator)
        assert 1 < k < 40
        model = PrivacyModel(criteria=[kmap], suppression_limit=0.05, population=population)
        result = anonymize(data, AnonymizationConfig(quasi_identifiers=hierarchies, model=model))
        same = anonymize(
            data,
            AnonymizationConfig(
                quasi_identifiers=hierarchies, model=PrivacyModel(k=k, suppression_limit=0.05)
            ),
        )
        assert result.levels == same.levels and result.suppressed == same.suppressed
        assert result.data.groupby(QIS).size().min() >= k
        report = json.loads(json.dumps(result.report()))
        assert [c.passed for c in checks(report)] == [True, True]
        line = checks(report)[0]
        assert line.name == "k-map" and f"as classes of at least {k}" in line.detail


# ---------------------------------------------------------------------------- matching


def test_rows_are_matched_by_content_first_free_row_first():
    population = pd.DataFrame({"a": ["x", "y", "x", "x", "z"], "b": ["1", "2", "1", "1", "3"]})
    released = pd.DataFrame({"b": ["1", "3", "1"], "a": ["x", "z", "x"]})
    assert ResearchSubset.match(population, released).rows.tolist() == [
        True,
        False,
        True,
        False,
        True,
    ]


def test_rows_match_whatever_the_columns_dtypes():
    """A Categorical column matches a plain one, and a missing cell an empty one, as the
    engine reads both as text."""
    population = pd.DataFrame(
        {"a": pd.Categorical(["x", "y", "x"]), "b": ["1", None, "2"]}, columns=["a", "b"]
    )
    released = pd.DataFrame({"a": ["y", "x"], "b": ["", "2"]})
    assert ResearchSubset.match(population, released).rows.tolist() == [False, True, True]


@pytest.mark.parametrize(
    ("released", "message"),
    [
        (pd.DataFrame({"a": ["x", "w"], "b": ["1", "2"]}), r"Row 2 .*\(a=w, b=2\) is not in"),
        (pd.DataFrame({"a": ["y", "y"], "b": ["2", "2"]}), r"Row 2 .*more often .*\(1 times\)"),
        (pd.DataFrame({"a": ["x"]}), "lacks the population's column 'b'"),
        (pd.DataFrame({"a": ["x"], "b": ["1"], "c": ["0"]}), "has a column 'c'"),
    ],
)
def test_a_released_row_the_population_lacks_is_an_error(released, message):
    population = pd.DataFrame({"a": ["x", "y", "x"], "b": ["1", "2", "1"]})
    with pytest.raises(EngineError, match=message):
        ResearchSubset.match(population, released)


def test_models_that_need_a_subset_or_a_population_say_so(brute):
    def run_with(criteria, subset=None, population=None, algorithm="optimal"):
        model = PrivacyModel(criteria=criteria, suppression_limit=0.05, population=population)
        config = AnonymizationConfig(
            quasi_identifiers=brute.h, model=model, research_subset=subset, algorithm=algorithm
        )
        return anonymize(brute.data, config)

    with pytest.raises(EngineError, match="δ-presence needs a research subset"):
        run_with([DeltaPresence(dmin=0, dmax=0.5)])
    with pytest.raises(EngineError, match="k-map needs a research subset .* or the population"):
        run_with([KMap(k=5)])
    with pytest.raises(EngineError, match="needs the optimal search, not Mondrian"):
        run_with([KMap(k=5)], ResearchSubset(brute.rows), algorithm="mondrian")
    with pytest.raises(EngineError, match="marks 10 rows, the population table has 300"):
        run_with([KMap(k=5)], ResearchSubset(np.ones(10, dtype=bool)))
    with pytest.raises(EngineError, match="δmin \\(0.6\\) must be at most δmax \\(0.5\\)"):
        PrivacyModel.from_spec([{"model": "delta-presence", "dmin": 0.6, "dmax": 0.5}])
    with pytest.raises(EngineError, match="δmax must be between 0 and 1"):
        PrivacyModel.from_spec([{"model": "delta-presence", "dmin": 0, "dmax": 1.5}])


# ---------------------------------------------------------------------------- command line


def call(argv: list) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run([str(a) for a in argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def adult_files(tmp_path_factory, adult):
    """Adult (the population) and the research subset of bench/arx_compare.py's cases."""
    case = json.loads((RESULTS / "adult-k-map-subset.json").read_text())
    rows = np.random.default_rng(case["subset"]["seed"]).random(len(adult))
    rows = rows < case["subset"]["fraction"]
    folder = tmp_path_factory.mktemp("adult")
    subset = folder / "subset.csv"
    adult[rows].to_csv(subset, sep=";", index=False)
    qi = [f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}" for q in ADULT_QUASI_IDENTIFIERS]
    return ADULT / "adult.csv", subset, rows, qi


@pytest.mark.parametrize(
    ("case", "options"),
    [
        ("adult-k-map-subset", ["--k-map", "10"]),
        ("adult-delta-presence-bounds", ["--delta-presence", "0.15,0.25"]),
    ],
)
def test_the_command_line_releases_the_research_subset(adult, adult_files, tmp_path, case, options):
    population, subset, rows, qi = adult_files
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    argv = [population, "--out", out, "--report", report, "--qi", *qi, *options]
    argv += ["--research-subset", subset, "--suppression-limit", "0.05"]
    status, stdout, stderr = call(argv)
    assert status == 0, stderr

    arx = json.loads((RESULTS / f"{case}.json").read_text())["arx"]
    summary = json.loads(report.read_text())
    assert {q: summary["levels"][q] for q in arx["levels"]} == arx["levels"]
    assert summary["suppressed"] == arx["suppressed"] and summary["classes"] == arx["classes"]
    assert summary["rows_in"] == int(rows.sum()) and summary["population_rows"] == len(adult)
    assert round(summary["metrics"]["loss"], 4) == round(arx["loss"], 4)
    assert all(c.passed for c in checks(summary))

    # The extract: the subset's rows, less the suppressed; each class judged against the
    # population generalized at the same levels.
    release = pd.read_csv(out, sep=";", dtype=str, keep_default_na=False)
    assert len(release) == rows.sum() - arx["suppressed"]
    generalized = {}
    for q in ADULT_QUASI_IDENTIFIERS:
        table = pd.read_csv(
            ADULT / f"adult_hierarchy_{q}.csv", sep=";", header=None, dtype=str,
            keep_default_na=False,
        )  # fmt: skip
        generalized[q] = adult[q].map(dict(zip(table[0], table[summary["levels"][q]], strict=True)))
    people = pd.DataFrame(generalized).groupby(ADULT_QUASI_IDENTIFIERS).size()
    released = release.groupby(ADULT_QUASI_IDENTIFIERS).size()
    matched = people.reindex(released.index)
    if case == "adult-k-map-subset":
        assert matched.min() >= 10
    else:
        assert (released / matched).between(0.15, 0.25).all()
        assert people.index.isin(pd.DataFrame(generalized)[rows].groupby(
            ADULT_QUASI_IDENTIFIERS).size().index).all()  # fmt: skip


def test_the_command_line_estimates_k_map(adult_files, tmp_path):
    population, _, _, qi = adult_files
    arx = json.loads((RESULTS / "adult-k-map-poisson.json").read_text())["arx"]
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    argv = [population, "--out", out, "--report", report, "--qi", *qi, "--k-map", "50"]
    argv += ["--k-map-estimator", "poisson", "--significance", "0.01"]
    argv += ["--population-size", "301620", "--suppression-limit", "0.05"]
    status, _, stderr = call(argv)
    assert status == 0, stderr
    summary = json.loads(report.read_text())
    assert {q: summary["levels"][q] for q in arx["levels"]} == arx["levels"]
    assert summary["suppressed"] == arx["suppressed"]
    entry = next(m for m in summary["models"] if m["model"] == "k-map")
    assert entry["achieved"]["derived_k"] == arx["derived_k"]
    release = pd.read_csv(out, sep=";", dtype=str, keep_default_na=False)
    assert release.groupby(ADULT_QUASI_IDENTIFIERS).size().min() >= arx["derived_k"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--delta-presence", "0.1,0.5"], "δ-presence needs a research subset"),
        (["--k-map", "5"], "k-map needs a research subset"),
        (["--delta-presence", "0.6,0.5", "--research-subset", "{sub}"], "must be at most δmax"),
        (["--delta-presence", "0.1"], "δ-presence needs δmax"),
        (["--delta-presence", "0.1,x"], "δmax must be a number, not 'x'"),
        (
            ["--delta-presence", "0.1,0.5", "--delta-presence-max", "0.4"],
            "gives δmax and so does --delta-presence-max",
        ),
        (["--k-map-estimator", "poisson"], "--k-map-estimator refines k-map: give --k-map too"),
        (["--k-map", "3", "--research-subset", "{bad}"], "Row 2 of the research subset"),
        (["--k-map", "3", "--research-subset", "{sub}", "--algorithm", "mondrian"], "Mondrian"),
        (["--k-map", "3", "--research-subset", "{tmp}/none.csv"], "cannot read"),
    ],
)
def test_research_subset_errors_exit_2_with_one_line(tmp_path, brute, options, message):
    population = tmp_path / "population.csv"
    brute.data.to_csv(population, index=False)
    brute.data[brute.rows].to_csv(tmp_path / "sub.csv", index=False)
    bad = brute.data[brute.rows].head(3).copy()
    bad.iloc[1, bad.columns.get_loc("age")] = "999"
    bad.to_csv(tmp_path / "bad.csv", index=False)
    fill = {"sub": tmp_path / "sub.csv", "bad": tmp_path / "bad.csv", "tmp": tmp_path}
    out = tmp_path / "out.csv"
    argv = [population, "--out", out, "--qi", "age", "sex"]
    status, _, stderr = call(argv + [str(o).format(**fill) for o in options])
    assert status == 2 and stderr.count("\n") == 1 and stderr.startswith("anonymize: error:")
    assert message in stderr, stderr
    assert not out.exists()


def test_help_lists_the_research_subset_options(capsys):
    assert run(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag in (
        "--k-map K",
        "--k-map-estimator {poisson,zero-truncated-poisson}",
        "--significance A",
        "--delta-presence DMIN,DMAX",
        "--delta-presence-max DMAX",
        "--research-subset FILE",
    ):
        assert flag in text


# ---------------------------------------------------------------------------- review


def test_check_lines_read_the_stored_figures(brute):
    model = PrivacyModel(
        criteria=[KMap(k=3), DeltaPresence(dmin=0, dmax=0.6)], suppression_limit=0.15
    )
    result = anonymize(
        brute.data,
        AnonymizationConfig(
            quasi_identifiers=brute.h, model=model, research_subset=ResearchSubset(brute.rows)
        ),
    )
    report = json.loads(json.dumps(result.report()))
    lines = {c.name: c for c in checks(report)}
    assert all(c.passed for c in lines.values())
    kmap = next(m for m in report["models"] if m["model"] == "k-map")["achieved"]
    delta = next(m for m in report["models"] if m["model"] == "delta-presence")["achieved"]
    # The figures, counted on the extract against the population.
    gen = brute.generalized(tuple(result.levels[q] for q in QIS))
    people = gen.groupby(QIS).size()
    released = result.data.groupby(QIS).size()
    assert kmap["smallest_population_class"] == people.reindex(released.index).min()
    assert delta["max"] == pytest.approx((released / people.reindex(released.index)).max())
    assert f"{kmap['smallest_population_class']:,} people" in lines["k-map"].detail
    # The classes table shows each class's people and share released.
    table = result.classes.set_index(QIS)
    assert table["population"].sort_index().tolist() == (
        people.reindex(released.index).sort_index().tolist()
    )
    assert ("presence", "share of them released (δ)") in model.class_column_labels([])

    for name, figures in (
        ("k-map", {"method": "research subset", "smallest_population_class": 2}),
        ("δ-presence", {"min": 0.1, "max": 0.7}),
    ):
        broken = json.loads(json.dumps(report))
        model_name = "k-map" if name == "k-map" else "delta-presence"
        next(m for m in broken["models"] if m["model"] == model_name)["achieved"] = figures
        assert [c.name for c in checks(broken) if not c.passed] == [name]
