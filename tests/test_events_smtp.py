"""Notification e-mails from a real Celery worker, through the outbox and real Redis, to a
real SMTP server (aiosmtpd) on 127.0.0.1: each arrives, once."""

from __future__ import annotations

import contextlib
import mailbox
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from releases.models import Notification, ReleaseRequest, Role
from releases.requests.services import Additions
from releases.review import services as review
from tests.support import processes
from tests.support.factories import make_dataset, synthetic_csv
from tests.support.workflow import request_release, tag

pytestmark = [
    pytest.mark.integration,
    pytest.mark.process,
    pytest.mark.django_db(transaction=True),
]


@contextlib.contextmanager
def smtp_server(maildir: Path) -> Iterator[int]:
    """aiosmtpd on 127.0.0.1, storing every message it receives in ``maildir``; its port."""
    port = processes.free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aiosmtpd",
            "-n",
            "-l",
            f"127.0.0.1:{port}",
            "-c",
            "aiosmtpd.handlers.Mailbox",
            str(maildir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        processes.wait_until(lambda: _accepts(port), 20, "the SMTP server")
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _messages(maildir: Path) -> list:
    if not (maildir / "new").exists():
        return []
    return list(mailbox.Maildir(str(maildir)))


def test_the_worker_mails_each_notification_once_to_the_smtp_server(
    steward, officer, recipient, start_worker, tmp_path
):
    officer.email = "officer@example.org"
    officer.save()
    recipient.email = "recipient@example.org"
    recipient.save()
    dataset = make_dataset(steward, synthetic_csv(rows=60), "people.csv")
    tag(steward, dataset, {"name": Role.IDENTIFIER, "age": Role.QUASI_IDENTIFIER})
    maildir = tmp_path / "maildir"
    with (
        smtp_server(maildir) as port,
        start_worker(
            EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
            EMAIL_HOST="127.0.0.1",
            EMAIL_PORT=str(port),
            SITE_URL="http://127.0.0.1:8123",
        ),
    ):
        release_request = request_release(steward, dataset, k=2, suppression_limit=0.1)
        processes.wait_until(
            lambda: ReleaseRequest.objects.get(pk=release_request.pk).state == "ready",
            90,
            "the worker to finish the request",
        )
        # The run's end, in the worker, told the officer: the worker mails it.
        processes.wait_until(lambda: len(_messages(maildir)) >= 1, 30, "the review e-mail")
        review.review(
            officer,
            release_request.pk,
            "approve",
            additions=Additions(recipients=[recipient]),
        )
        processes.wait_until(lambda: len(_messages(maildir)) >= 3, 30, "the decision e-mails")
    messages = _messages(maildir)
    by_recipient = sorted((m["To"], m["Subject"]) for m in messages)
    assert by_recipient == [
        ("officer@example.org", "[Anonymizer] A request is ready for review"),
        ("recipient@example.org", "[Anonymizer] A release names you"),
        ("steward@example.org", f"Release request #{release_request.pk}: approved"),
    ]
    named = next(m for m in messages if m["To"] == "recipient@example.org")
    assert f"http://127.0.0.1:8123/requests/{release_request.pk}/" in named.get_payload()
    assert not Notification.objects.filter(mail="now", mailed_at__isnull=True).exists()
