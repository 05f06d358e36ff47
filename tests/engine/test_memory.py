"""The resident-memory readings the command line's ``--verbose`` stages, the worker's stage log
and the benchmarks share (``releases.engine.memory``): they follow what the process really
holds, the peak restarts at a stage's start, and a process or line that is not there reads as
None."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from releases.engine import memory

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="Linux reports memory in /proc"
)

MB = 1024 * 1024
#: Large enough to stand out of the interpreter's own noise; numpy maps it apart, so freeing
#: it gives it back to the system.
BLOCK_MB = 160


def test_resident_memory_follows_an_allocation_and_its_release() -> None:
    before = memory.resident_mb()
    assert before is not None and before > 0
    block = np.ones(BLOCK_MB * MB, dtype=np.uint8)  # every page touched
    held = memory.resident_mb()
    del block
    after = memory.resident_mb()
    assert held is not None and after is not None
    assert held - before >= BLOCK_MB * 0.9
    assert held - after >= BLOCK_MB * 0.9


def test_the_peak_restarts_at_a_reset() -> None:
    memory.reset_peak()
    block = np.ones(BLOCK_MB * MB, dtype=np.uint8)
    del block
    high = memory.peak_mb()
    now = memory.resident_mb()
    assert now is not None
    # The block is gone but the peak remembers it.
    assert high - now >= BLOCK_MB * 0.9
    memory.reset_peak()
    # A new stage starts from what the process holds now, not from the last stage's peak.
    assert memory.peak_mb() - now < BLOCK_MB * 0.5


def test_another_process_is_read_by_its_id_and_a_missing_one_reads_none() -> None:
    by_id = memory.status_kb("VmRSS", os.getpid())
    own = memory.status_kb("VmRSS")
    assert by_id is not None and own is not None
    assert abs(by_id - own) < 16 * 1024
    # Process ids stay below pid_max: that one never exists.
    missing = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert memory.status_kb("VmRSS", missing) is None
    assert memory.status_kb("NoSuchField") is None
