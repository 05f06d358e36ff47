"""Releases judged together: the joint partition of two extracts of the same rows, and the
search that protects earlier releases.

Every figure is checked against an independent computation written here: extracts are
rebuilt with ``Series.map`` on each hierarchy level and a pandas group-by (rows of classes
smaller than k are suppressed, which is what k-anonymity alone does), and the joint classes
are a group-by on the pair (class in the new extract, class in the earlier one or "not in
it").
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from releases.engine import AnonymizationConfig, EngineError, Hierarchy, PrivacyModel, anonymize
from releases.engine.criteria import (
    Classes,
    DataContext,
    EarlierReleases,
    KAnonymity,
    checks,
    criterion_from_spec,
)
from releases.engine.cross_release import (
    NOT_IN,
    ReleasedColumns,
    cross_release_check,
    extract_membership,
    joint_class_sizes,
    joint_partition,
    linking_evidence,
    release_membership,
    sensitive_context,
    what_constrained,
)
from releases.engine.privacy import SensitiveCounts

ADULT_QIS = ["age", "education", "sex", "race", "marital-status"]


# --------------------------------------------------------------------------- independent helpers


def generalized(df: pd.DataFrame, hierarchies, levels: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame({q: df[q].map(hierarchies[q].mapping(lv)) for q, lv in levels.items()})


def k_anonymous_classes(df, hierarchies, levels, k) -> pd.Series:
    """Per input row, its class in the k-anonymous release at ``levels`` (classes smaller than k
    suppressed: -1), by a pandas group-by."""
    g = generalized(df, hierarchies, levels)
    cls = g.groupby(list(levels), sort=False).ngroup()
    size = cls.map(cls.value_counts())
    return cls.where(size >= k, -1)


def joint_sizes(new: pd.Series, earlier: pd.Series) -> pd.Series:
    """Sizes of the joint classes: rows of the new extract grouped by (new class, earlier class
    or -1 for "not in it")."""
    frame = pd.DataFrame({"new": np.asarray(new), "earlier": np.asarray(earlier)})
    return frame[frame["new"] >= 0].groupby(["new", "earlier"]).size()


@pytest.fixture(scope="module")
def adult_h(adult_hierarchies):
    return {q: adult_hierarchies[q] for q in ADULT_QIS}


# --------------------------------------------------------------------------- the joint partition


def test_joint_partition_pairs_classes_and_groups_rows_missing_from_the_earlier_extract():
    new = np.array([0, 0, 0, 0, 1, 1, 1, -1, 2, 2])
    earlier = np.array([5, 5, -1, -1, 5, -1, 7, 5, -1, -1])
    rows, joint, sizes = joint_partition(new, earlier)
    assert list(rows) == [0, 1, 2, 3, 4, 5, 6, 8, 9]  # row 7 is not in the new extract
    expected = joint_sizes(pd.Series(new), pd.Series(earlier))
    assert sorted(sizes.tolist()) == sorted(expected.tolist())
    assert sorted(joint_class_sizes(new, earlier).tolist()) == sorted(expected.tolist())
    # Rows 2 and 3 (new class 0, both missing from the earlier extract) are one joint class.
    assert joint[2] == joint[3] != joint[0]
    check = cross_release_check(new, earlier, k=2)
    assert check.joint_classes == len(expected) == 6
    assert check.smallest_joint_class == expected.min() == 1
    assert check.rows_below_k == int(expected[expected < 2].sum()) == 3
    assert check.classes_new == 3 and check.rows == 9 and not check.passed


def test_extracts_of_different_rows_are_refused():
    with pytest.raises(Exception, match="not of the same rows"):
        joint_partition(np.zeros(3, dtype=np.int64), np.zeros(4, dtype=np.int64))


def test_complementary_adult_extracts_single_people_out_together(adult, adult_h):
    """Sweeney's complementary release: one extract keeps age in 5-year bands and hides
    education, the other hides age and keeps education. Each is 5-anonymous; together they
    single people out."""
    first = {"age": 1, "education": 3, "sex": 0, "race": 0, "marital-status": 0}
    second = {"age": 4, "education": 0, "sex": 0, "race": 0, "marital-status": 0}
    model = PrivacyModel(k=5, suppression_limit=0.05)
    results = {}
    for name, levels in (("first", first), ("second", second)):
        config = AnonymizationConfig(adult_h, model, levels=levels)
        result = anonymize(adult, config)
        assert result.data.groupby(ADULT_QIS, observed=True).size().min() >= 5
        results[name] = (result, config)
    theirs = {
        name: k_anonymous_classes(adult, adult_h, lv, 5)
        for name, lv in (("first", first), ("second", second))
    }
    ours = {
        name: extract_membership(r.data, r.source_rows, len(adult), ADULT_QIS)
        for name, (r, _) in results.items()
    }
    for name in ours:  # the same rows suppressed, the same partition
        assert ((ours[name] < 0) == (theirs[name] < 0)).all()
        assert pd.crosstab(ours[name], theirs[name].to_numpy()).astype(bool).sum(axis=1).max() == 1
    expected = joint_sizes(theirs["second"], theirs["first"])
    check = cross_release_check(ours["second"], ours["first"], k=5)
    assert check.joint_classes == len(expected)
    assert check.smallest_joint_class == expected.min() == 1
    assert check.rows_below_k == int(expected[expected < 5].sum()) > 1000
    assert check.rows == int((theirs["second"] >= 0).sum())


def _levels(*values: int) -> dict[str, int]:
    return dict(zip(ADULT_QIS, values, strict=True))


def test_comparable_levels_without_suppression_add_nothing(adult, adult_h):
    """Two 5-anonymous extracts, neither suppressing a row, one's levels all at least the
    other's: every class of the coarser one is a union of classes of the finer one, so the
    joint classes are the finer extract's classes, which hold 5 rows each."""
    fine = k_anonymous_classes(adult, adult_h, _levels(1, 3, 0, 1, 2), 5)
    coarse = k_anonymous_classes(adult, adult_h, _levels(2, 3, 0, 1, 2), 5)
    assert (fine >= 0).all() and (coarse >= 0).all()
    for new, earlier in ((coarse, fine), (fine, coarse)):
        check = cross_release_check(new.to_numpy(), earlier.to_numpy(), k=5)
        expected = joint_sizes(new, earlier)
        assert check.joint_classes == len(expected) == fine.nunique()
        assert check.smallest_joint_class == fine.value_counts().min() >= 5
        assert check.rows_below_k == 0 and check.passed
    assert fine.nunique() > coarse.nunique()


