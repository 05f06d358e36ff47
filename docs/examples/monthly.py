#!/usr/bin/env python3
"""The monthly release pipeline over the Anonymizer's HTTP API, with the standard library only.

Uploads this month's file as the next version of a dataset, applies a saved recipe to it (the
request is submitted at once), waits for the privacy officers' approval, accepts the terms,
downloads the extract and checks its SHA-256 against the X-Content-SHA256 header.

    ANONYMIZER_URL=https://anonymizer.example.org ANONYMIZER_TOKEN=... \\
        python3 monthly.py --dataset 12 --recipe 3 --file adult-2026-11.csv --out release.csv

Exit status: 0 downloaded and verified; 1 refused, rejected, failed or a wrong checksum;
2 timed out waiting. See docs/pipeline.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

#: Request states after which no approval will come without a person acting again.
ENDED = {"failed", "rejected", "cancelled", "changes", "revoked", "expired"}


class Refused(Exception):
    """The API refused a call (its problem+json detail)."""


class Client:
    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/") + "/api/v1"
        self.token = token

    def call(self, method: str, path: str, body: bytes | None = None, content_type: str = ""):
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            return urllib.request.urlopen(request, timeout=60)
        except urllib.error.HTTPError as exc:
            try:
                detail = json.loads(exc.read()).get("detail", "")
            except ValueError:
                detail = ""
            raise Refused(f"{method} {path}: {exc.code} {detail}".strip()) from None

    def json(self, method: str, path: str, payload: dict | None = None) -> dict:
        body = None if payload is None else json.dumps(payload).encode()
        with self.call(method, path, body, "application/json" if body else "") as response:
            return json.loads(response.read())

    def upload(self, path: str, file: Path) -> dict:
        """POST ``file`` as the multipart field ``file``."""
        boundary = uuid.uuid4().hex
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{file.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        body = head + file.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
        with self.call("POST", path, body, f"multipart/form-data; boundary={boundary}") as response:
            return json.loads(response.read())


def wait(check, what: str, timeout: float, every: float):
    """Call ``check`` until it returns something; TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found is not None:
            return found
        time.sleep(every)
    raise TimeoutError(f"Still waiting for {what} after {timeout:.0f} s.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("ANONYMIZER_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("ANONYMIZER_TOKEN", ""))
    parser.add_argument("--dataset", type=int, required=True, help="any version of the dataset")
    parser.add_argument("--recipe", type=int, required=True)
    parser.add_argument("--file", type=Path, required=True, help="this month's file")
    parser.add_argument("--out", type=Path, default=Path("release.csv"))
    parser.add_argument("--poll", type=float, default=10.0, help="seconds between status calls")
    parser.add_argument("--timeout", type=float, default=3 * 24 * 3600.0)
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("give --token or set ANONYMIZER_TOKEN")
    api = Client(args.url, args.token)
    try:
        # 1. The new version; its columns keep the previous version's roles once profiled.
        version = api.upload(f"/datasets/{args.dataset}/versions", args.file)
        print(f"Uploaded version {version['version']} as dataset {version['id']}", flush=True)

        def profiled():
            detail = api.json("GET", f"/datasets/{version['id']}")
            return detail if detail["status"] in ("ready", "failed") else None

        detail = wait(profiled, "the profiling", args.timeout, args.poll)
        if detail["status"] == "failed":
            print(f"The file was refused: {detail['error']}", file=sys.stderr)
            return 1
        for change in detail["schema_changes"]:
            print(f"Schema: {change}", flush=True)

        # 2. The recipe's request, submitted at once (refused while a new column has no role).
        request = api.json("POST", f"/recipes/{args.recipe}/apply", {"dataset": version["id"]})
        print(f"Submitted request {request['id']}", flush=True)

        # 3. Wait for the run, then for the officers' decision.
        def decided():
            state = api.json("GET", f"/requests/{request['id']}")["state"]
            return state if state == "approved" or state in ENDED else None

        state = wait(decided, "the approval", args.timeout, args.poll)
        if state != "approved":
            print(f"Request {request['id']} ended {state}: see its page.", file=sys.stderr)
            return 1

        # 4. Accept the terms once, download, and check the SHA-256 the server states.
        release = api.json("GET", f"/releases/{request['id']}")
        if not release["terms_accepted"]:
            api.json("POST", f"/releases/{request['id']}/terms")
        digest = hashlib.sha256()
        with api.call("GET", f"/releases/{request['id']}/files/csv") as response:
            stated = response.headers["X-Content-SHA256"]
            with args.out.open("wb") as out:
                while chunk := response.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
    except Refused as exc:
        print(f"Refused: {exc}", file=sys.stderr)
        return 1
    except TimeoutError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if digest.hexdigest() != stated:
        print(f"Checksum mismatch: got {digest.hexdigest()}, stated {stated}", file=sys.stderr)
        args.out.unlink()
        return 1
    print(f"Downloaded {args.out} (SHA-256 {stated}, verified)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
