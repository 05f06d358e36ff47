"""Upload and profiling of a large file through the real service and task bodies.

    python bench/profile_upload.py [--rows 12000000 | --csv FILE]

Each step runs in its own Python process (so each peak is its own), on a throwaway SQLite
database and media folder:

* ``upload``  - ``datasets.create_dataset`` on the file as Django's upload handler leaves it
  (a temporary file): size check, hashing and the copy into private storage, as the web
  process does it;
* ``profile`` - ``profiling.profile_dataset``, the body of the Celery task: the SHA-256 check,
  the streaming read into the column store, and the profile of every column, as the worker
  does it.

Printed: each step's wall time and peak memory (``ru_maxrss`` of the process), the rows and
columns found. Goals (issue 10): profiling a 1 GB file in under 60 s with the worker under 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from generate import generate  # noqa: E402


def _setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")
    import django

    django.setup()


def _child(step: str, arg: str) -> dict:
    import resource

    _setup()
    from unittest import mock

    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import UploadedFile

    from releases.core import roles
    from releases.datasets import profiling
    from releases.datasets import services as datasets
    from releases.models import Dataset
    from tests.support import members

    t0 = time.perf_counter()
    if step == "upload":
        user, _ = get_user_model().objects.get_or_create(username="bench-steward")
        members.grant(user, roles.STEWARDS)
        path = Path(arg)
        with open(path, "rb") as handle:
            uploaded = UploadedFile(handle, name=path.name, size=path.stat().st_size)
            with mock.patch.object(datasets, "enqueue_profiling"):
                dataset = datasets.create_dataset(user, uploaded)
        figures = {"dataset": dataset.pk}
    else:
        dataset = profiling.profile_dataset(int(arg))
        dataset = Dataset.objects.get(pk=dataset.pk)
        figures = {
            "status": dataset.status,
            "error": dataset.error,
            "rows": dataset.row_count,
            "columns": dataset.columns.count(),
            "types": {c.name: c.inferred_type for c in dataset.columns.all()[:12]},
        }
    figures["seconds"] = time.perf_counter() - t0
    figures["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


def _run(step: str, arg: str, env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", step, arg],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        raise SystemExit(f"{step} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Benchmark upload and profiling.")
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--rows", type=int, default=12_000_000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        source = args.csv
        if source is None:
            source = Path(tmp) / "adult-like.csv"
            t0 = time.perf_counter()
            generate(args.rows, source)
            print(f"generated {args.rows:,} rows in {time.perf_counter() - t0:.0f} s")
        env = dict(os.environ, VAR_DIR=tmp, MEDIA_ROOT=str(Path(tmp) / "media"))
        env["DATABASE_URL"] = f"sqlite:///{tmp}/bench.sqlite3"
        env["FILE_UPLOAD_TEMP_DIR"] = tmp
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        size = source.stat().st_size
        print(f"{source.name}: {size / 1e6:,.0f} MB")
        up = _run("upload", str(source), env)
        print(f"  upload (web process):  {up['seconds']:6.1f} s   peak {up['peak_mb']:6.0f} MB")
        prof = _run("profile", str(up["dataset"]), env)
        print(
            f"  profile (worker):      {prof['seconds']:6.1f} s   peak {prof['peak_mb']:6.0f} MB"
            f"   {prof['status']}: {prof['rows']:,} rows, {prof['columns']} columns"
            f"{'  ' + prof['error'] if prof['error'] else ''}"
        )
        print(f"  types: {prof['types']}")
        print("  goals: profiling < 60 s, worker < 2048 MB, web process < 300 MB")


if __name__ == "__main__":
    main()