def test_comparable_levels_with_suppression_single_out_rows_suppressed_only_earlier(adult, adult_h):
    """The later extract generalizes every quasi-identifier at least as much and suppresses
    nothing; the rows the earlier one suppressed are back, each class's few of them a small
    joint class ("not in" the earlier extract)."""
    earlier = k_anonymous_classes(adult, adult_h, _levels(1, 2, 0, 0, 0), 5)
    later = k_anonymous_classes(adult, adult_h, _levels(1, 3, 1, 1, 1), 5)
    assert (earlier < 0).sum() > 0 and (later >= 0).all()  # only the earlier one suppresses
    check = cross_release_check(later.to_numpy(), earlier.to_numpy(), k=5)
    expected = joint_sizes(later, earlier)
    assert check.rows_below_k == int(expected[expected < 5].sum()) > 0
    assert check.smallest_joint_class == expected.min() < 5
    # Every small joint class is made of rows only the earlier extract suppressed.
    small = expected[expected < 5].reset_index()
    assert (small["earlier"] == -1).all()


def test_joint_l_diversity_and_t_closeness_by_the_models_code(adult, adult_h):
    earlier = k_anonymous_classes(adult, adult_h, {"age": 1, "education": 3}, 5)
    later = k_anonymous_classes(adult, adult_h, {"age": 4, "education": 0}, 5)
    context = sensitive_context(adult, ["occupation"])
    check = cross_release_check(
        later.to_numpy(),
        earlier.to_numpy(),
        k=5,
        sensitive=context,
        entropy=True,
        t_distance="equal",
    )
    frame = pd.DataFrame({"new": later, "earlier": earlier, "s": adult["occupation"]})
    frame = frame[frame["new"] >= 0]
    groups = frame.groupby(["new", "earlier"])["s"]
    assert check.l["occupation"] == groups.nunique().min()
    shares = frame.groupby(["new", "earlier"])["s"].value_counts(normalize=True)
    entropy = -(shares * np.log(shares)).groupby(level=[0, 1]).sum()
    assert check.entropy_l["occupation"] == pytest.approx(np.exp(entropy).min())
    overall = adult["occupation"].value_counts(normalize=True)
    table = shares.unstack(fill_value=0.0).reindex(columns=overall.index, fill_value=0.0)
    t = 0.5 * (table - overall).abs().sum(axis=1)
    assert check.t["occupation"] == pytest.approx(t.max())
    assert check.t_distance == "equal"
    # Judged against what a release asks for: no joint class below k, l reached, t kept.
    same = later.to_numpy()
    loose = cross_release_check(same, same, 1, sensitive=context, t_distance="equal")
    assert loose.rows_below_k == 0 and loose.passed
    l_seen, t_seen = loose.l["occupation"], loose.t["occupation"]
    for l_required, t_required, passed in (
        (l_seen, t_seen, True),
        (l_seen + 1, None, False),
        (None, t_seen - 0.01, False),
    ):
        judged = cross_release_check(
            same,
            same,
            1,
            sensitive=context,
            t_distance="equal",
            l_required=l_required,
            t_required=t_required,
        )
        assert judged.passed is passed


