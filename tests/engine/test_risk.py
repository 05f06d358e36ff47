"""Re-identification risk: figures checked by hand on small class-size lists, and the
population-uniqueness estimators against independent implementations."""

import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from releases.engine.errors import EngineError
from releases.engine.risk import (
    AttackerRisk,
    PopulationModel,
    class_sizes_of,
    expected_inverse_population_size,
    population_uniqueness,
    population_uniques,
    risk_summary,
)
from tests.conftest import ADULT_QUASI_IDENTIFIERS as ADULT_QIS


def test_hand_computed_summary():
    # 20 records in classes of 1, 4, 5 and 10.
    r = risk_summary([1, 4, 5, 10])
    assert r.highest == pytest.approx(1.0)  # 1 / smallest class (1)
    assert r.average == pytest.approx(4 / 20)  # classes / records
    # risk 1/1 and 1/4 exceed 0.2; 1/5 = 0.2 does not (strictly greater, as ARX)
    assert r.records_at_risk == pytest.approx((1 + 4) / 20)
    assert r.sample_uniques == pytest.approx(1 / 20)
    assert r.threshold == 0.2


def test_threshold_is_strict_and_configurable():
    # every record has risk exactly 1/5
    assert risk_summary([5, 5], threshold=0.2).records_at_risk == 0.0
    assert risk_summary([5, 5], threshold=0.19).records_at_risk == pytest.approx(1.0)
    assert risk_summary([5, 5], threshold=0.5).threshold == 0.5


def test_k_anonymous_table_has_no_uniques_and_bounded_highest_risk():
    r = risk_summary(np.array([3, 7, 12]))
    assert r.highest == pytest.approx(1 / 3)
    assert r.sample_uniques == 0.0
    assert r.average == pytest.approx(3 / 22)


def test_all_unique_records():
    r = risk_summary([1] * 8)
    assert (r.highest, r.average, r.records_at_risk, r.sample_uniques) == (1.0, 1.0, 1.0, 1.0)


@pytest.mark.parametrize("empty", [[], np.array([], dtype=int), [0, 0]])
def test_empty_input_gives_zeros(empty):
    r = risk_summary(empty)
    assert (r.highest, r.average, r.records_at_risk, r.sample_uniques) == (0.0, 0.0, 0.0, 0.0)
    assert r.journalist == AttackerRisk(0.0, 0.0, 0.0) and r.marketer == 0.0


def test_as_dict_is_json_with_the_prosecutor_figures_on_top():
    d = risk_summary([2, 3]).as_dict()
    assert {"highest", "average", "records_at_risk", "sample_uniques", "threshold"} <= set(d)
    assert all(isinstance(d[k], float) for k in ("highest", "average", "records_at_risk"))
    assert d["prosecutor"] == {"highest": 0.5, "average": 2 / 5, "records_at_risk": 1.0}
    # Without a population model the released table is taken as the population (as ARX
    # does without a population table): journalist = prosecutor, marketer = classes / rows.
    assert d["journalist"] == d["prosecutor"]
    assert d["marketer"] == {"average": 2 / 5}
    assert d["population"] is None
    json.dumps(d)


def test_class_sizes_treat_missing_as_a_value():
    df = pd.DataFrame(
        {"a": ["x", "x", "", "", "", "y"], "b": ["1", "1", "1", "1", "", "1"]}, dtype=str
    )
    assert sorted(class_sizes_of(df, ["a", "b"]).tolist()) == [1, 1, 2, 2]
    assert sorted(class_sizes_of(df, ["a"]).tolist()) == [1, 2, 3]
    assert class_sizes_of(df, []).tolist() == [6]
    assert class_sizes_of(df.iloc[:0], ["a"]).tolist() == []


def test_summary_of_class_sizes_of_a_table():
    df = pd.DataFrame({"zip": ["1", "1", "1", "2", "3", "3"]})
    r = risk_summary(class_sizes_of(df, ["zip"]))
    assert r.highest == 1.0  # zip 2 is unique
    assert r.average == pytest.approx(3 / 6)
    assert r.sample_uniques == pytest.approx(1 / 6)
    # risks: 1/3 (3 rows), 1 (1 row), 1/2 (2 rows): all above 0.2
    assert r.records_at_risk == 1.0


# ----------------------------------------------------------------------- population uniqueness
# The estimators are written again here, from their definitions (ARX's ModelPitman,
# ModelZayatz, ModelSNB, RiskModelPopulationUniqueness), with plain sums, math.comb and
# scipy's general-purpose root finder instead of the engine's Newton iterations.


def histogram(sizes):
    counts = Counter(int(s) for s in sizes)
    return sorted(counts.items())  # [(class size, number of classes)]


def zayatz_by_hand(sizes, big_n):
    hist = histogram(sizes)
    n = sum(k * c for k, c in hist)
    c1 = dict(hist).get(1, 0)

    def log_comb(a, b):
        return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)

    def p_one(k):  # hypergeometric: exactly 1 of the k population records is drawn
        if big_n < 10_000:
            return k * math.comb(big_n - k, n - 1) / math.comb(big_n, n)
        return k * math.exp(log_comb(big_n - k, n - 1) - log_comb(big_n, n))

    conditional = c1 * p_one(1) / sum(c * p_one(k) for k, c in hist)
    return c1 * conditional / (n / big_n) / big_n


