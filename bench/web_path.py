"""The web path as a user takes it, on real processes, timed step by step with each process's
peak memory.

    python bench/web_path.py [--rows 12000000 | --csv FILE] [--sqlite] [--web-workers 2]

Starts PostgreSQL (a throwaway cluster; ``--sqlite`` for the embedded database), redis-server,
a Celery worker (prefork, one pool process, as production runs it) and gunicorn, then over
HTTP, as the three people would:

1. the steward logs in and uploads the file (a streamed multipart body: never in this
   process's memory either), then waits for profiling;
2. tags the 8 Adult quasi-identifiers with ARX's hierarchies (uploaded through the tagging
   form) and gives salary-class a role, then requests k=5 with a 5 % suppression limit, naming
   the recipient, and waits for the run;
3. opens the review page and the classes table (sorted, filtered, one class expanded);
4. an officer approves (REQUIRED_APPROVALS=1);
5. the recipient accepts the terms and downloads the CSV, whose SHA-256 is checked against the
   one the page shows.

Printed: each step's wall time, the worker's processor seconds in it (a loaded machine
stretches the first, not the second), the peak resident memory (VmHWM, reset as each step
starts) of the worker's pool process and of the web processes in each step, and the peaks over
everything. ``--py-spy FILE`` samples the worker's processes with py-spy (installed apart:
``pip install py-spy``) into collapsed stacks. Goals (issue 10), on the 1 GB
file (12 million rows): profiling and the run each under 60 s, the worker under 2 GB, each web
process under 300 MB. The file is generated once (bench/generate.py) into ``--data-dir``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from generate import generate  # noqa: E402

from releases.engine.memory import status_kb  # noqa: E402
from tests.support.postgres import postgres_cluster  # noqa: E402
from tests.support.processes import (  # noqa: E402
    VENV_BIN,
    app_environment,
    celery_worker,
    free_port,
    manage,
    redis_server,
    wait_until,
)

ADULT = ROOT / "tests" / "data" / "adult"
QUASI_IDENTIFIERS = [
    "sex",
    "age",
    "race",
    "marital-status",
    "education",
    "native-country",
    "workclass",
    "occupation",
]
CHUNK = 1024 * 1024


# --- Memory of processes ---------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """The processor time (user and system) a process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class PeakMemory:
    """Samples the peak resident memory (VmHWM, kept by the kernel) of named process trees:
    a root and its children, each child on its own, as processes come and go."""

    def __init__(self, interval: float = 0.2) -> None:
        self.roots: dict[str, int] = {}
        self.peaks: dict[str, dict[int, int]] = {}
        self.step_peaks: dict[str, dict[int, int]] = {}
        self.step_cpu: dict[str, dict[int, float]] = {}
        self.step_cpu_last: dict[str, dict[int, float]] = {}
        self.interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, name: str, pid: int) -> None:
        self.roots[name] = pid
        self.peaks.setdefault(name, {})

    def _sample(self) -> None:
        with self._lock:
            for name, root in list(self.roots.items()):
                for pid in [root, *_children(root)]:
                    hwm = status_kb("VmHWM", pid)
                    if hwm:
                        seen = self.peaks[name]
                        seen[pid] = max(seen.get(pid, 0), hwm)
                        step = self.step_peaks.setdefault(name, {})
                        step[pid] = max(step.get(pid, 0), hwm)
                    # Processor time, sampled: a pool process replaced within a step counts.
                    seconds = _cpu_seconds(pid)
                    if seconds:
                        self.step_cpu_last.setdefault(name, {})[pid] = seconds

    def new_step(self) -> None:
        """Start a step's peaks: sample, then reset each process's VmHWM to its current RSS."""
        self._sample()
        with self._lock:
            self.step_peaks = {}
            self.step_cpu = {name: self._cpu(root) for name, root in self.roots.items()}
            self.step_cpu_last = {name: dict(cpu) for name, cpu in self.step_cpu.items()}
            for root in self.roots.values():
                for pid in [root, *_children(root)]:
                    with contextlib.suppress(OSError):
                        Path(f"/proc/{pid}/clear_refs").write_text("5")

    def _cpu(self, root: int) -> dict[int, float]:
        return {pid: _cpu_seconds(pid) for pid in [root, *_children(root)]}

    def step_cpu_seconds(self, name: str) -> float:
        """Processor seconds the tree's processes used in this step (the machine may be
        loaded: wall time is then an upper bound, this is not)."""
        before = self.step_cpu.get(name, {})
        last = self.step_cpu_last.get(name, {})
        return sum(seconds - before.get(pid, 0.0) for pid, seconds in last.items())

    def step_report(self) -> dict[str, float]:
        """Per tree, the largest child's peak (the root's, without children) in this step."""
        out = {}
        for name, root in self.roots.items():
            seen = self.step_peaks.get(name, {})
            children = [kb for pid, kb in seen.items() if pid != root]
            out[name] = max(children or [seen.get(root, 0)]) / 1024
        return out

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> PeakMemory:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def report(self) -> dict[str, dict[str, float]]:
        out = {}
        for name, seen in self.peaks.items():
            root = self.roots[name]
            children = [kb for pid, kb in seen.items() if pid != root]
            out[name] = {
                "main_mb": seen.get(root, 0) / 1024,
                "largest_child_mb": max(children, default=0) / 1024,
                "children": len(children),
            }
        return out