def test_linking_evidence_lists_shared_unchanged_columns_quasi_identifiers_and_sensitive():
    new = ReleasedColumns(
        ("age", "zip", "sex", "job", "diagnosis"), {"age": 2, "zip": 0, "sex": 1}, ("diagnosis",)
    )
    earlier = ReleasedColumns(
        ("age", "zip", "sex", "job", "diagnosis", "city"), {"age": 1, "sex": 0}, ("diagnosis",)
    )
    evidence = linking_evidence(new, earlier)
    # zip at level 0 is released unchanged; sex is generalized in the new extract. A
    # quasi-identifier of either extract that both release links them.
    assert evidence.unchanged == ["zip", "job", "diagnosis"]
    assert evidence.quasi_identifiers == ["age", "zip", "sex"]
    assert evidence.sensitive == ["diagnosis"]
    assert evidence.any
    assert not linking_evidence(new, ReleasedColumns(("city",), {}, ())).any


# --------------------------------------------------------------------------- memberships


def test_release_membership_reapplies_the_release_exactly(adult, adult_h):
    model = PrivacyModel(k=5, suppression_limit=0.05)
    result = anonymize(adult, AnonymizationConfig(adult_h, model))
    applied = release_membership(
        adult, AnonymizationConfig(adult_h, model, levels=dict(result.levels))
    )
    released = extract_membership(result.data, result.source_rows, len(adult), ADULT_QIS)
    assert ((applied == NOT_IN) == (released == NOT_IN)).all()
    inside = applied != NOT_IN
    pairs = pd.crosstab(applied[inside], released[inside])
    assert (pairs.astype(bool).sum(axis=1) == 1).all() and (
        pairs.astype(bool).sum(axis=0) == 1
    ).all()


def test_mondrian_release_membership_is_read_off_its_extract(small_table):
    data, hierarchies, _ = small_table
    config = AnonymizationConfig(hierarchies, PrivacyModel(k=4), algorithm="mondrian")
    membership = release_membership(data, config)
    result = anonymize(data, config)
    classes = result.data.groupby(list(hierarchies), sort=False).ngroup().to_numpy()
    assert (membership >= 0).all()
    assert pd.crosstab(membership[result.source_rows], classes).astype(bool).sum(axis=1).max() == 1
    assert np.bincount(membership).min() >= 4


# --------------------------------------------------------------------------- the criterion


def test_the_criterion_fails_classes_holding_a_small_joint_class():
    # Class 0: 10 rows in earlier class 0. Class 1: 2 rows in earlier class 1 and 6 rows the
    # earlier release left out (value 2).
    linked = SensitiveCounts.from_codes(
        np.array([0] * 10 + [1] * 8), np.array([0] * 10 + [1] * 2 + [2] * 6), 2, 3
    )
    classes = Classes(np.array([10, 8]), {}, {"earlier": linked})
    criterion = EarlierReleases(k=5)
    data = DataContext(18)
    assert criterion.class_fails(classes, data).tolist() == [False, True]
    assert criterion.achieved(classes, data) == {"smallest_joint_class": {"earlier": 2}}
    columns = criterion.class_columns(classes, data)
    assert columns["earlier:smallest_joint_class"].tolist() == [10.0, 2.0]


