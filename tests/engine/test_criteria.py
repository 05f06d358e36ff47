"""Privacy models as one definition each: parameters, storage, validation, check lines, the
new models' guarantees counted independently on the release, Mondrian, and the candidates."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, PrivacyModel, anonymize
from releases.engine.criteria import (
    POPULATION_PARAMS,
    REGISTRY,
    AverageRisk,
    BetaLikeness,
    Classes,
    DataContext,
    DeltaDisclosure,
    HighestRisk,
    KAnonymity,
    LDiversity,
    PopulationUniqueness,
    TCloseness,
    checks,
    size_threshold,
)
from releases.engine.privacy import SensitiveCounts
from releases.engine.risk import PopulationModel

QIS = ["age", "zip", "sex", "marital"]


def _config(table, model, sensitive=("disease",), **kwargs):
    data, hierarchies, disease = table
    return AnonymizationConfig(
        quasi_identifiers=hierarchies,
        model=model,
        sensitive=list(sensitive),
        identifiers=["name"],
        sensitive_hierarchies={"disease": disease},
        **kwargs,
    )


EVERY_MODEL = PrivacyModel(
    criteria=[
        KAnonymity(k=3),
        LDiversity(l=2, variant="recursive", c=3),
        TCloseness(t=0.4, distance="hierarchical"),
        DeltaDisclosure(delta=2.5),
        BetaLikeness(beta=3, variant="enhanced"),
        HighestRisk(risk=0.2),
        AverageRisk(risk=0.25),
        PopulationUniqueness(risk=0.05, estimator="zayatz"),
    ],
    suppression_limit=0.05,
    population=PopulationModel(sampling_fraction=0.1),
)


# ---------------------------------------------------------------------------- definitions


def test_every_model_is_registered_with_its_parameters():
    assert list(REGISTRY) == [
        "k-anonymity",
        "l-diversity",
        "t-closeness",
        "delta-disclosure",
        "beta-likeness",
        "highest-risk",
        "average-risk",
        "population-uniqueness",
        "k-map",
        "delta-presence",
        "safepub",
    ]
    flags = [p.flag for kind in REGISTRY.values() for p in kind.params] + [
        p.flag for p in POPULATION_PARAMS
    ]
    assert len(flags) == len(set(flags)) and all(f.startswith("--") for f in flags)
    for kind in REGISTRY.values():
        assert kind.label and kind.summary and kind.params[0].required
        keys = {p.key(kind.name) for p in kind.params}
        assert all(k.startswith(kind.name + "__") for k in keys)


def test_a_model_round_trips_through_its_json_spec_and_its_form_fields():
    spec = EVERY_MODEL.to_spec()
    assert json.loads(json.dumps(spec)) == spec
    assert spec["criteria"][0] == {"model": "k-anonymity", "k": 3}
    assert PrivacyModel.from_spec(spec) == EVERY_MODEL
    assert PrivacyModel.from_fields(EVERY_MODEL.fields()) == EVERY_MODEL
    # A bare list, with the limit given beside it.
    bare = PrivacyModel.from_spec(
        [{"model": "k-anonymity", "k": 5}, {"model": "l-diversity", "variant": "entropy", "l": 2}],
        suppression_limit=0.05,
    )
    assert bare == PrivacyModel(k=5, l=2, l_variant="entropy", suppression_limit=0.05)
    # Form fields as strings, as a browser sends them; empty fields are models not asked for.
    fields = {
        "delta-disclosure__delta": "1.5",
        "beta-likeness__beta": "",
        "population-uniqueness__risk": "0.01",
        "population-uniqueness__estimator": "pitman",
        "population_size": "1000000",
        "suppression_limit": "0.1",
    }
    model = PrivacyModel.from_fields(fields)
    assert model.criteria == (
        DeltaDisclosure(delta=1.5),
        PopulationUniqueness(risk=0.01, estimator="pitman"),
    )
    assert model.population == PopulationModel(population_size=1_000_000)
    assert model.suppression_limit == 0.1


def test_the_keyword_constructor_builds_the_same_criteria():
    model = PrivacyModel(k=5, l=2, l_variant="entropy", t=0.2, suppression_limit=0.05)
    assert model.criteria == (
        KAnonymity(k=5),
        LDiversity(l=2, variant="entropy"),
        TCloseness(t=0.2, distance="equal"),
    )
    assert (model.k, model.l, model.l_variant, model.t, model.t_distance) == (
        5,
        2,
        "entropy",
        0.2,
        "equal",
    )
    assert PrivacyModel(criteria=[DeltaDisclosure(delta=1)]).k == 1
    assert model.describe() == (
        "k=5, entropy 2-diversity, 0.2-closeness (equal distance), at most 5% of rows suppressed"
    )
    assert [c.describe() for c in EVERY_MODEL.criteria[3:]] == [
        "2.5-disclosure privacy",
        "enhanced 3-likeness",
        "highest re-identification risk at most 0.2",
        "average re-identification risk at most 0.25",
        "population uniqueness at most 0.05 (Zayatz)",
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([{"model": "k-anonymity", "k": 0}], r"k must be a whole number of at least 1, not 0"),
        ([{"model": "k-anonymity", "k": "five"}], r"k must be a number, not 'five'"),
        ([{"model": "delta-disclosure", "delta": 0}], r"δ must be above 0"),
        ([{"model": "beta-likeness", "beta": -1}], r"β must be above 0"),
        ([{"model": "beta-likeness", "beta": 1, "variant": "x"}], r"Unknown β-likeness variant"),
        ([{"model": "average-risk", "risk": 1.5}], r"average risk must be above 0 and at most 1"),
        ([{"model": "highest-risk", "risk": 0}], r"highest risk must be above 0"),
        ([{"model": "l-diversity", "l": 2, "variant": "recursive"}], r"needs a positive c"),
        ([{"model": "t-closeness", "t": 2}], r"t must be between 0 and 1"),
        ([{"model": "population-uniqueness", "risk": 0.01}], r"needs the population size"),
        ([{"model": "k-anonymity", "kk": 2}], r"k-anonymity has no parameter 'kk'"),
        ([{"model": "magic"}], r"Unknown privacy model 'magic'"),
        ([{"k": 2}], r"needs its name"),
        ([{"model": "delta-disclosure"}], r"δ-disclosure privacy needs δ"),
    ],
)
def test_invalid_models_are_one_sentence(spec, message):
    with pytest.raises(EngineError, match=message):
        PrivacyModel.from_spec(spec)


def test_arx_size_threshold_for_a_highest_risk():
    # ARX's ParameterTranslation: floor(1/r), one more when 1/floor(1/r) exceeds r by >= 1 %.
    assert size_threshold(0.2) == 5
    assert size_threshold(0.1) == 10
    assert size_threshold(0.15) == 7  # 1/6 = 0.1667 is 11 % above 0.15
    assert size_threshold(0.165) == 7  # 1/6 is 1.0 % above 0.165
    assert size_threshold(0.166) == 6  # 1/6 is 0.4 % above 0.166: within ARX's 1 %


def test_implied_class_sizes_are_sound():
    # A class smaller than the bound fails δ-disclosure / β-likeness whatever it holds.
    codes = np.repeat([0, 1, 2, 3], [5, 3, 1, 1])  # shares .5 .3 .1 .1
    data = DataContext(10, {"s": codes}, {"s": ["a", "b", "c", "d"]})
    for criterion in (
        DeltaDisclosure(delta=0.5),
        DeltaDisclosure(delta=0.9),
        BetaLikeness(beta=0.5),
        BetaLikeness(beta=1, variant="enhanced"),
    ):
        bound = criterion.min_class_size(data)
        assert bound > 1
        for size in range(1, bound):
            for values in itertools.product(range(4), repeat=size):
                sc = SensitiveCounts.from_codes(np.zeros(size, int), np.array(values), 1, 4)
                assert criterion.class_fails(Classes(np.array([size]), {"s": sc}), data)[0]


# ---------------------------------------------------------------------------- guarantees


def _released_distribution(result, data, column):
    """Per released class (as the recipient groups it), its value shares, and the shares of
    the input (ARX measures against the whole input)."""
    table = data[column].value_counts(normalize=True)
    shares = result.data.groupby(QIS)[column].value_counts(normalize=True).rename("q")
    shares = shares.reset_index()
    shares["p"] = shares[column].map(table)
    return shares


@pytest.mark.parametrize("limit", [0.0, 0.05])
def test_delta_disclosure_counted_on_the_release(small_table, limit):
    model = PrivacyModel(k=2, criteria=[DeltaDisclosure(delta=1.0)], suppression_limit=limit)
    result = anonymize(small_table[0], _config(small_table, model))
    shares = _released_distribution(result, small_table[0], "disease")
    ratio = np.abs(np.log2(shares["q"] / shares["p"]))
    assert ratio.max() < 1.0
    entry = next(m for m in result.models if m["model"] == "delta-disclosure")
    assert entry["achieved"]["delta"]["disease"] == pytest.approx(ratio.max())
    assert result.classes["disease:delta"].max() == pytest.approx(ratio.max())


@pytest.mark.parametrize("variant", ["basic", "enhanced"])
def test_beta_likeness_counted_on_the_release(small_table, variant):
    model = PrivacyModel(criteria=[BetaLikeness(beta=0.8, variant=variant)], suppression_limit=0.05)
    result = anonymize(small_table[0], _config(small_table, model))
    shares = _released_distribution(result, small_table[0], "disease")
    gain = (shares["q"] - shares["p"]) / shares["p"]
    cap = 0.8 if variant == "basic" else np.minimum(0.8, -np.log(shares["p"]))
    assert (gain <= cap + 1e-12).all()
    entry = next(m for m in result.models if m["model"] == "beta-likeness")
    assert entry["achieved"]["beta"]["disease"] == pytest.approx(gain.max())


def test_risk_models_counted_on_the_release(small_table):
    model = PrivacyModel(
        criteria=[HighestRisk(risk=0.15), AverageRisk(risk=0.05)], suppression_limit=0.1
    )
    result = anonymize(small_table[0], _config(small_table, model, sensitive=()))
    sizes = result.data.groupby(QIS).size()
    assert 1 / sizes.min() <= 1 / 7  # ARX: risk 0.15 means classes of at least 7
    assert len(sizes) / sizes.sum() <= 0.05
    assert result.risk_after.average == pytest.approx(len(sizes) / sizes.sum())
    assert result.suppressed <= 0.1 * len(small_table[0])


def test_check_lines_come_from_the_stored_summary(small_table):
    model = PrivacyModel(
        criteria=[
            KAnonymity(k=3),
            DeltaDisclosure(delta=2),
            BetaLikeness(beta=2),
            AverageRisk(risk=0.2),
            PopulationUniqueness(risk=0.2, estimator="zayatz"),
        ],
        suppression_limit=0.1,
        population=PopulationModel(sampling_fraction=0.1),
    )
    result = anonymize(small_table[0], _config(small_table, model))
    summary = json.loads(json.dumps(result.report()))  # as stored
    lines = checks(summary)
    assert [c.name for c in lines] == [
        "k-anonymity",
        "δ-disclosure privacy of disease",
        "basic β-likeness of disease",
        "average re-identification risk",
        "population uniqueness",
        "suppression limit",
    ]
    assert all(c.passed for c in lines), lines
    # A summary whose figures break the model fails its line.
    broken = json.loads(json.dumps(summary))
    broken["models"][1]["achieved"]["delta"]["disease"] = 2.0
    broken["models"][3]["achieved"]["average_risk"] = 0.3
    broken["suppressed"] = 41  # 10 % of 400 rows: 40 allowed
    failed = [c.name for c in checks(broken) if not c.passed]
    assert failed == [
        "δ-disclosure privacy of disease",
        "average re-identification risk",
        "suppression limit",
    ]
    assert model.class_column_labels(["disease"])[-2:] == [
        ("disease:delta", "δ (disease)"),
        ("disease:beta", "largest relative gain (disease)"),
    ]


def test_borderline_classes_are_those_at_or_near_each_threshold(small_table):
    model = PrivacyModel(
        criteria=[KAnonymity(k=3), DeltaDisclosure(delta=2.0), BetaLikeness(beta=2.0)],
        suppression_limit=0.1,
    )
    result = anonymize(small_table[0], _config(small_table, model))
    shares = _released_distribution(result, small_table[0], "disease")
    shares["gain"] = (shares["q"] - shares["p"]) / shares["p"]
    shares["delta"] = np.abs(np.log2(shares["q"] / shares["p"]))
    per_class = shares.groupby(QIS).agg(gain=("gain", "max"), delta=("delta", "max"))
    per_class["size"] = result.data.groupby(QIS).size()
    expected = {
        "k-anonymity": per_class["size"] == 3,
        "delta-disclosure": per_class["delta"] >= 0.9 * 2.0,
        "beta-likeness": per_class["gain"] >= 0.9 * 2.0,
    }
    flags = result.classes.set_index(QIS)["borderline"].str.split(",")
    for name, near in expected.items():
        flagged = flags.map(lambda names, n=name: n in names).reindex(per_class.index)
        assert (flagged == near).all(), name
    assert any(near.any() for near in expected.values())  # the table has some to show
    assert (result.classes["fails"] == "").all()


def test_report_holds_population_estimates_before_and_after(small_table):
    model = PrivacyModel(
        k=2,
        criteria=[PopulationUniqueness(risk=0.01, estimator="dankar")],
        suppression_limit=0.05,
        population=PopulationModel(sampling_fraction=0.05),
    )
    report = anonymize(small_table[0], _config(small_table, model, sensitive=())).report()
    for when in ("risk_before", "risk_after"):
        population = report[when]["population"]
        assert population["population_size"] == 8000  # 400 rows / 0.05
        assert set(population) >= {"pitman", "zayatz", "snb", "dankar", "dankar_model"}
        assert report[when]["journalist"]["highest"] <= report[when]["highest"]
    achieved = report["models"][1]["achieved"]
    # At most 1 % estimated unique, or (as ARX accepts) no sample unique left at all.
    assert achieved["population_uniques"] <= 0.01
    assert achieved["population_uniques"] > 0 or achieved["sample_uniques"] == 0
    assert report["risk_before"]["population"]["dankar"] > 0.01


# ---------------------------------------------------------------------------- Mondrian


def test_mondrian_enforces_the_per_class_models_and_average_risk(small_table):
    model = PrivacyModel(
        k=2,
        criteria=[DeltaDisclosure(delta=1.5), BetaLikeness(beta=1.5), AverageRisk(risk=0.1)],
    )
    result = anonymize(small_table[0], _config(small_table, model, algorithm="mondrian"))
    shares = _released_distribution(result, small_table[0], "disease")
    assert np.abs(np.log2(shares["q"] / shares["p"])).max() < 1.5
    assert ((shares["q"] - shares["p"]) / shares["p"]).max() <= 1.5
    sizes = result.data.groupby(QIS).size()
    assert sizes.min() >= 2 and len(sizes) / len(result.data) <= 0.1
    assert (result.classes["fails"] == "").all()
    assert all(c.passed for c in checks(result.report()))


def test_mondrian_refuses_population_uniqueness(small_table):
    model = PrivacyModel(
        criteria=[PopulationUniqueness(risk=0.1)],
        population=PopulationModel(sampling_fraction=0.5),
    )
    with pytest.raises(EngineError, match="Population uniqueness cannot be enforced by Mondrian"):
        anonymize(small_table[0], _config(small_table, model, sensitive=(), algorithm="mondrian"))


# ---------------------------------------------------------------------------- candidates


def _dominates(a, b):
    at_least = (
        a.loss <= b.loss and a.highest_risk <= b.highest_risk and a.suppressed <= b.suppressed
    )
    better = a.loss < b.loss or a.highest_risk < b.highest_risk or a.suppressed < b.suppressed
    return at_least and better


def test_candidates_are_the_pareto_front_of_valid_transformations(small_table):
    model = PrivacyModel(k=4, l=2, suppression_limit=0.05)
    result = anonymize(small_table[0], _config(small_table, model))
    front = result.candidates
    assert len(front) > 1
    assert [c.loss for c in front] == sorted(c.loss for c in front)
    optimum = [c for c in front if c.optimum]
    assert len(optimum) == 1 and optimum[0].levels == result.levels
    assert result.optimum == optimum[0]
    assert not any(_dominates(a, b) for a in front for b in front)
    for candidate in front:
        # Each one, applied as fixed levels, is a valid release with the figures shown.
        again = anonymize(small_table[0], _config(small_table, model, levels=candidate.levels))
        assert again.levels == candidate.levels and again.levels_fixed
        assert again.suppressed == candidate.suppressed
        assert again.metrics["loss"] == pytest.approx(candidate.loss)
        assert again.risk_after.highest == pytest.approx(candidate.highest_risk)
        sizes = again.data.groupby(QIS).size()
        assert sizes.min() >= 4 and again.data.groupby(QIS)["disease"].nunique().min() >= 2
        assert again.optimum.levels == result.levels  # compared with the optimum
    json.dumps(result.report())


def test_fixed_levels_that_do_not_satisfy_the_model_are_refused(small_table):
    model = PrivacyModel(k=5, suppression_limit=0.02)
    levels = {"age": 0, "zip": 0, "sex": 0, "marital": 0}
    with pytest.raises(
        EngineError,
        match=r"The levels age=0, zip=0, sex=0, marital=0 do not "
        r"satisfy k=5 with at most 2% of rows suppressed: they would suppress "
        r"\d+ rows, at most 8 are allowed",
    ):
        anonymize(small_table[0], _config(small_table, model, sensitive=(), levels=levels))
    # Some levels fixed, the others searched.
    result = anonymize(small_table[0], _config(small_table, model, sensitive=(), levels={"zip": 5}))
    assert result.levels["zip"] == 5 and result.levels_fixed
    with pytest.raises(EngineError, match=r"fixed level of 'zip' must be between 0 and 5"):
        anonymize(small_table[0], _config(small_table, model, sensitive=(), levels={"zip": 9}))


def test_candidates_and_levels_survive_a_json_report(small_table):
    model = PrivacyModel(k=3, suppression_limit=0.02)
    report = json.loads(
        json.dumps(anonymize(small_table[0], _config(small_table, model, sensitive=())).report())
    )
    assert report["optimum"]["levels"] == report["levels"]
    assert any(c["optimum"] for c in report["candidates"])
    assert report["privacy_model"] == model.to_spec()
    assert report["description"] == "k=3, at most 2% of rows suppressed"
    assert math.isclose(report["candidates"][0]["loss"], report["metrics"]["loss"])
    assert isinstance(pd.DataFrame(report["candidates"]), pd.DataFrame)
