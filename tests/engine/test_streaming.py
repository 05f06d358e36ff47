"""The streamed release (the frequency table, the plan, the keyed order) equals the in-memory
engine: the same levels, suppressed rows, classes and Loss, the same report and the same bytes
of the released file, with batches small enough (997 rows) to split classes across them.

What the engine claims is checked apart from it: the frequency table against a pandas
group-by, the written file's k and l by a pandas group-by of the file, the keyed order by a
SplitMix64 written here in Python integers.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from releases.engine import AnonymizationConfig, Hierarchy, PrivacyModel, anonymize
from releases.engine.errors import EngineError
from releases.engine.export import write_csv
from releases.engine.frequency import (
    FIRST,
    ROWS,
    FrequencyTable,
    frequency_table,
    merge_frequency_tables,
)
from releases.engine.shuffle import PERMUTATION, order, order_keys, permutation
from releases.engine.streaming import (
    ORDER,
    anonymize_frequencies,
    plan_release,
    release_batch,
    write_released,
)
from tests.conftest import ADULT, ADULT_QUASI_IDENTIFIERS

CHUNK = 997
FARS = ADULT.parent / "fars" / "fars_hierarchy_iage.csv"


def batches(frame: pd.DataFrame, rows: int = CHUNK) -> list[pa.RecordBatch]:
    return pa.Table.from_pandas(frame, preserve_index=False).to_batches(max_chunksize=rows)


def model(*criteria: dict, limit: float = 0.0, population: dict | None = None) -> PrivacyModel:
    spec: dict = {"criteria": list(criteria), "suppression_limit": limit}
    if population is not None:
        spec["population"] = population
    return PrivacyModel.from_spec(spec)


@pytest.fixture(scope="module")
def fars() -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    """A FARS-like table (people in road accidents): age 0-99 with the FARS hierarchy, sex,
    person type, state, injury severity (sensitive) and a case number (an identifier)."""
    rng = np.random.default_rng(23)
    n = 6000
    frame = pd.DataFrame(
        {
            "case": [f"C{i:06d}" for i in range(n)],
            "iage": rng.integers(0, 100, n).astype(str),
            "isex": rng.choice(["1", "2"], n),
            "iptype": rng.choice(["driver", "passenger", "pedestrian", "=cyclist"], n),
            "istate": rng.choice([f"{s:02d}" for s in range(1, 21)], n),
            "iinjury": rng.choice(["none", "possible", "minor", "serious", "fatal"], n),
            "note": rng.choice(["", "a;b", 'said "hi"', "-3", "+x", "plain"], n),
        }
    )
    hierarchies = {
        "iage": Hierarchy.from_arx_csv(FARS, attribute="iage"),
        "isex": Hierarchy.categorical(frame["isex"], attribute="isex"),
        "iptype": Hierarchy.categorical(frame["iptype"], attribute="iptype"),
        "istate": Hierarchy.masking(frame["istate"], attribute="istate"),
    }
    return frame, hierarchies


def adult_case(adult, hierarchies, sensitive=(), **config) -> AnonymizationConfig:
    qis = [q for q in ADULT_QUASI_IDENTIFIERS if q not in sensitive]
    return AnonymizationConfig(
        quasi_identifiers={q: hierarchies[q] for q in qis}, sensitive=list(sensitive), **config
    )


def streamed(frame: pd.DataFrame, config: AnonymizationConfig, seed: int, tmp_path: Path):
    """The streamed release: its result and the bytes it writes."""
    columns = [*config.quasi_identifiers, *config.sensitive]
    table = frequency_table(batches(frame[columns]), columns)
    result, enc, chosen = anonymize_frequencies(table, list(frame.columns), config)
    plan = plan_release(enc, chosen, config, list(frame.columns), seed, ";")
    target = tmp_path / "streamed.csv"
    written = write_released(plan, batches(frame), target, chunk_rows=CHUNK)
    return result, target.read_bytes(), written


def in_memory(frame: pd.DataFrame, config: AnonymizationConfig, seed: int):
    result = anonymize(frame, config)
    rows = order(result.source_rows, seed)
    out = io.BytesIO()
    write_csv(result.data.iloc[rows].reset_index(drop=True), out, ";")
    return result, out.getvalue()


def assert_same_release(expected, got) -> None:
    assert got.levels == expected.levels
    assert got.suppressed == expected.suppressed
    assert got.metrics["loss"] == expected.metrics["loss"]
    pd.testing.assert_frame_equal(got.classes, expected.classes)
    mine, theirs = got.report(), expected.report()
    for report in (mine, theirs):  # the time taken differs, nothing else may
        report.pop("seconds")
        if report["search"]:
            report["search"] = {k: v for k, v in report["search"].items() if k != "seconds"}
    assert mine == theirs


ADULT_CASES = {
    "k=5, 2 %": ({"criteria": [{"model": "k-anonymity", "k": 5}]}, 0.02, ()),
    "k=10, no suppression": ({"criteria": [{"model": "k-anonymity", "k": 10}]}, 0.0, ()),
    "distinct 2-diversity": (
        {"criteria": [{"model": "k-anonymity", "k": 3}, {"model": "l-diversity", "l": 2}]},
        0.05,
        ("occupation",),
    ),
    "entropy 3-diversity": (
        {"criteria": [{"model": "l-diversity", "l": 3, "variant": "entropy"}]},
        0.05,
        ("occupation",),
    ),
    "0.2-closeness": (
        {"criteria": [{"model": "t-closeness", "t": 0.2, "distance": "ordered"}]},
        0.05,
        ("age",),
    ),
    "δ-disclosure": (
        {"criteria": [{"model": "delta-disclosure", "delta": 2.0}]},
        0.1,
        ("salary-class",),
    ),
    "average risk (a dataset criterion)": (
        {"criteria": [{"model": "k-anonymity", "k": 2}, {"model": "average-risk", "risk": 0.05}]},
        0.05,
        (),
    ),
    "k-map, Poisson": (
        {
            "criteria": [{"model": "k-map", "k": 3}],
            "population": {"sampling_fraction": 0.1},
        },
        0.05,
        (),
    ),
}


@pytest.mark.parametrize("case", list(ADULT_CASES), ids=list(ADULT_CASES))
def test_adult_streamed_equals_in_memory(adult, adult_hierarchies, tmp_path, case):
    spec, limit, sensitive = ADULT_CASES[case]
    privacy = model(*spec["criteria"], limit=limit, population=spec.get("population"))
    config = adult_case(adult, adult_hierarchies, sensitive, model=privacy)
    expected, expected_bytes = in_memory(adult, config, seed=11)
    got, got_bytes, written = streamed(adult, config, 11, tmp_path)
    assert_same_release(expected, got)
    assert got_bytes == expected_bytes
    assert written.rows == expected.rows_out and written.size == len(expected_bytes)


def test_adult_utility_controls_and_heuristic_stream_alike(adult, adult_hierarchies, tmp_path):
    privacy = model({"model": "k-anonymity", "k": 5}, limit=0.05)
    for extra in (
        {"weights": {"age": 1.0, "education": 0.2}},
        {"min_levels": {"age": 1}, "max_levels": {"education": 1}},
        {"levels": {"age": 4, "education": 2}},
        {"algorithm": "heuristic", "step_limit": 40},
    ):
        config = adult_case(adult, adult_hierarchies, model=privacy, **extra)
        expected, expected_bytes = in_memory(adult, config, seed=5)
        got, got_bytes, _ = streamed(adult, config, 5, tmp_path)
        assert_same_release(expected, got)
        assert got_bytes == expected_bytes


@pytest.mark.parametrize(
    ("criteria", "limit"),
    [
        ([{"model": "k-anonymity", "k": 4}], 0.03),
        ([{"model": "k-anonymity", "k": 2}, {"model": "l-diversity", "l": 2}], 0.1),
        ([{"model": "t-closeness", "t": 0.3}], 0.1),
    ],
    ids=["k=4", "k=2, 2-diversity", "0.3-closeness"],
)
def test_fars_streamed_equals_in_memory_and_the_file_holds_k_and_l(fars, tmp_path, criteria, limit):
    frame, hierarchies = fars
    config = AnonymizationConfig(
        quasi_identifiers=hierarchies,
        model=model(*criteria, limit=limit),
        sensitive=["iinjury"],
        identifiers=["case"],
    )
    expected, expected_bytes = in_memory(frame, config, seed=3)
    got, got_bytes, _ = streamed(frame, config, 3, tmp_path)
    assert_same_release(expected, got)
    assert got_bytes == expected_bytes
    # The file itself, counted by pandas: no identifier, k (and l) in every class.
    written = pd.read_csv(tmp_path / "streamed.csv", sep=";", dtype=str, keep_default_na=False)
    assert list(written.columns) == [c for c in frame.columns if c != "case"]
    assert len(written) == len(frame) - expected.suppressed
    classes = written.groupby(list(hierarchies))
    k = max(c.get("k", 1) for c in criteria)
    assert classes.size().min() >= k
    ell = next((c["l"] for c in criteria if c["model"] == "l-diversity"), None)
    if ell is not None:
        assert classes["iinjury"].nunique().min() >= ell
    # Formulas neutralised, quotes doubled, as the in-memory writer does.
    assert "'=cyclist" in set(written["iptype"]) or "*" in set(written["iptype"])
    assert set(written["note"]) <= {"", "a;b", 'said "hi"', "-3", "'+x", "plain"}


def test_the_frequency_table_counts_what_pandas_counts(adult):
    columns = ["age", "sex", "occupation"]
    table = frequency_table(batches(adult), columns)
    assert table.rows == len(adult) and table.columns == columns
    grouped = adult.reset_index().groupby(columns, sort=False)
    expected = pd.DataFrame({ROWS: grouped.size(), FIRST: grouped["index"].min()})
    expected = expected.sort_values(FIRST).reset_index()
    got = table.frame.astype({c: str for c in columns})
    pd.testing.assert_frame_equal(
        got.reset_index(drop=True), expected[[*columns, ROWS, FIRST]], check_dtype=False
    )
    assert table.distinct("age") == list(dict.fromkeys(adult["age"]))


def test_partial_tables_merge_to_the_whole(adult):
    columns = ["education", "race", "salary-class"]
    whole = frequency_table(batches(adult), columns)
    parts: list[FrequencyTable] = []
    for start, stop in ((0, 1000), (1000, 17000), (17000, len(adult))):
        part = frequency_table(batches(adult.iloc[start:stop]), columns)
        part.frame[FIRST] += start  # the caller offsets each part's row indexes
        parts.append(part)
    merged = merge_frequency_tables(parts)
    assert merged.rows == whole.rows
    pd.testing.assert_frame_equal(
        merged.frame.astype({c: str for c in columns}),
        whole.frame.astype({c: str for c in columns}),
    )


def _splitmix64(x: int) -> int:
    mask = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def test_the_keyed_order_is_a_seeded_permutation():
    index = np.arange(50_000, dtype=np.int64)
    keys = order_keys(7, index)
    # The reference, in Python integers: SplitMix64 of SplitMix64(seed) XOR the row index.
    for i in (0, 1, 2, 12345, 49_999):
        assert int(keys[i]) == _splitmix64(_splitmix64(7) ^ i)
    placed = order(index, 7)
    assert sorted(placed.tolist()) == list(range(len(index)))
    assert not (placed == index).all()
    assert (order(index, 7) == placed).all()
    assert (order(index, 8) != placed).mean() > 0.99
    # A row's key does not depend on the other rows: a subset keeps its rows' relative order.
    subset = index[::3]
    assert (np.argsort(order_keys(7, subset)) == np.argsort(keys[::3])).all()
    # The earlier scheme is numpy's permutation, as releases before the keyed hash were written.
    assert (order(index, 7, PERMUTATION) == np.random.default_rng(7).permutation(50_000)).all()
    assert (order(index, 7, PERMUTATION) == permutation(50_000, 7)).all()
    with pytest.raises(ValueError, match="unknown row order"):
        order(index, 7, "sorted")


def test_release_batch_is_a_function_of_the_row_and_its_index(adult, adult_hierarchies):
    config = adult_case(adult, adult_hierarchies, model=model({"model": "k-anonymity", "k": 5}))
    columns = list(config.quasi_identifiers)
    table = frequency_table(batches(adult[columns]), columns)
    result, enc, chosen = anonymize_frequencies(table, list(adult.columns), config)
    plan = plan_release(enc, chosen, config, list(adult.columns), seed=9)
    whole = pa.Table.from_pandas(adult, preserve_index=False).to_batches()[0]
    once = release_batch(plan, whole, pa.array(np.arange(len(adult))))
    # The same rows in another cut, in reverse: the same released rows and keys.
    pieces = [
        release_batch(plan, whole.slice(s, 5000), pa.array(np.arange(s, min(s + 5000, len(adult)))))
        for s in reversed(range(0, len(adult), 5000))
    ]
    cut = pa.Table.from_batches(pieces).sort_by(ORDER)
    assert cut.equals(pa.Table.from_batches([once]).sort_by(ORDER))
    assert once.num_rows == result.rows_out
    assert once.schema.field(ORDER).type == pa.uint64()


def test_parquet_holds_the_csv_rows(fars, tmp_path):
    frame, hierarchies = fars
    config = AnonymizationConfig(
        quasi_identifiers=hierarchies, model=model({"model": "k-anonymity", "k": 3})
    )
    columns = list(hierarchies)
    table = frequency_table(batches(frame[columns]), columns)
    _, enc, chosen = anonymize_frequencies(table, list(frame.columns), config)
    plan = plan_release(enc, chosen, config, list(frame.columns), seed=1)
    write_released(plan, batches(frame), tmp_path / "r.csv", tmp_path / "r.parquet", chunk_rows=500)
    csv = pd.read_csv(tmp_path / "r.csv", dtype=str, keep_default_na=False)
    parquet = pq.read_table(tmp_path / "r.parquet").to_pandas()
    # The CSV neutralises formulas for spreadsheets; the Parquet file keeps the values.
    assert len(parquet) == len(csv) and list(parquet.columns) == list(csv.columns)
    assert (parquet["iage"].to_numpy() == csv["iage"].to_numpy()).all()
    assert (parquet["note"].replace({"+x": "'+x"}).to_numpy() == csv["note"].to_numpy()).all()


def test_an_input_that_changes_between_its_readings_is_refused(fars, tmp_path):
    frame, hierarchies = fars
    config = AnonymizationConfig(
        quasi_identifiers=hierarchies, model=model({"model": "k-anonymity", "k": 3})
    )
    columns = list(hierarchies)
    table = frequency_table(batches(frame[columns]), columns)
    _, enc, chosen = anonymize_frequencies(table, list(frame.columns), config)
    plan = plan_release(enc, chosen, config, list(frame.columns), seed=1)
    changed = frame.copy()
    changed.loc[4000, "iptype"] = "tram"
    with pytest.raises(EngineError, match=r"Row 4,001 holds 'tram' in 'iptype'.*changed"):
        write_released(plan, batches(changed), tmp_path / "x.csv")
    with pytest.raises(EngineError, match="the plan expected .*changed between its two readings"):
        write_released(plan, batches(frame.iloc[:-10]), tmp_path / "y.csv")


def test_what_needs_the_rows_is_refused_with_a_sentence(adult, adult_hierarchies):
    table = frequency_table(batches(adult[["age", "sex"]]), ["age", "sex"])
    base = {"age": adult_hierarchies["age"], "sex": adult_hierarchies["sex"]}
    cases = {
        "Mondrian": AnonymizationConfig(
            quasi_identifiers=base,
            model=model({"model": "k-anonymity", "k": 2}),
            algorithm="mondrian",
        ),
        "Microaggregation": AnonymizationConfig(
            quasi_identifiers=base,
            model=model({"model": "k-anonymity", "k": 2}),
            microaggregate={"age": "mean"},
        ),
        "SafePub": AnonymizationConfig(
            quasi_identifiers=base,
            model=model({"model": "safepub", "epsilon": 1.0, "delta": 1e-5, "seed": 1}),
        ),
    }
    for name, config in cases.items():
        with pytest.raises(EngineError, match=name):
            anonymize_frequencies(table, list(adult.columns), config)
