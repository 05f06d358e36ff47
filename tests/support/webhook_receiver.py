"""A webhook receiver, run as its own process by the tests: it checks each delivery's
HMAC-SHA256 signature as docs/webhooks.md tells receivers to, and records it.

    python webhook_receiver.py PORT SECRET RECORD_FILE [FAILURES]

Answers 500 to the first FAILURES posts (default 0), then 200; prints "ready" once listening.
Each post is one JSON line in RECORD_FILE: headers, body, whether the signature matched, and
the status it answered.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, SECRET, RECORD = int(sys.argv[1]), sys.argv[2], sys.argv[3]
FAILURES = int(sys.argv[4]) if len(sys.argv) > 4 else 0
seen = 0


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        global seen
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        timestamp = self.headers.get("X-Anonymizer-Timestamp", "")
        expected = (
            "sha256="
            + hmac.new(
                SECRET.encode(), timestamp.encode() + b"." + body, hashlib.sha256
            ).hexdigest()
        )
        valid = hmac.compare_digest(expected, self.headers.get("X-Anonymizer-Signature", ""))
        seen += 1
        status = 500 if seen <= FAILURES else (200 if valid else 401)
        with open(RECORD, "a") as record:
            record.write(
                json.dumps(
                    {
                        "event": self.headers.get("X-Anonymizer-Event"),
                        "delivery": self.headers.get("X-Anonymizer-Delivery"),
                        "timestamp": timestamp,
                        "valid": valid,
                        "status": status,
                        "body": json.loads(body),
                    }
                )
                + "\n"
            )
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print("ready", flush=True)
server.serve_forever()