def test_the_criterion_is_not_monotone_with_suppression():
    """10 rows in earlier class A and 2 in earlier class B, k=5: as two classes, only the 2
    rows are suppressed; merged into one class, all 12 are."""
    criterion = EarlierReleases(k=5)
    data = DataContext(12)
    apart = Classes(
        np.array([10, 2]),
        {},
        {
            "e": SensitiveCounts.from_codes(
                np.array([0] * 10 + [1] * 2), np.array([0] * 10 + [1] * 2)
            )
        },
    )
    merged = Classes(
        np.array([12]),
        {},
        {
            "e": SensitiveCounts.from_codes(
                np.zeros(12, dtype=np.int64), np.array([0] * 10 + [1] * 2)
            )
        },
    )
    suppressed_apart = int(apart.sizes[criterion.class_fails(apart, data)].sum())
    suppressed_merged = int(merged.sizes[criterion.class_fails(merged, data)].sum())
    assert (suppressed_apart, suppressed_merged) == (2, 12)
    assert criterion.monotone(False) and not criterion.monotone(True)


def test_the_criterion_is_stored_and_checked_like_the_others(adult, adult_h):
    earlier = k_anonymous_classes(adult, adult_h, {"age": 1, "education": 3}, 5).to_numpy()
    model = PrivacyModel(criteria=[KAnonymity(k=5), EarlierReleases(k=5)], suppression_limit=0.05)
    qis = {q: adult_h[q] for q in ("age", "education", "sex")}
    result = anonymize(
        adult, AnonymizationConfig(qis, model, earlier_releases={"first extract": earlier})
    )
    spec = model.to_spec()
    assert {"model": "earlier-releases", "k": 5} in spec["criteria"]
    assert PrivacyModel.from_spec(spec) == model
    assert criterion_from_spec({"model": "earlier-releases", "k": 5}) == EarlierReleases(k=5)
    lines = {c.name: c for c in checks(result.report())}
    assert lines["joint classes with first extract"].passed
    assert "first extract:smallest_joint_class" in result.classes.columns


def test_protecting_without_an_earlier_release_is_refused(small_table):
    data, hierarchies, _ = small_table
    model = PrivacyModel(criteria=[KAnonymity(k=3), EarlierReleases(k=3)])
    with pytest.raises(Exception, match="needs at least one earlier release"):
        anonymize(data, AnonymizationConfig(hierarchies, model))
    with pytest.raises(Exception, match="gives a class for 3 rows"):
        anonymize(
            data,
            AnonymizationConfig(hierarchies, model, earlier_releases={"e": np.zeros(3, np.int64)}),
        )
    with pytest.raises(Exception, match="cannot be enforced by Mondrian"):
        anonymize(
            data,
            AnonymizationConfig(
                hierarchies,
                model,
                algorithm="mondrian",
                earlier_releases={"e": np.zeros(len(data), np.int64)},
            ),
        )


# --------------------------------------------------------------------------- the protected search

QIS = ["age", "zip", "sex", "marital"]


def _shares(hierarchy: Hierarchy, level: int) -> dict[str, float]:
    labels = [r[level] for r in hierarchy.source_rows]
    return {lab: labels.count(lab) / len(labels) for lab in set(labels)}


def brute_force_protected(data, hierarchies, earlier, k, limit, memo=None):
    """The best transformation over the whole lattice whose classes, once the classes failing
    k-anonymity or holding a joint class smaller than k are suppressed, suppress at most the
    limit; scored with ARX's Loss written out from its definition.

    Written with numpy on integer codes (each generalized column's labels numbered with
    ``np.unique``, a row's class the number of its tuple of codes, class and joint class sizes
    by ``np.bincount`` / ``np.unique``): the same definitions as a pandas group-by per node, at
    about a fortieth of the time, so the cases below stay in the fast tier.

    ``memo``: a dict kept for one table (``data`` and ``hierarchies``), where each generalized
    column, each node's classes and each case's suppressed rows are kept for the next case."""
    memo = {} if memo is None else memo
    n = len(data)
    allowed = math.floor(limit * n + 1e-9)
    earlier_codes = np.unique(earlier, return_inverse=True)[1]
    best = None
    for node in itertools.product(*[range(hierarchies[q].height) for q in QIS]):
        if node not in memo:
            columns = []
            for q, level in zip(QIS, node, strict=True):
                if (q, level) not in memo:
                    labels = data[q].map(hierarchies[q].mapping(level))
                    shares = labels.map(_shares(hierarchies[q], level)).to_numpy()
                    memo[q, level] = (np.unique(labels.to_numpy(), return_inverse=True)[1], shares)
                columns.append(memo[q, level])
            codes = np.zeros(n, np.int64)
            for column, _ in columns:
                codes = codes * (column.max() + 1) + column
            memo[node] = (np.unique(codes, return_inverse=True)[1], [s for _, s in columns])
        cls, shares = memo[node]
        key = (node, earlier.tobytes(), k)
        if key not in memo:
            size = np.bincount(cls)[cls]
            pairs = cls * (earlier_codes.max() + 1) + earlier_codes
            _, pair, joint = np.unique(pairs, return_inverse=True, return_counts=True)
            small_joint = np.bincount(cls, weights=joint[pair] < k)[cls] > 0
            memo[key] = (size < k) | small_joint
        suppressed = memo[key]
        if suppressed.sum() > allowed:
            continue
        per_attribute = []
        for q, share in zip(QIS, shares, strict=True):
            total = share[~suppressed].sum() + suppressed.sum()
            low = n / len(hierarchies[q].source_rows)
            per_attribute.append(max(0.0, (total - low) / (n - low)))
        loss = float(np.prod([(v + 1) ** (1 / len(per_attribute)) for v in per_attribute]) - 1)
        key = (loss, sum(node), node)
        if (
            best is None
            or loss < best[0] - 1e-12
            or (abs(loss - best[0]) <= 1e-12 and key[1:] < best[1:])
        ):
            best = (*key, int(suppressed.sum()))
    return best


