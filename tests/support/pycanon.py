"""pycanon, the independent checker, called on a written extract in its own venv.

pycanon pins older pandas and numpy than the app, so it is installed in .venv-pycanon
(``make pycanon-env``; ``make test`` makes it) and run through :mod:`pycanon_check` in a
subprocess. Tests that call it carry the ``pycanon`` marker. Each claim it checks is also
counted with plain pandas in the test itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKER = Path(__file__).with_name("pycanon_check.py")
#: The venv's interpreter; PYCANON_PYTHON names another one.
PYTHON = Path(os.environ.get("PYCANON_PYTHON") or ROOT / ".venv-pycanon" / "bin" / "python")


def measure(
    source: Path | bytes | pd.DataFrame,
    qis: Iterable[str],
    sensitive: Iterable[str] = (),
    measures: Iterable[str] = ("k",),
    *,
    sep: str = ",",
    numeric: Iterable[str] = (),
) -> dict[str, float]:
    """pycanon's ``measures`` (``k``, ``l``, ``entropy_l``, ``t``, ``delta``, ``basic_beta``,
    ``enhanced_beta``) of a CSV file: a path, the file's bytes (an extract as stored or
    downloaded), or a DataFrame written to CSV first."""
    if not PYTHON.exists():
        pytest.fail(f"pycanon's venv is missing ({PYTHON}): run `make pycanon-env`")
    if not isinstance(source, Path):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "extract.csv"
            if isinstance(source, bytes):
                path.write_bytes(source)
            else:
                source.to_csv(path, sep=sep, index=False)
            return measure(path, qis, sensitive, measures, sep=sep, numeric=numeric)
    request = {
        "csv": str(source),
        "sep": sep,
        "qi": list(qis),
        "sensitive": list(sensitive),
        "numeric": list(numeric),
        "measures": list(measures),
    }
    # -I: pycanon's own site-packages only, nothing from this checkout or the environment.
    proc = subprocess.run(
        [str(PYTHON), "-I", str(CHECKER)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
