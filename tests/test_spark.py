"""The same job on a real standalone Spark cluster (a master and two workers, each a process):
Adult and FARS-like data through ``anonymize --spark`` give the in-process engine's levels,
suppressed rows, classes and file bytes; a lost executor ends the run either with the same
bytes or in a clean failure whose retry succeeds; an unreachable master and a missing input fail within seconds, in one line."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from releases.engine import AnonymizationConfig, cli, spark, streaming
from releases.engine.api import anonymize
from releases.engine.classes import codes_of, released_classes
from releases.engine.cross_release import NOT_IN
from releases.engine.export import write_csv
from releases.engine.frequency import frequency_table
from releases.engine.shuffle import KEYED, order, order_keys
from tests.conftest import ADULT
from tests.support.processes import REPO, free_port

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]

FARS_IAGE = ADULT.parent / "fars" / "fars_hierarchy_iage.csv"


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.run(argv, stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def in_process(argv: list[str], out: Path, seed: int) -> tuple[bytes, object]:
    """The in-memory engine on the same arguments, its rows in the keyed hash order of
    ``seed``: the bytes it writes and its result."""
    args = cli.build_parser().parse_args(argv)
    df, sep = cli.read_table(args.input)
    result = anonymize(df, cli.build_config(args, df))
    data = result.data.iloc[order(np.asarray(result.source_rows), seed, KEYED)]
    with open(out, "wb") as fh:
        write_csv(data.reset_index(drop=True), fh, sep)
    return out.read_bytes(), result


def adult_argv(source: Path, out: Path) -> list[str]:
    qis = ["age", "sex", "race", "education", "marital-status"]
    return [
        str(source),
        "--out",
        str(out),
        "--qi",
        *[f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}" for q in qis],
        "--sensitive",
        "occupation",
        "--k",
        "5",
        "--l",
        "2",
        "--suppression-limit",
        "0.05",
        "--seed",
        "7",
    ]


def leftovers(folder: Path, expected: set[str]) -> set[str]:
    return {p.name for p in folder.iterdir()} - expected


def test_adult_on_the_cluster_equals_the_in_process_run(spark_cluster, tmp_path):
    argv = adult_argv(ADULT / "adult.csv", tmp_path / "spark.csv")
    status, out, err = run(
        [*argv, "--report", str(tmp_path / "spark.json"), "--spark", spark_cluster.master]
    )
    assert status == 0, err
    assert "on Spark spark://127.0.0.1" in out
    spark_bytes = (tmp_path / "spark.csv").read_bytes()
    expected, result = in_process(argv, tmp_path / "memory.csv", seed=7)
    assert spark_bytes == expected
    report = json.loads((tmp_path / "spark.json").read_text())
    assert report["levels"] == result.levels
    assert report["suppressed"] == result.suppressed > 0
    assert report["classes"] == len(result.classes)
    # The in-process command (streamed, the same keyed order) writes the same file, and its
    # report agrees (its search, its classes).
    status, _, err = run(
        [
            *adult_argv(ADULT / "adult.csv", tmp_path / "cli.csv"),
            "--report",
            str(tmp_path / "cli.json"),
        ]
    )
    assert status == 0, err
    assert (tmp_path / "cli.csv").read_bytes() == spark_bytes
    by_cli = json.loads((tmp_path / "cli.json").read_text())
    for key in ("levels", "suppressed", "rows_out", "classes", "achieved", "metrics"):
        assert report[key] == by_cli[key], key
    # Checked with plain pandas: every row of the input but the suppressed ones, in classes
    # of at least 5 whose sizes are the engine's, in an order that is not the input's.
    released = pd.read_csv(tmp_path / "spark.csv", sep=";", dtype=str, keep_default_na=False)
    source = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    assert len(released) == len(source) - report["suppressed"]
    sizes = released.groupby(list(result.levels), sort=False).size()
    assert sizes.min() >= 5
    assert sorted(sizes.tolist()) == sorted(result.classes["size"].tolist())
    assert released["occupation"].tolist() != source["occupation"].tolist()[: len(released)]
    assert (
        leftovers(tmp_path, {"spark.csv", "spark.json", "memory.csv", "cli.csv", "cli.json"})
        == set()
    )


def fars_like(path: Path, rows: int = 6000, seed: int = 11) -> None:
    """FARS-like people in crashes: age 0-99 (ARX's FARS hierarchy), sex, state, injury
    severity (sensitive), a case number (identifier) and a free-text note whose cells need
    CSV quoting or formula neutralisation."""
    rng = np.random.default_rng(seed)
    notes = np.array(
        ["", "none", "=HYPERLINK(x)", "a, b", 'said "stop"', "-3", "@home"], dtype=object
    )
    frame = pd.DataFrame(
        {
            "case": [f"C{i:07d}" for i in range(rows)],
            "iage": rng.integers(0, 100, rows).astype(str),
            "sex": rng.choice(["1", "2", "9"], rows, p=[0.55, 0.44, 0.01]),
            "state": rng.choice([f"{s:02d}" for s in range(1, 57)], rows),
            "inj_sev": rng.choice(["0", "1", "2", "3", "4"], rows),
            "note": notes[rng.integers(0, len(notes), rows)],
        }
    )
    frame.to_csv(path, index=False)


def test_fars_like_data_on_the_cluster_equals_the_in_process_run(
    spark_cluster, tmp_path, monkeypatch
):
    source = tmp_path / "fars.csv"
    fars_like(source)
    argv = [
        str(source),
        "--out",
        str(tmp_path / "spark.csv"),
        "--qi",
        f"iage={FARS_IAGE}",
        "sex",
        "state",
        "--identifier",
        "case",
        "--sensitive",
        "inj_sev",
        "--k",
        "4",
        "--l",
        "2",
        "--suppression-limit",
        "0.1",
        "--seed",
        "3",
    ]
    # Small buckets: the released rows are sorted and written in several parts.
    monkeypatch.setattr(spark, "BUCKET_ROWS", 1000)
    status, out, err = run(
        [*argv, "--report", str(tmp_path / "spark.json"), "--spark", spark_cluster.master]
    )
    assert status == 0, err
    report = json.loads((tmp_path / "spark.json").read_text())
    assert report["spark"]["buckets"] > 1
    expected, result = in_process(argv, tmp_path / "memory.csv", seed=3)
    assert (tmp_path / "spark.csv").read_bytes() == expected
    assert report["levels"] == result.levels
    assert report["suppressed"] == result.suppressed
    released = pd.read_csv(tmp_path / "spark.csv", dtype=str, keep_default_na=False)
    assert "case" not in released.columns
    assert "'=HYPERLINK(x)" in set(released["note"])
    assert len(released) == 6000 - result.suppressed


def streamed_in_process(
    argv: list[str], folder: Path, bucket_rows: int
) -> tuple[AnonymizationConfig, bytes, bytes]:
    """The in-process streamed engine on ``argv``'s input and configuration: the CSV and
    Parquet bytes :func:`streaming.write_released` writes (buckets of ``bucket_rows``)."""
    args = cli.build_parser().parse_args(argv)
    df, sep = cli.read_table(args.input)
    config = cli.build_config(args, df)
    frame = pa.Table.from_pandas(df.astype(str), preserve_index=False)
    columns = [str(c) for c in df.columns]
    counted = streaming.frequency_columns(config)
    table = frequency_table(frame.select(counted).to_batches(997), counted)
    _, enc, chosen = streaming.anonymize_frequencies(table, columns, config)
    plan = streaming.plan_release(enc, chosen, config, columns, int(args.seed), sep)
    streaming.write_released(
        plan,
        frame.to_batches(997),
        folder / "memory.csv",
        folder / "memory.parquet",
        chunk_rows=bucket_rows,
    )
    return config, (folder / "memory.csv").read_bytes(), (folder / "memory.parquet").read_bytes()


@pytest.mark.parametrize("case", ["adult", "fars"])
def test_the_cluster_writes_the_in_process_csv_and_parquet_bytes(spark_cluster, tmp_path, case):
    if case == "adult":
        argv = adult_argv(ADULT / "adult.csv", tmp_path / "unused.csv")
        bucket_rows, source = 5000, ADULT / "adult.csv"
    else:
        source = tmp_path / "fars.csv"
        fars_like(source)
        argv = [
            str(source),
            *("--out", str(tmp_path / "unused.csv"), "--qi", f"iage={FARS_IAGE}", "sex"),
            *("state", "--identifier", "case", "--sensitive", "inj_sev", "--k", "4"),
            *("--l", "2", "--suppression-limit", "0.1", "--seed", "3"),
        ]
        bucket_rows = 1000
    config, csv_bytes, parquet_bytes = streamed_in_process(argv, tmp_path, bucket_rows)
    seed = int(argv[argv.index("--seed") + 1])
    made = spark.release_on_spark(
        spark_cluster.master,
        str(source),
        streaming.frequency_columns(config),
        lambda table, columns: config,
        tmp_path / "spark.csv",
        seed,
        bucket_rows=bucket_rows,
        parquet_path=tmp_path / "spark.parquet",
    )
    assert made.written.buckets > 1
    assert (tmp_path / "spark.csv").read_bytes() == csv_bytes
    assert (tmp_path / "spark.parquet").read_bytes() == parquet_bytes
    # The Parquet file holds the CSV's rows, in its order, as plain pandas reads them.
    sep = ";" if case == "adult" else ","
    from_csv = pd.read_csv(tmp_path / "spark.csv", sep=sep, dtype=str, keep_default_na=False)
    from_parquet = pd.read_parquet(tmp_path / "spark.parquet")
    assert len(from_parquet) == len(from_csv) == made.result.rows_out
    assert (
        pq.ParquetFile(tmp_path / "spark.parquet").metadata.num_row_groups >= made.written.buckets
    )
    for name in made.plan.quasi_identifiers:
        assert from_parquet[name].tolist() == from_csv[name].tolist()
    assert (
        leftovers(
            tmp_path,
            {
                "spark.csv",
                "spark.parquet",
                "memory.csv",
                "memory.parquet",
                *(["fars.csv"] if case == "fars" else []),
            },
        )
        == set()
    )


def adult_like(path: Path, rows: int, seed: int = 5) -> None:
    source = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    picked = np.random.default_rng(seed).integers(0, len(source), rows)
    source.iloc[picked].to_csv(path, sep=";", index=False)


def test_an_executor_killed_mid_run_ends_in_identical_bytes_or_a_clean_failure(
    spark_cluster, tmp_path
):
    source = tmp_path / "big.csv"
    adult_like(source, 150_000)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    argv = adult_argv(source, out_dir / "spark.csv")
    killed: list[int] = []
    stop = threading.Event()

    def kill_when_releasing() -> None:
        # The first Python process under an executor starts with the release (the reading
        # and counting run in the JVM): kill that executor then, in the middle of the run.
        while not stop.is_set():
            for executor in spark_cluster.executor_pids():
                if spark_cluster.python_workers(executor):
                    os.kill(executor, signal.SIGKILL)
                    killed.append(executor)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_releasing)
    killer.start()
    try:
        status, _, err = run(
            [*argv, "--report", str(out_dir / "spark.json"), "--spark", spark_cluster.master]
        )
    finally:
        stop.set()
        killer.join()
    assert killed, "no executor ran the release"
    expected, _ = in_process(argv, tmp_path / "memory.csv", seed=7)
    if status == 0:
        # The executor died after its tasks had finished: Spark recomputed their lost output
        # (a resubmission, which spark.task.maxFailures does not count). The run must still
        # have written exactly the in-process bytes, and nothing else.
        assert (out_dir / "spark.csv").read_bytes() == expected
        assert sorted(p.name for p in out_dir.iterdir()) == ["spark.csv", "spark.json"]
        return
    # A task was running on it: the run fails in one sentence and leaves nothing behind.
    assert status == cli.EXIT_ERROR
    assert "executor was lost" in err and "run it again" in err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "at org." not in err
    assert list(out_dir.iterdir()) == []  # no output, no temporary file, no scratch folder

    status, _, err = run(
        [*argv, "--report", str(out_dir / "spark.json"), "--spark", spark_cluster.master]
    )
    assert status == 0, err
    assert (out_dir / "spark.csv").read_bytes() == expected
    assert sorted(p.name for p in out_dir.iterdir()) == ["spark.csv", "spark.json"]


def manage(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "anonymize", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_an_unreachable_master_fails_within_the_timeout_in_one_line(tmp_path):
    port = free_port()  # nothing listens there
    started = time.monotonic()
    done = manage(
        *adult_argv(ADULT / "adult.csv", tmp_path / "x.csv"),
        "--spark",
        f"spark://127.0.0.1:{port}",
        "--spark-timeout",
        "3",
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"manage.py anonymize: error: The Spark master at spark://127.0.0.1:{port} cannot be "
        "reached (Connection refused, waited up to 3 s): is the cluster running?"
    ]
    assert elapsed < 60
    assert list(tmp_path.iterdir()) == []


def test_a_master_at_an_address_nothing_answers_on_fails_within_the_timeout(tmp_path):
    # 192.0.2.0/24 is reserved for documentation: nothing answers there (the connection
    # times out, or is refused at once where no route leads there).
    started = time.monotonic()
    status, _, err = run(
        [
            *adult_argv(ADULT / "adult.csv", tmp_path / "x.csv"),
            "--spark",
            "spark://192.0.2.1:7077",
            "--spark-timeout",
            "2",
        ]
    )
    assert status == 2
    assert "The Spark master at spark://192.0.2.1:7077 cannot be reached" in err
    assert time.monotonic() - started < 30
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("master", "message"),
    [
        ("yarn", "The Spark master 'yarn' is neither spark://HOST:PORT nor local[N]."),
        ("spark://", "The Spark master 'spark://' is neither spark://HOST:PORT nor local[N]."),
    ],
)
def test_a_malformed_master_url_is_refused(tmp_path, master, message):
    status, _, err = run([*adult_argv(ADULT / "adult.csv", tmp_path / "x.csv"), "--spark", master])
    assert status == 2
    assert err.strip() == f"anonymize: error: {message}"


def test_a_missing_input_is_refused_before_spark_starts(tmp_path):
    missing = tmp_path / "nowhere.csv"
    status, _, err = run([*adult_argv(missing, tmp_path / "x.csv"), "--spark", "local[1]"])
    assert status == 2
    assert err.strip() == (
        f"anonymize: error: The input {missing} does not exist: give one CSV or Parquet file."
    )


def test_what_needs_the_rows_in_memory_is_refused_with_spark(tmp_path):
    argv = adult_argv(ADULT / "adult.csv", tmp_path / "x.csv")
    status, _, err = run([*argv, "--algorithm", "mondrian", "--spark", "local[1]"])
    assert status == 2
    assert "--algorithm mondrian cannot be combined with --spark" in err


def test_the_cluster_observes_each_row_s_class_and_the_first_rows_across_partitions(
    spark_cluster, tmp_path
):
    source = tmp_path / "fars.csv"
    fars_like(source, rows=3000)
    argv = [
        str(source),
        *("--out", str(tmp_path / "unused.csv"), "--qi", f"iage={FARS_IAGE}", "sex"),
        *("state", "--identifier", "case", "--sensitive", "inj_sev", "--k", "4"),
        *("--suppression-limit", "0.1", "--seed", "5"),
    ]
    args = cli.build_parser().parse_args(argv)
    df, _ = cli.read_table(args.input)
    config = cli.build_config(args, df)
    columns = [str(c) for c in df.columns]
    counted = streaming.frequency_columns(config)
    frame = pa.Table.from_pandas(df.astype(str), preserve_index=False)
    table = frequency_table(frame.select(counted).to_batches(997), counted)
    _, enc, chosen = streaming.anonymize_frequencies(table, columns, config)
    plan = streaming.plan_release(enc, chosen, config, columns, 5)
    numbered = released_classes(plan, chosen)
    with spark.job(spark_cluster.master, str(source), tmp_path) as job:
        # Small splits: the input comes in several partitions.
        job.spark.conf.set("spark.sql.files.maxPartitionBytes", "16384")
        job.data = spark.read_input(job.spark, str(source))
        assert job.data.frame.rdd.getNumPartitions() > 2
        seen = job.observe(plan, numbered, ["note"], head_rows=50)
    # Each row's class, as the plan's classes number the rows read here.
    codes = [codes_of(plan, q, pa.array(df[q].astype(str).tolist())) for q in plan.values]
    expected = numbered.of(codes)
    assert np.array_equal(seen.membership, expected)
    assert int((seen.membership == NOT_IN).sum()) == plan.rows_in - plan.rows_out > 0
    # The first rows of the file: the kept rows of the 50 smallest keys, in key order.
    kept = np.flatnonzero(expected != NOT_IN)
    keys = order_keys(5, kept)
    first = kept[np.argsort(keys)[:50]]
    assert seen.head is not None
    assert seen.head.column(spark.ROW).to_pylist() == first.tolist()
    assert seen.head.column("note").to_pylist() == df["note"].astype(str).iloc[first].tolist()
    assert seen.counts["note"] == df["note"].astype(str).value_counts().to_dict()
    assert leftovers(tmp_path, {"fars.csv"}) == set()
