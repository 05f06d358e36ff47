"""The linkage attack: an identified file linked to an extract, checked against a pandas join
(full-domain generalization) and against a row-by-row comparison written here (local
recoding, suppressed values, records that match nothing)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, PrivacyModel, anonymize
from releases.engine.linkage import ColumnRule, link
from tests.conftest import ADULT_QUASI_IDENTIFIERS as ADULT_QIS

KNOWN = ["age", "sex", "race", "native-country", "workclass"]


def test_an_unchanged_quasi_identifier_re_identifies_records_found_by_a_pandas_join(
    adult, adult_hierarchies
):
    """Adult's optimum for k=5 and 5 % suppression releases ``workclass`` unchanged (it is not
    a quasi-identifier). 3,000 records of the source, known by age, sex, race, native country
    and workclass, are linked to it."""
    model = PrivacyModel(k=5, suppression_limit=0.05)
    result = anonymize(adult, AnonymizationConfig(adult_hierarchies, model))
    assert "workclass" in result.data.columns
    attacker = adult.sample(3000, random_state=0)[KNOWN].reset_index(drop=True)
    attacker.insert(0, "name", [f"person {i}" for i in range(len(attacker))])
    rules = {q: ColumnRule(adult_hierarchies[q], result.levels[q]) for q in ADULT_QIS}
    found = link(attacker, result.data, 5, rules)

    # The join: the attacker's values generalized to the released levels, then the released
    # rows counted per combination of the five columns.
    generalized = attacker[KNOWN].copy()
    for q in ("age", "sex", "race", "native-country"):
        generalized[q] = generalized[q].map(adult_hierarchies[q].mapping(result.levels[q]))
    released = result.data[KNOWN].astype(str).value_counts().rename("matches").reset_index()
    joined = generalized.merge(released, on=KNOWN, how="left")
    matches = joined["matches"].fillna(0).astype(int)

    assert found.attacker_records == 3000
    assert found.matched_columns == [c for c in result.data.columns if c in KNOWN]
    assert found.matched_none == int((matches == 0).sum())
    assert found.matched_one == int((matches == 1).sum()) > 0
    assert found.matched_below_k == int(((matches > 0) & (matches < 5)).sum())
    assert found.expected_reidentifications == pytest.approx((1 / matches[matches > 0]).sum())
    # Without workclass the same records are re-identified less often.
    without = link(attacker.drop(columns="workclass"), result.data, 5, rules)
    assert without.matched_one < found.matched_one


def _matches(value: str, label: str, rule: ColumnRule | None) -> bool:
    """One attacker value against one released value, as the attack defines it."""
    if rule is None:
        return value == label
    if label == "*":
        return True
    row = dict((r[0], r) for r in rule.hierarchy.rows).get(value)
    if row is not None and rule.level is not None:
        return row[rule.level] == label
    if row is not None and label in row:
        return True
    if value == label:
        return True
    if row is None or rule.level is None:
        # An interval, "low-high" or Mondrian's "[low-high]", holds the number (the ages here
        # are whole and not negative).
        bounds = label.strip("[]").split("-")
        if len(bounds) == 2 and all(b.isdigit() for b in bounds) and value.isdigit():
            return int(bounds[0]) <= int(value) <= int(bounds[1])
    return False


def _row_by_row(attacker: pd.DataFrame, extract: pd.DataFrame, rules) -> np.ndarray:
    shared = [c for c in extract.columns if c in attacker.columns]
    released = extract[shared].astype(str).to_numpy()
    counts = []
    for record in attacker[shared].astype(str).to_numpy():
        counts.append(
            sum(
                all(
                    _matches(v, lab, rules.get(c))
                    for v, lab, c in zip(record, row, shared, strict=True)
                )
                for row in released
            )
        )
    return np.array(counts)


def _attacker(data: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Records of the source, some of them wrong (an age off by 50, a zip nobody has)."""
    rng = np.random.default_rng(seed)
    picked = data.iloc[rng.choice(len(data), 150, replace=False)][["name", "age", "zip", "sex"]]
    picked = picked.reset_index(drop=True)
    wrong = rng.random(len(picked)) < 0.15
    picked.loc[wrong, "age"] = (picked.loc[wrong, "age"].astype(int) + 50).astype(str)
    picked.loc[rng.random(len(picked)) < 0.05, "zip"] = "99999"
    return picked


def _check(found, counts: np.ndarray, k: int) -> None:
    assert found.matched_none == int((counts == 0).sum()) > 0
    assert found.matched_one == int((counts == 1).sum())
    assert found.matched_below_k == int(((counts > 0) & (counts < k)).sum())
    assert found.expected_reidentifications == pytest.approx((1 / counts[counts > 0]).sum())


@pytest.mark.parametrize("levels", [{"age": 1, "zip": 2, "sex": 0}, {"age": 2, "zip": 1, "sex": 1}])
def test_full_domain_extract_matches_a_row_by_row_comparison(table_factory, levels):
    data, hierarchies, _ = table_factory(4, n=300)
    qis = {q: hierarchies[q] for q in ("age", "zip", "sex", "marital")}
    model = PrivacyModel(k=3, suppression_limit=0.2)
    result = anonymize(
        data,
        AnonymizationConfig(qis, model, identifiers=["name"], levels={**levels, "marital": 1}),
    )
    rules = {q: ColumnRule(h, result.levels[q]) for q, h in qis.items()}
    attacker = _attacker(data, 1)
    found = link(attacker, result.data, 3, rules)
    assert found.matched_columns == ["age", "zip", "sex"]
    _check(found, _row_by_row(attacker, result.data, rules), 3)


def test_mondrian_extract_matches_by_interval_and_hierarchy_node(table_factory):
    data, hierarchies, _ = table_factory(6, n=300)
    qis = {q: hierarchies[q] for q in ("age", "zip", "sex")}
    config = AnonymizationConfig(qis, PrivacyModel(k=4), identifiers=["name"], algorithm="mondrian")
    result = anonymize(data, config)
    assert result.data["age"].str.startswith("[").any()  # ranges of ages
    rules = {q: ColumnRule(h, None) for q, h in qis.items()}
    attacker = _attacker(data, 2)
    found = link(attacker, result.data, 4, rules)
    _check(found, _row_by_row(attacker, result.data, rules), 4)


def test_suppressed_values_match_anything_and_unchanged_columns_need_equality():
    extract = pd.DataFrame(
        {"age": ["30-39", "*", "30-39", "40-49"], "city": ["Lyon", "Lyon", "Nice", "Lyon"]}
    )
    from releases.engine import Hierarchy

    ages = Hierarchy.intervals([str(a) for a in range(20, 60)], widths=[10], attribute="age")
    attacker = pd.DataFrame({"age": ["35", "45", "25"], "city": ["Lyon", "Lyon", "Lyon"]})
    rules = {"age": ColumnRule(ages, 1)}
    counts = _row_by_row(attacker, extract, rules)
    found = link(attacker, extract, 2, rules)
    assert counts.tolist() == [2, 2, 1]  # 35: "30-39" and "*"; 25: only "*"
    assert (found.matched_one, found.matched_below_k, found.matched_none) == (1, 1, 0)


def test_files_without_a_shared_column_are_refused():
    with pytest.raises(EngineError, match="shares no column"):
        link(pd.DataFrame({"a": ["1"]}), pd.DataFrame({"b": ["1"]}), 2, {})