@pytest.fixture(scope="module")
def protected_tables(table_factory):
    """Per seed: the table, its hierarchies and the brute force's memo, shared by the cases
    drawn from the same table."""
    tables: dict[int, tuple] = {}

    def table(seed: int) -> tuple:
        if seed not in tables:
            data, hierarchies, _ = table_factory(seed, n=300)
            tables[seed] = (data, hierarchies, {})
        return tables[seed]

    return table


@pytest.mark.parametrize(
    ("seed", "earlier_k", "k", "limit"),
    [
        (5, 5, 3, 0.0),
        (5, 5, 3, 0.05),
        (6, 5, 4, 0.02),
        (6, 5, 5, 0.1),
        (8, 3, 2, 0.03),
        (9, 4, 4, 0.08),
        (7, 3, 5, 0.1),
    ],
)
def test_the_protected_search_finds_the_best_transformation_safe_with_the_earlier_one(
    protected_tables, seed, earlier_k, k, limit
):
    data, hierarchies, memo = protected_tables(seed)
    # The earlier extract: age in decades and zip to three digits, its classes of fewer than
    # ``earlier_k`` rows suppressed.
    earlier = k_anonymous_classes(
        data, hierarchies, {"age": 1, "zip": 2, "sex": 0, "marital": 0}, earlier_k
    ).to_numpy()
    assert (earlier < 0).any()
    expected = brute_force_protected(data, hierarchies, earlier, k, limit, memo)
    model = PrivacyModel(criteria=[KAnonymity(k=k), EarlierReleases(k=k)], suppression_limit=limit)
    config = AnonymizationConfig(
        hierarchies, model, identifiers=["name"], earlier_releases={"earlier": earlier}
    )
    if expected is None:
        # An earlier class smaller than k bounds the joint classes of its rows: they can only
        # go with their whole class, and here no transformation suppresses few enough.
        with pytest.raises(EngineError, match="No generalization satisfies"):
            anonymize(data, config)
        return
    result = anonymize(data, config)
    assert tuple(result.levels[q] for q in QIS) == expected[2]
    assert result.suppressed == expected[3]
    assert result.metrics["loss"] == pytest.approx(expected[0], abs=1e-9)
    # The extract is safe with the earlier one: every joint class holds k rows.
    new = extract_membership(result.data, result.source_rows, len(data), QIS)
    assert joint_sizes(pd.Series(new), pd.Series(earlier)).min() >= k
    assert cross_release_check(new, earlier, k).rows_below_k == 0


def test_protection_costs_nothing_when_the_earlier_extract_is_the_same(adult, adult_h):
    model = PrivacyModel(k=5, suppression_limit=0.05)
    plain = anonymize(adult, AnonymizationConfig(adult_h, model))
    earlier = extract_membership(plain.data, plain.source_rows, len(adult), ADULT_QIS)
    protected_model = PrivacyModel(
        criteria=[KAnonymity(k=5), EarlierReleases(k=5)], suppression_limit=0.05
    )
    protected = anonymize(
        adult, AnonymizationConfig(adult_h, protected_model, earlier_releases={"same": earlier})
    )
    assert protected.levels == plain.levels and protected.suppressed == plain.suppressed
    constraint = what_constrained(
        adult, AnonymizationConfig(adult_h, protected_model, earlier_releases={"same": earlier})
    )
    assert constraint.constrained_by == [] and constraint.unprotected_levels == plain.levels
