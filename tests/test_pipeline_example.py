"""The worked monthly pipeline of docs/pipeline.md, run as written against the live app (Redis,
a Celery worker and the web server on real processes): docs/examples/monthly.py uploads the
next month as a new version, applies the recipe and waits while an officer approves over the
API; the file it downloads is k-anonymous by a plain pandas group-by. The shell version is
checked by ``bash -n`` and, with curl and jq present, run the same way for the month after."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from tests.support import processes
from tests.support.monthly import QUASI, ROWS_PER_MONTH, month

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "docs" / "examples"
K = 5


@pytest.mark.process
def test_the_shell_example_parses():
    # bash -n reads the script without running it.
    result = subprocess.run(
        ["bash", "-n", str(EXAMPLES / "monthly.sh")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    seed = [("-m", "tests.support.monthly_scenario")]
    with processes.app_stack(
        tmp_path_factory.mktemp("monthly"), seed=seed, API_RATE_LIMIT="100000/min"
    ) as stack:
        yield {**stack, **json.loads(stack["seeded"][0])}


def call(live: dict, token: str, method: str, path: str, payload: dict | None = None) -> dict:
    body = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(
        f"{live['url']}/api/v1{path}",
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def run_with_an_officer(live: dict, command: list[str], seen: set[int]) -> tuple[str, int]:
    """Run the pipeline; meanwhile, as the officer, approve the one new request once it is
    ready for review. Returns (its output, the request approved)."""
    pipeline = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    approved = 0
    deadline = time.monotonic() + 600
    try:
        while pipeline.poll() is None and time.monotonic() < deadline:
            if not approved:
                ready = call(live, live["officer_token"], "GET", "/requests?state=ready")
                new = [r for r in ready["items"] if r["id"] not in seen]
                if new:
                    approved = new[0]["id"]
                    decision = call(
                        live,
                        live["officer_token"],
                        "POST",
                        f"/requests/{approved}/reviews",
                        {
                            "decision": "approve",
                            "comment": "Monthly release checked.",
                            # Accepts a failed check, if any, in writing (the joint classes
                            # with last month's release are reviewed each month).
                            "justification": "Overlap with earlier months reviewed.",
                        },
                    )
                    assert decision["state"] == "approved", decision
            time.sleep(0.5)
        output = pipeline.communicate(timeout=60)[0]
    finally:
        if pipeline.poll() is None:
            pipeline.kill()
    assert pipeline.returncode == 0, output
    return output, approved


def check_k(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert set(QUASI) <= set(frame.columns) and "pid" not in frame.columns
    sizes = frame.groupby(QUASI).size()
    assert sizes.min() >= K, sizes.sort_values().head()
    assert ROWS_PER_MONTH * 0.9 <= len(frame) <= ROWS_PER_MONTH
    return frame


@pytest.mark.integration
def test_the_examples_run_two_months_end_to_end(live, tmp_path):
    """Month 2 with the Python example, month 3 with the shell one (with curl and jq)."""
    upload = tmp_path / "adult-month-2.csv"
    upload.write_bytes(month(1))
    out = tmp_path / "release.csv"
    seen = {
        r["id"] for r in call(live, live["officer_token"], "GET", "/requests?limit=100")["items"]
    }
    output, approved = run_with_an_officer(
        live,
        [
            sys.executable,
            str(EXAMPLES / "monthly.py"),
            "--url",
            live["url"],
            "--token",
            live["steward_token"],
            "--dataset",
            str(live["dataset"]),
            "--recipe",
            str(live["recipe"]),
            "--file",
            str(upload),
            "--out",
            str(out),
            "--poll",
            "0.5",
            "--timeout",
            "300",
        ],
        seen,
    )
    assert "Uploaded version 2" in output and f"Submitted request {approved}" in output
    assert "verified" in output
    check_k(out)
    # The file is the release's, byte for byte (the SHA-256 the API lists for it).
    release = call(live, live["steward_token"], "GET", f"/releases/{approved}")
    listed = {f["format"]: f["sha256"] for f in release["files"]}
    assert hashlib.sha256(out.read_bytes()).hexdigest() == listed["csv"]

    if not (shutil.which("curl") and shutil.which("jq")):
        pytest.skip("curl and jq are needed to run the shell example")
    upload = tmp_path / "adult-month-3.csv"
    upload.write_bytes(month(2))
    out = tmp_path / "release-3.csv"
    seen |= {approved}
    command = [
        "env",
        f"ANONYMIZER_URL={live['url']}",
        f"ANONYMIZER_TOKEN={live['steward_token']}",
        "POLL_SECONDS=0.5",
        "TIMEOUT_SECONDS=300",
        "bash",
        str(EXAMPLES / "monthly.sh"),
        str(live["dataset"]),
        str(live["recipe"]),
        str(upload),
        str(out),
    ]
    output, third = run_with_an_officer(live, command, seen)
    assert f"Submitted request {third}" in output and "verified" in output
    check_k(out)
    # Month 3 was judged with month 2's release, the rows linked by the key column.
    checks = call(live, live["officer_token"], "GET", f"/requests/{third}/checks")
    joint = [c for c in checks if c["name"] == "cross-release"]
    assert joint and f"request #{approved}" in joint[0]["detail"], checks