def pitman_by_hand(sizes, big_n):
    hist = histogram(sizes)
    n = sum(k * c for k, c in hist)
    u = sum(c for _, c in hist)

    def gradient(x):  # d log L / d theta, d log L / d alpha of the Pitman sampling formula
        theta, alpha = x
        i = np.arange(1, u)
        d_theta = np.sum(1 / (theta + i * alpha)) - np.sum(1 / (theta + np.arange(1, n)))
        d_alpha = np.sum(i / (theta + i * alpha)) - sum(
            c * np.sum(1 / (np.arange(1, k) - alpha)) for k, c in hist if k > 1
        )
        return [d_theta, d_alpha]

    for start in [(1.0, 0.5), (10.0, 0.5), (100.0, 0.5), (1000.0, 0.8)]:
        root, _, ok, _ = optimize.fsolve(gradient, start, full_output=True, xtol=1e-12)
        if ok == 1 and root[0] >= 0 and 0 < root[1] < 1:
            theta, alpha = root
            log_uniques = (
                math.lgamma(theta + 1) - math.lgamma(theta + alpha) + alpha * math.log(big_n)
            )
            return math.exp(log_uniques) / big_n
    raise AssertionError("no root")


def test_zayatz_on_a_hand_computed_histogram():
    # Classes of sizes 1, 1, 1, 2, 3: n = 8, c1 = 3, drawn from N = 80 (fraction 0.1).
    # P(draw 1 of k) relative to k = 1:  k = 2: 2 * 72/79 = 1.822785,
    #                                    k = 3: 3 * 72/79 * 71/78 = 2.488802
    # P(unique | sample unique) = 3 / (3 + 1.822785 + 2.488802) = 0.410308
    # population uniques = 3 * 0.410308 / 0.1 = 12.30923, share = 12.30923 / 80 = 0.153865
    sizes = [1, 1, 1, 2, 3]
    assert zayatz_by_hand(sizes, 80) == pytest.approx(0.153865, abs=1e-6)
    assert population_uniques(sizes, 80, "zayatz") == pytest.approx(0.153865, abs=1e-6)
    estimate = population_uniqueness(sizes, 80)
    assert estimate.zayatz == pytest.approx(0.153865, abs=1e-6)
    assert estimate.sample_uniques == pytest.approx(3 / 8)
    assert estimate.sampling_fraction == pytest.approx(0.1)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("fraction", [0.01, 0.05])
def test_pitman_matches_the_likelihood_equations_solved_independently(seed, fraction):
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.zipf(2.2, 150), 40)  # two thirds uniques, a long tail
    big_n = round(int(sizes.sum()) / fraction)
    expected = pitman_by_hand(sizes, big_n)
    assert population_uniques(sizes, big_n, "pitman") == pytest.approx(expected, rel=1e-5)
    assert population_uniques(sizes, big_n, "zayatz") == pytest.approx(
        zayatz_by_hand(sizes, big_n), rel=1e-9
    )
    # Dankar's rule at a fraction of at most 10 %: Pitman.
    estimate = population_uniqueness(sizes, big_n)
    assert estimate.dankar_model == "pitman"
    assert estimate.dankar == pytest.approx(expected, rel=1e-5)


def test_snb_solves_arx_equations():
    # ARX's SNB: K classes by its Shlosser estimate, then (alpha, beta) with
    #   c1 = K f (b / (1-D))^a (a D / (1-D) + 1),
    #   c2 = K a b^a f^2 (1-b) / 2 (1-D)^(a+2) (2 - (1-a) D),  D = (1-f)(1-b);
    # uniques = K b^a.
    sizes = [1] * 60 + [2] * 14 + [3] * 6 + [4] * 3 + [6] * 2
    n = sum(sizes)
    big_n = round(n / 0.9)
    f = n / big_n
    hist = histogram(sizes)
    c1, c2, u = 60, 14, len(sizes)
    var1 = sum(k * f * f * (1 - f * f) ** (k - 1) * c for k, c in hist)
    var2 = sum((1 - f) ** k * c * (1 + f) ** k - 1 for k, c in hist)
    var3 = sum((1 - f) ** k * c for k, c in hist)
    var4 = sum(k * f * (1 - f) ** (k - 1) * c for k, c in hist)
    big_k = u + c1 * (var1 / var2) * (var3 / var4) ** 2

    def equations(x):
        a, b = x
        d = (1 - f) * (1 - b)
        return [
            big_k * f * (b / (1 - d)) ** a * (a * d / (1 - d) + 1) - c1,
            big_k * a * b**a * f * f * (1 - b) / 2 * (1 - d) ** (a + 2) * (2 - (1 - a) * d) - c2,
        ]

    root, _, ok, _ = optimize.fsolve(equations, (0.5, 0.5), full_output=True, xtol=1e-12)
    assert ok == 1
    expected = big_k * root[1] ** root[0] / big_n
    estimate = population_uniqueness(sizes, big_n)
    assert estimate.snb == pytest.approx(expected, rel=1e-5)
    # Dankar's rule above 10 %: the smaller of Zayatz and SNB.
    assert estimate.dankar == pytest.approx(min(estimate.snb, estimate.zayatz))
    assert estimate.dankar_model == ("snb" if estimate.snb <= estimate.zayatz else "zayatz")


