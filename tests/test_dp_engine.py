"""The differential privacy engine: query validation, the free preview, results, bounds,
composition, and a statistical check that the noise has the scale OpenDP promises.

Where a test needs an exact answer it uses ε = 50 on a count: discrete Laplace noise of scale
1/50 is non-zero with probability 2e^-50 / (1 + e^-50) < 4e-22, so the check cannot fail by
chance in practice.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from releases.engine import EngineError
from releases.engine import dp as D

EXACT = 50.0  # ε at which a count's noise is zero but with probability < 4e-22


def frame(**columns) -> pd.DataFrame:
    return pd.DataFrame({name: [str(v) for v in values] for name, values in columns.items()})


PEOPLE = frame(
    region=["N", "S", "N", "E", "", "X", "S", "N"],
    age=["5", "17", "18", "64", "65", "120", "abc", "130"],
    income=["100", "200", "-50", "1e9", "", "n/a", "300", "inf"],
)


# --- Validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "sum", "column": "income", "upper": 10, "epsilon": 1}, "needs 'lower'"),
        ({"kind": "mean", "column": "income", "lower": 0, "epsilon": 1}, "needs 'upper'"),
        ({"kind": "quantiles", "column": "age", "epsilon": 1}, "needs 'lower'"),
        (
            {"kind": "sum", "column": "income", "lower": 5, "upper": 5, "epsilon": 1},
            "lower bound of 'income' must be below its upper bound",
        ),
        (
            {"kind": "mean", "column": "income", "lower": "x", "upper": 5, "epsilon": 1},
            "must be a number",
        ),
        (
            {"kind": "sum", "column": "income", "lower": 0, "upper": 1e13, "epsilon": 1},
            "within ±",
        ),
        ({"kind": "count", "epsilon": 0}, "ε must be above 0"),
        ({"kind": "count", "epsilon": -1}, "ε must be above 0"),
        ({"kind": "count", "epsilon": 101}, "at most 100"),
        ({"kind": "count", "epsilon": float("nan")}, "finite"),
        ({"kind": "count"}, "needs 'epsilon'"),
        ({"kind": "median", "epsilon": 1}, "Unknown kind of query 'median'"),
        ({"kind": "count", "epsilon": 1, "column": "age"}, "no field 'column'"),
        ({"kind": "histogram", "by": [{"column": "region"}], "epsilon": 1}, "one of the two"),
        (
            {
                "kind": "histogram",
                "by": [{"column": "age", "categories": ["1"], "edges": [0, 1]}],
                "epsilon": 1,
            },
            "one of the two",
        ),
        (
            {"kind": "histogram", "by": [{"column": "age", "edges": [0, 10, 10]}], "epsilon": 1},
            "must be increasing",
        ),
        (
            {"kind": "histogram", "by": [{"column": "age", "edges": [0]}], "epsilon": 1},
            "at least two bin edges",
        ),
        (
            {
                "kind": "histogram",
                "by": [{"column": "region", "categories": ["N", "N"]}],
                "epsilon": 1,
            },
            "repeat a value",
        ),
        (
            {
                "kind": "histogram",
                "by": [{"column": "region", "categories": ["N", " "]}],
                "epsilon": 1,
            },
            "is empty",
        ),
        (
            {
                "kind": "histogram",
                "by": [{"column": c, "categories": ["a"]} for c in ("region", "age", "income")],
                "epsilon": 1,
            },
            "one or two columns",
        ),
        (
            {
                "kind": "histogram",
                "by": [{"column": "region", "categories": ["a"]}] * 2,
                "epsilon": 1,
            },
            "must differ",
        ),
        (
            {
                "kind": "histogram",
                "by": [
                    {"column": "region", "categories": [str(i) for i in range(200)]},
                    {"column": "age", "edges": list(range(102))},
                ],
                "epsilon": 1,
            },
            "at most 10000 cells",
        ),
        (
            {
                "kind": "quantiles",
                "column": "age",
                "lower": 0,
                "upper": 1,
                "alphas": [0, 0.5],
                "epsilon": 1,
            },
            "strictly between 0 and 1",
        ),
        (
            {
                "kind": "quantiles",
                "column": "age",
                "lower": 0,
                "upper": 1,
                "alphas": [0.5, 0.5],
                "epsilon": 1,
            },
            "repeat a value",
        ),
        (
            {
                "kind": "quantiles",
                "column": "age",
                "lower": 0,
                "upper": 1,
                "alphas": [],
                "epsilon": 1,
            },
            "at least one quantile",
        ),
        (
            {
                "kind": "quantiles",
                "column": "age",
                "lower": 0,
                "upper": 1,
                "steps": 20_000,
                "epsilon": 1,
            },
            "between 1 and 10000 steps",
        ),
        (
            {
                "kind": "quantiles",
                "column": "age",
                "lower": 0,
                "upper": 1,
                "steps": 2.5,
                "epsilon": 1,
            },
            "whole number",
        ),
        (
            {
                "kind": "quantiles",
                "column": "age",
                "lower": 0,
                "upper": 1,
                "alphas": [i / 30 for i in range(1, 25)],
                "epsilon": 1,
            },
            "at most 20 quantiles",
        ),
        (
            {"kind": "sum", "column": "salary", "lower": 0, "upper": 1, "epsilon": 1},
            "no column 'salary'",
        ),
    ],
)
def test_invalid_queries_are_refused_with_a_sentence(spec, message):
    with pytest.raises(EngineError) as caught:
        D.validate_queries(D.queries_from_list([spec]), columns=list(PEOPLE.columns))
    assert message in str(caught.value)


def test_a_release_needs_queries_and_refuses_too_many():
    with pytest.raises(EngineError, match="at least one query"):
        D.validate_queries([])
    with pytest.raises(EngineError, match="at most 50 queries"):
        D.validate_queries([D.Count(epsilon=0.1)] * 51)


def test_the_run_refuses_the_same_bad_queries_before_any_noise():
    with pytest.raises(EngineError, match="no column 'salary'"):
        D.run_release(PEOPLE, [D.Sum(column="salary", lower=0, upper=1, epsilon=1)])


def test_queries_round_trip_through_json():
    queries = [
        D.Count(epsilon=0.25),
        D.Histogram(
            by=(
                D.Grouping(column="region", categories=("N", "S")),
                D.Grouping(column="age", edges=(0, 18, 65, 120)),
            ),
            epsilon=0.5,
        ),
        D.Sum(column="income", lower=0, upper=1000, epsilon=0.3),
        D.Mean(column="income", lower=0, upper=1000, epsilon=0.3),
        D.Quantiles(column="age", lower=0, upper=120, alphas=(0.5, 0.9), steps=120, epsilon=0.4),
    ]
    again = D.queries_from_list(json.loads(json.dumps([q.to_dict() for q in queries])))
    assert again == queries


# --- The preview --------------------------------------------------------------------------------

QUERIES = [
    D.Count(epsilon=0.5),
    D.Histogram(by=(D.Grouping(column="region", categories=("N", "S", "E")),), epsilon=0.4),
    D.Sum(column="income", lower=0, upper=1000, epsilon=0.3),
    D.Mean(column="income", lower=0, upper=1000, epsilon=0.6),
    D.Quantiles(column="age", lower=0, upper=120, alphas=(0.5, 0.9), steps=240, epsilon=0.2),
]


def test_preview_equals_the_accuracy_of_the_measurement_that_runs():
    plans = D.preview(QUERIES, rows=len(PEOPLE))
    compiled = D.compile_release(QUERIES, list(PEOPLE.columns))
    assert [p.scale for p in plans] == [p.scale for p in compiled.plans]
    assert [p.privacy_loss for p in plans] == [p.privacy_loss for p in compiled.plans]
    result = compiled.run(PEOPLE)
    for plan, outcome in zip(plans, result.results, strict=True):
        assert outcome.plan.mechanism == plan.mechanism
        if plan.kind == "mean":
            # A mean's error depends on its count: the preview's at the rows given, the
            # result's at the noisy count. Its parts' errors are the same.
            assert plan.detail["sum_error"] == outcome.plan.detail["sum_error"]
            assert plan.detail["count_error"] == outcome.plan.detail["count_error"]
        else:
            assert outcome.error == plan.error


def test_preview_errors_are_opendps_accuracy_at_95_percent():
    count, histogram, total, mean, quantiles = D.preview(QUERIES)
    import opendp.prelude as dp

    assert count.mechanism == "discrete Laplace"
    # ε = 0.5 on a count (sensitivity 1): scale 2, 95 % accuracy from OpenDP.
    assert count.sensitivity == 1
    assert count.scale == pytest.approx(2.0, rel=1e-6)
    assert count.error == dp.discrete_laplacian_scale_to_accuracy(count.scale, 0.05)
    assert histogram.error == dp.discrete_laplacian_scale_to_accuracy(histogram.scale, 0.05)
    assert total.mechanism == "Laplace"
    assert total.sensitivity == pytest.approx(1000, rel=1e-5)
    assert total.scale == pytest.approx(1000 / 0.3, rel=1e-5)
    assert total.error == dp.laplacian_scale_to_accuracy(total.scale, 0.05)
    # Without the number of rows, a mean's error cannot be given; with it, it shrinks as n grows.
    assert mean.error is None
    by_rows = [D.preview([QUERIES[3]], rows=n)[0].error for n in (100, 10_000)]
    assert by_rows[0] == pytest.approx(100 * by_rows[1])
    assert quantiles.error_kind == "rank"
    # Smaller ε, more error: the steward sees the price before spending.
    assert D.preview([D.Count(epsilon=0.1)])[0].error > count.error


# --- Results ------------------------------------------------------------------------------------


def test_results_have_one_value_per_query_in_the_expected_shape():
    result = D.run_release(PEOPLE, QUERIES)
    count, histogram, total, mean, quantiles = result.results
    assert isinstance(count.value, int)
    assert [c["cell"] for c in histogram.value] == [["N"], ["S"], ["E"], [D.OTHER_LABEL]]
    assert histogram.value[-1]["other"] is True
    assert isinstance(total.value, float)
    assert mean.value is None or 0 <= mean.value <= 1000
    assert set(mean.detail) == {"noisy_sum", "noisy_count"}
    assert [q["label"] for q in quantiles.value] == ["median", "p90"]
    assert all(0 <= q["value"] <= 120 for q in quantiles.value)
    assert result.epsilon == pytest.approx(2.0)
    assert result.delta == 0
    rows = result.table_rows()
    assert len(rows) == 1 + 4 + 1 + 1 + 2
    assert {r["statistic"] for r in rows} == {r.plan.description for r in result.results}


def test_results_have_a_canonical_json_form_and_a_stable_sha256():
    result = D.run_release(PEOPLE, QUERIES)
    raw = result.canonical_json()
    again = D.ReleaseResult.from_dict(json.loads(raw))
    assert again.canonical_json() == raw
    assert again.sha256 == result.sha256 == __import__("hashlib").sha256(raw).hexdigest()
    assert D.canonical_json({"b": 1.5, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1.5}'.encode()
    with pytest.raises(ValueError):
        D.canonical_json({"a": float("nan")})
    # Each run draws new noise, hence new bytes.
    assert D.run_release(PEOPLE, QUERIES).sha256 != result.sha256


def test_histogram_cells_outside_the_declared_ones_go_to_the_other_cell():
    by_region = D.Histogram(by=(D.Grouping(column="region", categories=("N", "S")),), epsilon=EXACT)
    by_age = D.Histogram(by=(D.Grouping(column="age", edges=(0, 18, 65, 120)),), epsilon=EXACT)
    crossed = D.Histogram(
        by=(
            D.Grouping(column="region", categories=("N", "S")),
            D.Grouping(column="age", edges=(0, 18, 120)),
        ),
        epsilon=EXACT,
    )
    counts = [
        {tuple(c["cell"]): c["count"] for c in r.value}
        for r in D.run_release(PEOPLE, [by_region, by_age, crossed]).results
    ]
    other = (D.OTHER_LABEL,)
    # "E", "" and "X" are not declared: they are counted together, never named.
    assert counts[0] == {("N",): 3, ("S",): 2, other: 3}
    # Bins are [0, 18), [18, 65), [65, 120]; "abc" and 130 fall outside.
    assert counts[1] == {("[0, 18)",): 2, ("[18, 65)",): 2, ("[65, 120]",): 2, other: 2}
    assert counts[2] == {
        ("N", "[0, 18)"): 1,
        ("N", "[18, 120]"): 1,
        ("S", "[0, 18)"): 1,
        ("S", "[18, 120]"): 0,
        other: 5,
    }


def test_unparseable_and_missing_numbers_are_left_out_of_numeric_queries():
    data = frame(x=["1", "2", "", "abc", "nan", "inf", " 3 "])
    count_of_mean = D.run_release(data, [D.Mean(column="x", lower=0, upper=10, epsilon=EXACT)])
    # The mean's count (ε 25, noise of scale 1/25: non-zero with probability < 3e-11)
    # counts the three numbers only.
    assert count_of_mean.results[0].detail["noisy_count"] == 3


# --- Bounds -------------------------------------------------------------------------------------


def test_values_outside_the_bounds_are_clamped():
    huge = frame(x=["1e9"] * 100 + ["-1e9"] * 50)
    results = D.run_release(
        huge,
        [
            D.Sum(column="x", lower=0, upper=10, epsilon=10),
            D.Mean(column="x", lower=0, upper=10, epsilon=10),
            D.Quantiles(column="x", lower=0, upper=10, alphas=(0.9,), steps=10, epsilon=10),
        ],
    ).results
    total, mean, quantile = results
    # Clamped, the true sum is 100 * 10 + 50 * 0 = 1000. Laplace noise beyond 40 scales has
    # probability e^-40 / 2 ~ 2e-18.
    assert abs(total.value - 1000) <= 40 * total.plan.scale
    assert 0 <= mean.value <= 10
    assert abs(mean.detail["noisy_sum"] - 1000) <= 40 * mean.plan.detail["sum_scale"]
    # Clamped, 100 of the 150 values are 10: the 90th percentile is 10, and the next
    # candidate, 9, scores 80 rows worse (chosen with probability ~ exp(-80 / 0.18)).
    assert quantile.value[0]["value"] == 10


def test_a_sum_never_moves_beyond_n_times_the_bound_plus_noise():
    # A single row far beyond the upper bound moves the sum by at most the bound.
    base = frame(x=[str(v) for v in range(1, 21)])
    with_outlier = frame(x=[str(v) for v in range(1, 21)] + ["1e12"])
    query = [D.Sum(column="x", lower=0, upper=20, epsilon=20)]
    low = D.run_release(base, query).results[0]
    high = D.run_release(with_outlier, query).results[0]
    assert abs(low.value - 210) <= 40 * low.plan.scale
    assert abs(high.value - 230) <= 40 * high.plan.scale


# --- Composition --------------------------------------------------------------------------------


def test_the_accountants_total_equals_the_sum_of_the_queries_epsilon():
    compiled = D.compile_release(QUERIES, list(PEOPLE.columns))
    requested = sum(q.epsilon for q in QUERIES)
    assert compiled.epsilon == D.requested_epsilon(QUERIES)
    assert float(compiled.epsilon) == pytest.approx(requested)
    # OpenDP's accountant on the composed measurement: the sum of the parts, and a hair
    # under what is spent (each part is calibrated just under its ε).
    assert compiled.privacy_loss == float(compiled.measurement.map(1))
    assert compiled.privacy_loss == pytest.approx(
        sum(p.privacy_loss for p in compiled.plans), rel=1e-12
    )
    assert compiled.privacy_loss <= requested
    assert compiled.privacy_loss == pytest.approx(requested, rel=1e-6)
    for query, plan in zip(QUERIES, compiled.plans, strict=True):
        assert plan.privacy_loss <= query.epsilon
        assert plan.privacy_loss == pytest.approx(query.epsilon, rel=1e-6)


def test_the_requested_epsilon_is_an_exact_decimal_sum():
    from decimal import Decimal

    queries = [D.Count(epsilon=0.1), D.Count(epsilon=0.2)]
    assert D.requested_epsilon(queries) == Decimal("0.3")  # not 0.30000000000000004
    assert D.requested_delta(queries) == 0


# --- The noise has the scale OpenDP promises --------------------------------------------------
#
# N = 20,000 releases of one query on a fixed dataset; the errors (noisy - true) are compared
# with the distribution OpenDP documents for the calibrated scale b.
#
# 1. Dvoretzky-Kiefer-Wolfowitz (Massart's constant, valid for any distribution, discrete
#    included): P(sup_x |F_N(x) - F(x)| > t) <= 2 exp(-2 N t^2). With a false-failure budget
#    of 4e-7: t = sqrt(ln(2 / 4e-7) / (2 N)) = sqrt(15.42 / 40,000) = 0.0196.
# 2. (Counts) The share of errors at least OpenDP's 95 % accuracy a, against its exact
#    probability p = P(|X| >= ceil(a)) (which must be <= 5 %: OpenDP's promise). Chernoff's
#    bound with the Kullback-Leibler divergence, P(p_N >= p + t) <= exp(-N KL(p + t || p))
#    and likewise below, each side given 2e-7: N KL = ln(1 / 2e-7) = 15.42, which for
#    p ~ 0.05 and N = 20,000 gives t ~ 0.0080 above and ~ 0.0073 below.
# Together a false failure has probability at most 4e-7 + 2 * 2e-7 = 8e-7 < 1e-6.
# Power, measured once on the count below (ε = 0.5, b = 2): the sup gap to the true scale was
# 0.005, to a scale 20 % smaller or larger 0.040 and 0.045; the tail share 0.037 against
# intervals [0.012, 0.022] and [0.063, 0.083]. Either check alone catches a 20 % error.

DRAWS = 20_000
DKW_BUDGET = 4e-7
TAIL_BUDGET = 2e-7


def dkw_tolerance(n: int, budget: float) -> float:
    return math.sqrt(math.log(2 / budget) / (2 * n))


def kl(q: float, p: float) -> float:
    def term(a: float, b: float) -> float:
        return 0.0 if a == 0 else a * math.log(a / b)

    return term(q, p) + term(1 - q, 1 - p)


def chernoff_interval(p: float, n: int, budget: float) -> tuple[float, float]:
    """[lo, hi] around p with P(p_N > hi) <= budget and P(p_N < lo) <= budget."""
    target = math.log(1 / budget) / n
    # kl(q, p) grows as q moves away from p on either side: bisect for kl = target.
    lo, hi = p, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if kl(mid, p) < target else (lo, mid)
    upper = hi
    lo, hi = 0.0, p
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if kl(mid, p) < target else (mid, hi)
    return lo, upper


def draws(query: D.Query, data: pd.DataFrame, n: int = DRAWS) -> tuple[D.QueryPlan, np.ndarray]:
    """``n`` releases of ``query`` on ``data``, through the composed measurement that runs."""
    compiled = D.compile_release([query], list(data.columns))
    measurement = compiled.measurement
    return compiled.plans[0], np.array([measurement(data)[0] for _ in range(n)], dtype=float)


def discrete_laplace_cdf(k: np.ndarray, scale: float) -> np.ndarray:
    """P(X <= k) for P(X = k) proportional to exp(-|k| / scale), k integer."""
    r = math.exp(-1 / scale)
    return np.where(k < 0, r ** np.abs(k) / (1 + r), 1 - r ** (k + 1) / (1 + r))


# The distribution tests need their tens of thousands of draws (the tolerances rest on them).
@pytest.mark.slow
def test_count_noise_has_the_discrete_laplace_scale_opendp_promises():
    n_rows = 40
    plan, noisy = draws(D.Count(epsilon=0.5), frame(x=range(n_rows)))
    errors = noisy - n_rows
    assert np.all(errors == np.round(errors)), "count noise is whole numbers"

    support = np.arange(errors.min() - 1, errors.max() + 1)
    empirical = np.searchsorted(np.sort(errors), support, side="right") / DRAWS
    gap = np.max(np.abs(empirical - discrete_laplace_cdf(support, plan.scale)))
    assert gap <= dkw_tolerance(DRAWS, DKW_BUDGET), gap

    threshold = math.ceil(plan.error)
    r = math.exp(-1 / plan.scale)
    p = 2 * r**threshold / (1 + r)  # P(|X| >= threshold), threshold >= 1
    assert p <= 0.05  # OpenDP's accuracy holds with 95 % at least
    share = float(np.mean(np.abs(errors) >= threshold))
    lo, hi = chernoff_interval(p, DRAWS, TAIL_BUDGET)
    assert lo <= share <= hi, (share, p, lo, hi)


@pytest.mark.slow
def test_sum_noise_has_the_laplace_scale_opendp_promises():
    # Float noise costs more per draw: 10,000 draws, so DKW's tolerance is
    # sqrt(ln(2 / 4e-7) / 20,000) = 0.0278 (one check: a false failure has probability 4e-7).
    n = 10_000
    values = [1.5, 2.0, 3.25, 4.0]  # sum 10.75, exact in binary
    plan, noisy = draws(D.Sum(column="x", lower=0, upper=5, epsilon=1.0), frame(x=values), n)
    errors = np.sort(noisy - sum(values))
    b = plan.scale
    cdf = np.where(errors < 0, 0.5 * np.exp(errors / b), 1 - 0.5 * np.exp(-errors / b))
    ranks = np.arange(1, n + 1) / n
    gap = max(np.max(ranks - cdf), np.max(cdf - (ranks - 1 / n)))
    assert gap <= dkw_tolerance(n, DKW_BUDGET), gap
    # The accuracy OpenDP promises at 95 % is the Laplace quantile b ln(1 / 0.05).
    assert plan.error == pytest.approx(b * math.log(20), rel=1e-9)


def test_the_request_form_is_generated_from_the_registry_of_query_kinds():
    """Every registered kind is offered; a row posted with a kind keeps exactly the parts of
    the form its registry entry names."""
    from releases.forms import StatisticsQueryForm

    assert [k for k, _ in StatisticsQueryForm.KINDS[1:]] == list(D.QUERY_TYPES)
    values = {
        "epsilon": "0.5",
        "delta": "0.000001",
        "column": "age",
        "source": "data",
        "lower": "0",
        "upper": "100",
        "alphas": "0.5, 0.9",
    }
    expected = {
        "groupings": {"by"},
        "delta": {"delta"},
        "column": {"column"},
        "bounds": {"lower", "upper"},
        "alphas": {"alphas"},
    }
    for kind, cls in D.QUERY_TYPES.items():
        form = StatisticsQueryForm({"kind": kind, **values}, columns=["age"])
        assert form.is_valid(), (kind, form.errors)
        keys = set(form.item()) - {"kind", "epsilon"}
        assert keys == set().union(*(expected[p] for p in cls.form_parts)), kind
        D.query_from_dict(form.item()).validate(["age"])
    assert StatisticsQueryForm().used_by["bounds"] == "sum, mean, quantiles"
