"""On the Adult benchmark the optimal search finds ARX 3.9.2's optima (default Loss metric).

Expected values are ARX's own results (levels, suppressed records, equivalence classes and the
Loss score shown by ARX), not our engine's output.
"""

from __future__ import annotations

import pytest

from releases.engine import AnonymizationConfig, PrivacyModel, anonymize
from tests.conftest import ADULT_QUASI_IDENTIFIERS

QIS = ADULT_QUASI_IDENTIFIERS

ARX_OPTIMA = [
    # model, suppression limit, levels (None: occupation is sensitive), suppressed, classes, Loss
    ("k=5", PrivacyModel(k=5), [4, 3, 1, 2, 1, 1, 0, 0], 0, 24, 0.5266),
    ("k=5", PrivacyModel(k=5, suppression_limit=0.05), [3, 1, 0, 1, 2, 0, 0, 0], 1398, 379, 0.2146),
    (
        "k=10",
        PrivacyModel(k=10, suppression_limit=0.05),
        [3, 1, 1, 1, 2, 0, 0, 0],
        1449,
        191,
        0.2676,
    ),
    ("distinct 2-diversity", PrivacyModel(l=2), [4, 3, 0, 2, None, 1, 0, 0], 0, 28, 0.4860),
    (
        "distinct 2-diversity",
        PrivacyModel(l=2, suppression_limit=0.05),
        [3, 1, 0, 0, None, 0, 0, 0],
        1332,
        843,
        0.0934,
    ),
]


def _config(model, levels, hierarchies):
    qis = [q for q, lv in zip(QIS, levels, strict=True) if lv is not None]
    sensitive = [q for q, lv in zip(QIS, levels, strict=True) if lv is None]
    return (
        AnonymizationConfig(
            quasi_identifiers={q: hierarchies[q] for q in qis}, model=model, sensitive=sensitive
        ),
        qis,
        sensitive,
    )


@pytest.mark.parametrize(
    ("label", "model", "levels", "suppressed", "classes", "loss"),
    ARX_OPTIMA,
    ids=[f"{row[0]}, {row[1].suppression_limit:g}" for row in ARX_OPTIMA],
)
def test_adult_optimum_matches_arx(
    adult, adult_hierarchies, label, model, levels, suppressed, classes, loss
):
    config, qis, sensitive = _config(model, levels, adult_hierarchies)
    result = anonymize(adult, config)
    assert [result.levels[q] for q in qis] == [lv for lv in levels if lv is not None]
    assert result.suppressed == suppressed
    assert len(result.classes) == classes
    assert round(result.metrics["loss"], 4) == pytest.approx(loss, abs=1e-9)
    assert result.heuristic is False

    # The release itself satisfies the model, counted independently on the extract.
    assert len(result.data) == len(adult) - suppressed
    groups = result.data.groupby(qis)
    assert groups.ngroups == classes
    assert groups.size().min() >= model.k
    if model.l is not None:
        assert groups[sensitive[0]].nunique().min() >= model.l


def test_adult_quality_figures_match_arx(adult, adult_hierarchies):
    """ARX 3.9.2's quality summary of Adult, 8 quasi-identifiers, k=5, 5 % suppression."""
    config, _, _ = _config(
        PrivacyModel(k=5, suppression_limit=0.05), ARX_OPTIMA[1][2], adult_hierarchies
    )
    m = anonymize(adult, config).metrics
    assert round(m["granularity"], 4) == 0.2764
    assert round(m["precision"], 4) == 0.3543
    assert round(m["non_uniform_entropy"], 4) == 0.5703
    assert m["discernibility"] == 59_465_580
    assert round(m["average_class_size"], 2) == 75.89