def test_no_sample_uniques_means_no_population_uniques():
    estimate = population_uniqueness([2, 3, 5], 1000)
    assert (estimate.pitman, estimate.zayatz, estimate.snb, estimate.dankar) == (0, 0, 0, 0)
    assert estimate.dankar_model == "none"
    assert population_uniques([2, 3, 5], 1000, "dankar") == 0.0


def test_a_failed_estimate_is_reported_as_none_not_a_crash():
    # SNB has no root here (ARX's equations): reported as None, Dankar falls back on Zayatz.
    sizes = [1] * 30 + [2] * 3
    estimate = population_uniqueness(sizes, round(36 / 0.3))
    assert estimate.snb is None
    assert estimate.dankar_model == "zayatz" and estimate.dankar == estimate.zayatz


def test_population_uniqueness_on_adult(adult):
    """Adult, 8 quasi-identifiers, as a 1 % sample: the engine's Pitman and Zayatz against the
    independent versions above."""
    sizes = class_sizes_of(adult, ADULT_QIS)
    big_n = round(len(adult) / 0.01)
    estimate = population_uniqueness(sizes, big_n)
    assert estimate.population_size == 3_016_200
    assert estimate.sample_uniques == pytest.approx(float((sizes == 1).sum()) / len(adult))
    assert estimate.zayatz == pytest.approx(zayatz_by_hand(sizes, big_n), rel=1e-6)
    assert estimate.pitman == pytest.approx(pitman_by_hand(sizes, big_n), rel=1e-5)
    assert estimate.dankar_model == "pitman" and estimate.dankar == estimate.pitman


# ----------------------------------------------------------------------- journalist, marketer


def inverse_population_size_by_series(f, fraction, terms=4000):
    # E[1/F | f] = sum_{h >= f} (1/h) C(h-1, f-1) pi^f (1-pi)^(h-f)
    return sum(
        math.comb(h - 1, f - 1) * fraction**f * (1 - fraction) ** (h - f) / h
        for h in range(f, f + terms)
    )


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.8])
def test_expected_inverse_population_size(fraction):
    sizes = np.array([1, 2, 3, 7])
    expected = [inverse_population_size_by_series(int(f), fraction) for f in sizes]
    assert expected_inverse_population_size(sizes, fraction) == pytest.approx(expected, rel=1e-9)
    # f = 1 by hand: pi / (1 - pi) * ln(1 / pi); at pi = 0.5 that is ln 2 = 0.693147
    assert expected_inverse_population_size(np.array([1]), 0.5)[0] == pytest.approx(
        0.693147, abs=1e-6
    )
    # The whole population (pi = 1): the prosecutor's 1 / f.
    assert expected_inverse_population_size(sizes, 1.0) == pytest.approx(1 / sizes)


def test_journalist_and_marketer_risk_with_a_population_model():
    # Classes 1, 2, 2, 5 (10 records) from a population of 50 (fraction 0.2).
    sizes = [1, 2, 2, 5]
    r = risk_summary(sizes, threshold=0.2, population=PopulationModel(population_size=50))
    risk = {f: inverse_population_size_by_series(f, 0.2) for f in (1, 2, 5)}
    # by hand: E[1/F | 1] = 0.2 / 0.8 * ln 5 = 0.402359
    assert risk[1] == pytest.approx(0.402359, abs=1e-6)
    marketer = (1 * risk[1] + 2 * risk[2] + 2 * risk[2] + 5 * risk[5]) / 10
    assert r.marketer == pytest.approx(marketer)
    assert r.journalist.highest == pytest.approx(risk[1])
    assert r.journalist.average == pytest.approx(max(4 / 50, marketer))
    at_risk = sum(f for f in sizes if risk[f] > 0.2) / 10
    assert r.journalist.records_at_risk == pytest.approx(at_risk)
    # The prosecutor figures do not depend on the population.
    assert (r.highest, r.average) == (1.0, 4 / 10)
    assert r.population.population_size == 50
    assert r.as_dict()["population_model"] == "population of 50"


def test_population_model_validation():
    assert PopulationModel(sampling_fraction=0.01).size(30162) == 3_016_200
    assert PopulationModel(population_size=1000).size(10) == 1000
    for bad, message in [
        (PopulationModel(), "either the population size or the sampling fraction"),
        (PopulationModel(100, 0.5), "either the population size or the sampling fraction"),
        (PopulationModel(sampling_fraction=1.5), "sampling fraction"),
        (PopulationModel(population_size=0), "population size"),
    ]:
        with pytest.raises(EngineError, match=message):
            bad.validate()
    assert PopulationModel.from_spec({"sampling_fraction": "0.01"}) == PopulationModel(None, 0.01)
    assert PopulationModel.from_spec(None) is None
