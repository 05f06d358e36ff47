"""The review's figures: class sizes on logarithmic bins with the k line, distributions in their
natural order with numbers on the released bins (``releases.core.figures``, no database)."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from releases.core import figures
from releases.engine.hierarchy import Hierarchy


def _random_sizes(seed: int, n: int = 400) -> list[int]:
    rng = random.Random(seed)
    return [max(1, int(rng.paretovariate(0.8))) for _ in range(n)]


@pytest.mark.parametrize("k", [1, 2, 3, 5, 7, 10, 11, 250])
@pytest.mark.parametrize("seed", [1, 2])
def test_sizes_fall_in_one_bin_each_and_the_shares_of_rows_sum_to_one(seed, k):
    after = [s for s in _random_sizes(seed) if s >= k] or [k]
    before = _random_sizes(seed + 10, 900)
    chart = figures.size_bins(figures.size_counts(after), figures.size_counts(np.array(before)), k)
    bins = chart["bins"]
    # Contiguous from 1, each size in exactly one bin.
    assert bins[0]["low"] == 1
    assert all(a["high"] + 1 == b["low"] for a, b in zip(bins, bins[1:], strict=False))
    for side, sizes in (("after", after), ("before", before)):
        counted = Counter()
        rows = Counter()
        for s in sizes:
            (i,) = [i for i, b in enumerate(bins) if b["low"] <= s <= b["high"]]
            counted[i] += 1
            rows[i] += s
        assert [b[side]["classes"] for b in bins] == [counted[i] for i in range(len(bins))]
        assert [b[side]["rows"] for b in bins] == [rows[i] for i in range(len(bins))]
        assert sum(b[side]["share"] for b in bins) == pytest.approx(1.0)
        assert chart["rows"][side] == sum(sizes)
    # The k line sits between the bins below k and those at or above it.
    if k <= 1:
        assert chart["k_edge"] is None
    else:
        edge = chart["k_edge"]
        assert all(b["high"] < k for b in bins[:edge])
        assert all(b["low"] >= k for b in bins[edge:])
        assert bins[edge]["low"] == k
        below = sum(b["before"]["classes"] for b in bins[:edge])
        assert below == sum(1 for s in before if s < k)


def test_bins_are_logarithmic_on_round_numbers():
    chart = figures.size_bins([[1, 3], [7, 2], [40, 1], [3000, 1]], None, 1)
    assert [b["label"] for b in chart["bins"]] == [
        "1",
        "2–4",
        "5–9",
        "10–19",
        "20–49",
        "50–99",
        "100–199",
        "200–499",
        "500–999",
        "1000–1999",
        "2000–4999",
    ]
    assert chart["end_tick"] == "5k"
    assert not chart["has_before"]


def test_before_and_after_share_the_same_bins():
    """The original's classes reach far larger (and smaller) sizes than the release's: both
    are counted on one set of bins covering both."""
    chart = figures.size_bins([[5, 10], [6, 2]], [[1, 50], [900, 1]], 5)
    assert chart["bins"][0]["low"] == 1 and chart["bins"][-1]["high"] >= 900
    assert chart["rows"] == {"after": 62, "before": 950}
    assert sum(b["after"]["classes"] for b in chart["bins"]) == 12


def test_intervals_are_ordered_by_their_lower_bound():
    labels = ["40-59", "0-19", "*", "[100, 120[", "20-39", "-20--1", "60-99"]
    assert figures.natural_order(labels) == [
        "-20--1",
        "0-19",
        "20-39",
        "40-59",
        "60-99",
        "[100, 120[",
        "*",
    ]
    assert figures.natural_order(["item 10", "item 9", "Item 1"]) == ["Item 1", "item 9", "item 10"]


def test_categories_follow_the_hierarchy_order():
    text = "child;minor;*\nteen;minor;*\nadult;major;*\nsenior;major;*\n"
    hierarchy = Hierarchy.from_arx_csv(text, attribute="stage")
    rank = figures.hierarchy_rank(hierarchy.rows)
    assert figures.natural_order(["senior", "adult", "teen", "child"], rank) == [
        "child",
        "teen",
        "adult",
        "senior",
    ]
    assert figures.natural_order(["major", "*", "minor"], rank) == ["minor", "major", "*"]
    original = pd.Series(["senior", "adult", "teen", "child", "adult"], dtype="category")
    released = pd.Series(["major", "major", "minor", "minor", "major"], dtype="category")
    dist = figures.distribution(original, released, np.arange(5), rank=rank)
    assert [label for label, _ in dist["original"]] == ["child", "teen", "adult", "senior"]
    assert dist["released"] == [["minor", 2], ["major", 3]]


def test_numbers_are_counted_on_the_released_intervals():
    rng = np.random.default_rng(4)
    ages = rng.integers(0, 100, 500)
    original = pd.Series(ages.astype(str), dtype="category")
    hierarchy = Hierarchy.intervals(original.unique(), widths=[10, 20, 40])
    mapping = hierarchy.mapping(2)
    kept = np.flatnonzero(ages >= 5)  # the youngest suppressed
    released = pd.Series([mapping[str(a)] for a in ages[kept]], dtype="category")
    dist = figures.distribution(original, released, kept, mapping=mapping)
    assert dist["kind"] == "histogram" and dist["shared_bins"]
    labels = [label for label, _, _ in dist["bins"]]
    lows = [int(label.split("-")[0]) for label in labels]
    assert lows == sorted(lows)
    expected_original = Counter(mapping[str(a)] for a in ages)
    expected_released = Counter(released)
    for label, original_rows, released_rows in dist["bins"]:
        assert original_rows == expected_original[label]
        assert released_rows == expected_released[label]
    assert sum(o for _, o, _ in dist["bins"]) == len(ages)
    assert sum(r for _, _, r in dist["bins"]) == len(kept)


def test_numbers_released_as_they_are_share_equal_bins():
    values = np.random.default_rng(2).normal(50, 15, 2000).round(1)
    column = pd.Series(values.astype(str), dtype="category")
    dist = figures.distribution(column, column)
    assert dist["shared_bins"] and len(dist["bins"]) <= figures.MAX_BARS
    lows = [figures.leading_number(label) for label, _, _ in dist["bins"]]
    assert lows == sorted(lows)
    assert all(o == r for _, o, r in dist["bins"])
    assert sum(o for _, o, _ in dist["bins"]) == len(values)


def test_only_long_category_lists_fold_into_other_values_and_say_so():
    rng = random.Random(3)
    names = [f"town {i}" for i in range(60)]
    values = [rng.choice(names) for _ in range(3000)]
    column = pd.Series(values, dtype="category")
    dist = figures.distribution(column, column)
    assert dist["kind"] == "categories" and dist["original_order"] == "count"
    assert dist["original"][-1][0] == figures.OTHER
    shown = dict(dist["original"][:-1])
    counts = Counter(values)
    assert sorted(shown.values(), reverse=True) == [c for _, c in counts.most_common(len(shown))]
    other = dist["original_other"]
    assert other["values"] == len(counts) - len(shown)
    assert other["rows"] == dist["original"][-1][1] == len(values) - sum(shown.values())

    few = pd.Series(["b", "a", "c", "a"], dtype="category")
    short = figures.distribution(few, few)
    assert short["original"] == [["a", 2], ["b", 1], ["c", 1]]
    assert short["original_other"] is None and short["original_order"] == "natural"


def test_codes_with_leading_zeros_stay_as_written():
    zips = pd.Series(["02139", "02141", "02139", "10001"], dtype="category")
    dist = figures.distribution(zips, zips)
    assert dist["kind"] == "categories"
    assert dist["original"] == [["02139", 2], ["02141", 1], ["10001", 1]]


def test_class_value_choices_count_classes_and_rows():
    classes = pd.DataFrame(
        {
            "age": ["20-39", "0-19", "20-39", "40-59"],
            "sex": ["F", "F", "M", "F"],
            "size": [3, 5, 2, 4],
        }
    )
    choices = figures.class_value_choices(classes, ["age", "sex"], {})
    assert choices["age"] == [["0-19", 1, 5], ["20-39", 2, 5], ["40-59", 1, 4]]
    assert choices["sex"] == [["F", 3, 12], ["M", 1, 2]]