# --- The processes ---------------------------------------------------------------------------


@contextlib.contextmanager
def gunicorn(env: dict, workdir: Path, workers: int):
    port = free_port()
    log = open(workdir / "web.log", "wb")  # noqa: SIM115 - open for the life of the process
    process = subprocess.Popen(
        [
            str(VENV_BIN / "gunicorn"),
            "anonymizer_site.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--timeout",
            "900",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError("gunicorn exited:\n" + (workdir / "web.log").read_text())
        try:
            return requests.get(url + "/accounts/login/", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    try:
        wait_until(answers, 60, "gunicorn")
        yield process, url
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@contextlib.contextmanager
def database(use_sqlite: bool, workdir: Path):
    if use_sqlite:
        yield f"sqlite:///{workdir / 'db.sqlite3'}"
    else:
        with postgres_cluster() as url:
            yield url


@contextlib.contextmanager
def sampled(pid: int, out: Path | None):
    """py-spy sampling a process and its children into ``out`` (collapsed stacks), if asked."""
    if out is None:
        yield
        return
    spy = subprocess.Popen(
        [
            str(VENV_BIN / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "--subprocesses",
            "--format",
            "raw",
            "--rate",
            "40",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(60)
        except subprocess.TimeoutExpired:
            spy.kill()


# --- A user over HTTP ------------------------------------------------------------------------


class MultipartFile:
    """A multipart/form-data body read from disk as it is sent: fields, then one file."""

    def __init__(self, fields: dict[str, str], name: str, path: Path) -> None:
        self.boundary = "----bench" + hashlib.sha256(str(path).encode()).hexdigest()[:24]
        head = "".join(
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
            for k, v in fields.items()
        )
        head += (
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{path.name}"\r\nContent-Type: text/csv\r\n\r\n'
        )
        self.parts = [head.encode(), path, f"\r\n--{self.boundary}--\r\n".encode()]
        self.length = len(self.parts[0]) + path.stat().st_size + len(self.parts[2])

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def __len__(self) -> int:  # requests then sends a Content-Length, not chunks
        return self.length

    def __iter__(self):
        yield self.parts[0]
        with open(self.parts[1], "rb") as handle:
            while chunk := handle.read(CHUNK):
                yield chunk
        yield self.parts[2]


class User:
    def __init__(self, url: str, username: str, password: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.get("/accounts/login/")
        response = self.post(
            "/accounts/login/", {"username": username, "password": password, "next": "/"}
        )
        if "/accounts/login/" in response.url:
            raise RuntimeError(f"{username} could not log in")

    @property
    def token(self) -> str:
        return self.session.cookies.get("csrftoken", "")

    def get(self, path: str, **kwargs) -> requests.Response:
        response = self.session.get(self.url + path, timeout=900, **kwargs)
        response.raise_for_status()
        return response

    def post(self, path: str, data=None, files=None, **kwargs) -> requests.Response:
        data = {**(data or {}), "csrfmiddlewaretoken": self.token}
        response = self.session.post(
            self.url + path,
            data=data,
            files=files,
            headers={"X-CSRFToken": self.token, "Referer": self.url + path},
            timeout=900,
            **kwargs,
        )
        response.raise_for_status()
        return response

    def upload(self, path: Path) -> requests.Response:
        body = MultipartFile({"csrfmiddlewaretoken": self.token, "name": path.stem}, "file", path)
        response = self.session.post(
            self.url + "/datasets/",
            data=body,
            headers={"Content-Type": body.content_type, "X-CSRFToken": self.token},
            timeout=900,
        )
        if response.status_code >= 400:
            errors = re.findall(r'class="[^"]*error[^"]*"[^>]*>([^<]+)', response.text)
            raise RuntimeError(f"The upload was refused ({response.status_code}): {errors}")
        return response


def _wait_for(user: User, path: str, done, what: str, timeout: float = 1800) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = user.get(path).text
        if done(text):
            return text
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not finish within {timeout:.0f} s")


class Steps:
    """Each step's time and each process tree's peak during it: the kernel's peak (VmHWM) is
    reset as a step starts (``clear_refs``), so a step's peak is its own, not an earlier
    task's in the same pool process."""

    def __init__(self, memory: PeakMemory) -> None:
        self.times: list[tuple[str, float, str]] = []
        self.step_peaks: dict[str, dict[str, float]] = {}
        self.step_cpu: dict[str, float] = {}
        self.memory = memory

    @contextlib.contextmanager
    def step(self, name: str, note: str = ""):
        self.memory.new_step()
        t0 = time.perf_counter()
        yield
        self.times.append((name, time.perf_counter() - t0, note))
        self.memory._sample()
        peaks = self.memory.step_report()
        cpu = self.memory.step_cpu_seconds("worker")
        self.step_peaks[name] = {who: round(mb) for who, mb in peaks.items()}
        self.step_cpu[name] = round(cpu, 1)
        print(
            f"  {name:<34} {self.times[-1][1]:8.1f} s  (worker CPU {cpu:6.1f} s)  peak in the "
            f"step: worker {peaks['worker']:5.0f} MB, web {peaks['web']:4.0f} MB  {note}",
            file=sys.stderr,
            flush=True,
        )


def walk(url: str, accounts: dict, source: Path, steps: Steps, worker_log: Path) -> dict:
    """Everything a steward, an officer and a recipient do, over HTTP."""
    steward = User(url, "steward", accounts["steward"])
    with steps.step("upload (HTTP, streamed)", f"{source.stat().st_size / 1e6:,.0f} MB"):
        response = steward.upload(source)
        match = re.search(r"/datasets/(\d+)/", response.url)
        if not match:
            raise RuntimeError("The upload was refused:\n" + response.text[:2000])
        dataset_id = int(match.group(1))
    with steps.step("profiling (worker)"):
        _wait_for(
            steward,
            f"/datasets/{dataset_id}/status/",
            lambda t: "Show the result" in t,
            "profiling",
        )
    page = steward.get(f"/datasets/{dataset_id}/").text
    if "role-" not in page:
        raise RuntimeError("Profiling failed:\n" + page[:3000])
    columns = dict(
        (name, int(pk))
        for pk, name in re.findall(
            r'<tbody id="column-(\d+)"[^>]*>\s*<tr data-column="([^"]+)"', page
        )
    )
    with steps.step("tagging + 8 hierarchies (HTTP)"):
        data = {}
        files = {}
        for name, pk in columns.items():
            if name in QUASI_IDENTIFIERS:
                data[f"role-{pk}"] = "quasi"
                data[f"builder-{pk}"] = "uploaded"
                files[f"hierarchy-{pk}"] = (
                    f"adult_hierarchy_{name}.csv",
                    (ADULT / f"adult_hierarchy_{name}.csv").read_bytes(),
                    "text/csv",
                )
            else:
                data[f"role-{pk}"] = "sensitive"
        steward.post(f"/datasets/{dataset_id}/tagging/", data, files=files)
    with steps.step("risk panel (worker)"):
        # Tagging queues the dataset's risk measure; the run would wait behind it.
        wait_until(
            lambda: re.search(r"releases\.dataset_risk\[[^]]*\] succeeded", worker_log.read_text()),
            1800,
            "the risk measure",
        )
    page = steward.get(f"/datasets/{dataset_id}/").text
    recipient = re.search(r'name="recipients" value="(\d+)"[^>]*>\s*recipient\b', page)
    if recipient is None:
        raise RuntimeError("No recipient to name on the request form.")
    with steps.step("request k=5, 5 % (HTTP)"):
        response = steward.post(
            f"/datasets/{dataset_id}/request/",
            {
                "use__k-anonymity": "on",
                "k-anonymity__k": "5",
                "suppression_percent": "5",
                "algorithm": "optimal",
                "recipients": recipient.group(1),
                "terms": "",
            },
        )
        match = re.search(r"/requests/(\d+)/", response.url)
        if not match:
            raise RuntimeError("The request was refused:\n" + response.text[:3000])
        request_id = int(match.group(1))
    with steps.step("release run (worker)"):
        _wait_for(
            steward,
            f"/requests/{request_id}/status/",
            lambda t: re.search(r'data-state="(queued|running)"', t) is None,
            "the run",
        )
    officer = User(url, "officer", accounts["officer"])
    sizes = {}
    with steps.step("review page (officer)"):
        page = officer.get(f"/requests/{request_id}/").text
        sizes["review page"] = len(page)
    if 'data-state="ready"' not in page:
        raise RuntimeError("The run failed:\n" + page[:3000])
    htmx = {"HX-Request": "true"}
    with steps.step("classes: by risk, filtered, page 2"):
        officer.get(f"/requests/{request_id}/classes/?order=risk", headers=htmx)
        officer.get(
            f"/requests/{request_id}/classes/?attribute=sex&value=Male&order=-size", headers=htmx
        )
        listed = officer.get(f"/requests/{request_id}/classes/?page=2", headers=htmx).text
    class_ids = re.findall(rf"/requests/{request_id}/classes/(\d+)/", listed)
    if class_ids:
        with steps.step("one class expanded"):
            officer.get(f"/requests/{request_id}/classes/{class_ids[0]}/", headers=htmx)
    with steps.step("approve (officer)"):
        officer.post(
            f"/requests/{request_id}/review/", {"decision": "approve", "comment": "Benchmark."}
        )
    receiver = User(url, "recipient", accounts["recipient"])
    with steps.step("accept the terms (recipient)"):
        receiver.post(f"/requests/{request_id}/terms/")
    page = receiver.get(f"/requests/{request_id}/").text
    shown = set(re.findall(r"\b[0-9a-f]{64}\b", page))
    digest, size = hashlib.sha256(), 0
    with (
        steps.step("download CSV (HTTP, streamed)"),
        receiver.session.get(
            f"{url}/requests/{request_id}/download/", stream=True, timeout=900
        ) as response,
    ):
        response.raise_for_status()
        for chunk in response.iter_content(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    if digest.hexdigest() not in shown:
        raise RuntimeError("The downloaded CSV's SHA-256 is not the one the page shows.")
    return {"dataset": dataset_id, "request": request_id, "extract_mb": size / 1e6, **sizes}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=12_000_000)
    parser.add_argument("--csv", type=Path, help="an existing Adult-like file instead")
    parser.add_argument("--data-dir", type=Path, default=ROOT / "var" / "bench")
    parser.add_argument("--sqlite", action="store_true", help="SQLite instead of PostgreSQL")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="FILE",
        help="sample the worker's processes with py-spy (collapsed stacks into FILE)",
    )
    args = parser.parse_args(argv)

    source = args.csv
    if source is None:
        args.data_dir.mkdir(parents=True, exist_ok=True)
        source = args.data_dir / f"adult-{args.rows}.csv"
        if not source.exists():
            print(f"Generating {args.rows:,} rows into {source}", file=sys.stderr)
            generate(args.rows, source.with_suffix(".part"))
            source.with_suffix(".part").rename(source)

    memory = PeakMemory()
    steps = Steps(memory)
    with tempfile.TemporaryDirectory(prefix="anonymizer-web-bench-") as tmp:
        workdir = Path(tmp)
        with redis_server(workdir) as redis_url, database(args.sqlite, workdir) as db_url:
            env = app_environment(db_url, redis_url, workdir / "media", workdir)
            env.update(
                DEBUG="0",
                SECURE_COOKIES="0",
                REQUIRED_APPROVALS="1",
                FILE_UPLOAD_TEMP_DIR=str(workdir),
            )
            manage(env, "migrate", "--noinput")
            manage(env, "seed_demo")
            accounts = json.loads((workdir / "demo-accounts.txt").read_text())
            with (
                celery_worker(env, workdir, pool="prefork") as worker,
                gunicorn(env, workdir, args.web_workers) as (web, url),
            ):
                memory.watch("worker", worker.pid)
                memory.watch("web", web.pid)
                memory.start()
                print(
                    f"Web path on {source.name} ({'SQLite' if args.sqlite else 'PostgreSQL'}, "
                    f"{args.web_workers} gunicorn workers, Celery prefork x1):",
                    file=sys.stderr,
                )
                with sampled(worker.pid, args.py_spy):
                    try:
                        outcome = walk(url, accounts, source, steps, workdir / "worker.log")
                    finally:
                        memory.stop()
                # The worker's own account of the run's stages.
                for line in (workdir / "worker.log").read_text().splitlines():
                    if re.search(r"Request \d+ round \d+: ", line):
                        stages = re.sub(r".*Request \d+ round \d+: ", "", line)
                        print("  run stages: " + stages, file=sys.stderr)
                        outcome["run_stages"] = stages
                        break
                # Each task's time in the worker (a run waits for the tasks queued before it).
                for line in (workdir / "worker.log").read_text().splitlines():
                    found = re.search(r"Task (\S+)\[[^]]*\] succeeded in ([\d.]+)s", line)
                    if found:
                        print(f"  task {found[1]}: {float(found[2]):.1f} s", file=sys.stderr)
    peaks = memory.report()
    print(
        f"  worker pool process peak {peaks['worker']['largest_child_mb']:8.0f} MB "
        f"(goal < 2048), worker main process {peaks['worker']['main_mb']:.0f} MB",
        file=sys.stderr,
    )
    print(
        f"  web process peak         {peaks['web']['largest_child_mb']:8.0f} MB "
        f"(goal < 300, largest of {peaks['web']['children']} gunicorn workers), "
        f"master {peaks['web']['main_mb']:.0f} MB",
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                "file": source.name,
                "database": "sqlite" if args.sqlite else "postgresql",
                "steps_s": {name: round(seconds, 2) for name, seconds, _ in steps.times},
                "step_peaks_mb": steps.step_peaks,
                "step_worker_cpu_s": steps.step_cpu,
                "peaks_mb": peaks,
                **outcome,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
