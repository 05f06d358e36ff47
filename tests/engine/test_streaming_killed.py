"""A process killed with -9 while :func:`streaming.write_released` writes leaves its bucket
files beside the output; the next release written into that folder removes them (and never
the bucket folders of a live process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from releases.engine import AnonymizationConfig, Hierarchy, PrivacyModel
from releases.engine.frequency import frequency_table
from releases.engine.streaming import (
    BUCKETS,
    anonymize_frequencies,
    plan_release,
    remove_dead_buckets,
    write_released,
)

ROOT = Path(__file__).resolve().parents[2]

#: A child that plans a release of ``rows`` rows and writes it slowly (a pause after each
#: batch), so that it can be killed while its bucket files exist.
CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from tests.engine.test_streaming_killed import plan_and_batches
    from releases.engine.streaming import write_released
    plan, batches = plan_and_batches()

    def slowly():
        for batch in batches():
            yield batch
            time.sleep(0.5)

    write_released(plan, slowly(), {target!r}, chunk_rows=500)
    """
)


def table(rows: int = 4000) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "age": [str(20 + i % 50) for i in range(rows)],
            "zip": [f"{10000 + i % 37}" for i in range(rows)],
            "note": [f"n{i}" for i in range(rows)],
        }
    )


def plan_and_batches():
    frame = table()
    config = AnonymizationConfig(
        quasi_identifiers={
            "age": Hierarchy.intervals(frame["age"]),
            "zip": Hierarchy.masking(frame["zip"]),
        },
        model=PrivacyModel.from_spec(
            {"criteria": [{"model": "k-anonymity", "k": 3}], "suppression_limit": 0.05}
        ),
    )

    def batches():
        for start in range(0, len(frame), 400):
            part = frame.iloc[start : start + 400]
            yield pa.RecordBatch.from_pandas(part, preserve_index=False)

    freq = frequency_table(batches(), ["age", "zip"])
    _, enc, chosen = anonymize_frequencies(freq, list(frame.columns), config)
    return plan_release(enc, chosen, config, list(frame.columns), seed=3), batches


def buckets(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"{BUCKETS}*"))


@pytest.mark.process
def test_a_writer_killed_leaves_buckets_that_the_next_release_removes(tmp_path):
    target = tmp_path / "out.csv"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(root=str(ROOT), target=str(target))], cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 60
        while not any(b.is_dir() and any(b.iterdir()) for b in buckets(tmp_path)):
            assert child.poll() is None, "the writer ended before it could be killed"
            assert time.monotonic() < deadline, "the writer wrote no bucket file"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    left = buckets(tmp_path)
    assert len(left) == 1 and str(child.pid) in left[0].name
    assert any(left[0].iterdir())  # the dead writer's bucket files

    # A live process's bucket folder (this one's) is never taken for a dead one's.
    own = tmp_path / f"{left[0].name.rsplit('-', 2)[0]}-{os.getpid()}-live"
    own.mkdir()

    plan, batches = plan_and_batches()
    written = write_released(plan, batches(), target, chunk_rows=500)
    assert buckets(tmp_path) == [own]
    released = pd.read_csv(target, dtype=str, keep_default_na=False)
    assert len(released) == written.rows == plan.rows_out
    # The file is k-anonymous on its generalized quasi-identifiers (counted by pandas).
    assert released.groupby(["age", "zip"]).size().min() >= 3
    assert remove_dead_buckets(tmp_path) == 0
