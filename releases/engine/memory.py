"""A process's resident memory as Linux reports it in ``/proc/PID/status``: the resident set now
(VmRSS) and its peak (VmHWM). The command line's ``--verbose`` stages, the worker's stage log
and the benchmarks read it here. Elsewhere (no ``/proc``) the readings are None, or, for this
process's peak, ``getrusage``'s."""

from __future__ import annotations

import contextlib
import resource
from pathlib import Path


def status_kb(field: str, pid: int | None = None) -> int | None:
    """The ``field`` line (``VmRSS``, ``VmHWM``) of process ``pid``'s status (this process's
    when None), in kB; None when there is no such process, file or line."""
    path = Path("/proc/self/status" if pid is None else f"/proc/{pid}/status")
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def resident_mb() -> int | None:
    """This process's resident memory now, in whole MB (None where it cannot be read)."""
    kb = status_kb("VmRSS")
    return None if kb is None else kb // 1024


def peak_mb() -> float:
    """This process's peak resident memory in MB: since :func:`reset_peak` on Linux (VmHWM),
    else the peak so far (``ru_maxrss``, kB on Linux)."""
    kb = status_kb("VmHWM")
    if kb is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return kb / 1024


def reset_peak() -> None:
    """Restart this process's peak (VmHWM) from its resident memory now (Linux; elsewhere
    nothing happens)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
