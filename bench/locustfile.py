"""Simulated people for ``bench/load.py`` (locust): privacy officers working the review queue,
request pages and classes tables, and recipients reading their release and downloading it.
Each waits 1 to 5 s between pages (reading them), locust's usual pace for people.

Configured by ``bench/load.py`` through the environment: ``LOAD_ACCOUNTS`` (user name ->
password), ``LOAD_RELEASE`` (the approved release), ``LOAD_READY`` (requests waiting for
review), ``LOAD_FILTERS`` (quasi-identifier -> a few values, for the classes filter), and
``LOAD_USERS`` / ``LOAD_SECONDS``: once the last of the users has logged in, the statistics
are reset and the run ends ``LOAD_SECONDS`` later, so the figures cover the work alone, not
the arrival (each login hashes the password on purpose slowly).
"""

from __future__ import annotations

import json
import os
import random
import re

import gevent
from locust import HttpUser, SequentialTaskSet, between, task

ACCOUNTS = json.loads(os.environ.get("LOAD_ACCOUNTS", "{}"))
RELEASE = int(os.environ.get("LOAD_RELEASE", "0"))
READY = [int(pk) for pk in os.environ.get("LOAD_READY", "").split(",") if pk]
FILTERS = json.loads(os.environ.get("LOAD_FILTERS", "{}"))
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
USERS = int(os.environ.get("LOAD_USERS", "0"))
SECONDS = float(os.environ.get("LOAD_SECONDS", "0"))
logged_in = 0


def _everyone_arrived(user: HttpUser) -> None:
    """Start measuring once every user has logged in; stop ``SECONDS`` later."""
    global logged_in
    logged_in += 1
    if USERS and logged_in == USERS:
        user.environment.stats.reset_all()
        print(f"All {USERS} users logged in: measuring {SECONDS:.0f} s", flush=True)
        gevent.spawn_later(SECONDS, user.environment.runner.quit)


def log_in(user: HttpUser, username: str) -> None:
    page = user.client.get("/accounts/login/", name="login page")
    token = TOKEN.search(page.text).group(1)
    with user.client.post(
        "/accounts/login/",
        {"username": username, "password": ACCOUNTS[username], "csrfmiddlewaretoken": token},
        name="login",
        allow_redirects=False,
        catch_response=True,
    ) as response:
        if response.status_code != 302:
            response.failure(f"login as {username} answered {response.status_code}")
    _everyone_arrived(user)


class Officer(HttpUser):
    """Reviews: the queue, a request's page, its classes table sorted, filtered and paged."""

    weight = 3
    wait_time = between(1, 5)

    def on_start(self) -> None:
        log_in(self, random.choice(["officer", "officer2"]))

    @task(2)
    def review_queue(self) -> None:
        self.client.get("/reviews/", name="review queue")

    @task(3)
    def request_page(self) -> None:
        self.client.get(f"/requests/{random.choice([*READY, RELEASE])}/", name="request page")

    @task(5)
    def classes_table(self) -> None:
        params = {
            "order": random.choice(["size", "-size", "risk", "flagged"]),
            "page": random.randint(1, 8),
        }
        if FILTERS and random.random() < 0.4:
            attribute = random.choice(list(FILTERS))
            params.update(attribute=attribute, value=random.choice(FILTERS[attribute]))
        self.client.get(
            f"/requests/{random.choice([*READY, RELEASE])}/classes/",
            params=params,
            headers={"HX-Request": "true"},
            name="classes table",
        )

    @task(1)
    def request_status(self) -> None:
        self.client.get(
            f"/requests/{random.choice(READY)}/status/",
            headers={"HX-Request": "true"},
            name="request status (polled)",
        )


class RecipientRound(SequentialTaskSet):
    """A recipient's round, in order: every other page is the CSV download, so even a short
    run (the test's 15 s, a few pages per person) measures each download a recipient uses."""

    @task
    def download_csv(self) -> None:
        self.client.get(f"/requests/{RELEASE}/download/csv/", name="download CSV")

    @task
    def recipient_page(self) -> None:
        self.client.get(f"/requests/{RELEASE}/", name="recipient page")

    @task
    def download_csv_again(self) -> None:
        self.download_csv()

    @task
    def download_parquet(self) -> None:
        self.client.get(f"/requests/{RELEASE}/download/parquet/", name="download Parquet")

    @task
    def download_csv_once_more(self) -> None:
        self.download_csv()

    @task
    def report(self) -> None:
        self.client.get(f"/requests/{RELEASE}/report.json", name="download report")


class Recipient(HttpUser):
    """A named recipient: the release's page, its report, and the downloads."""

    weight = 1
    wait_time = between(1, 5)
    tasks = [RecipientRound]

    def on_start(self) -> None:
        log_in(self, "recipient")
