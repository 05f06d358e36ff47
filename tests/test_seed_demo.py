"""`seed_demo --with-release`: a newcomer finds an approved release with every page filled."""

from __future__ import annotations

import io
import json
import shutil

import pandas as pd
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from releases.core import storage
from releases.management.commands import seed_demo
from releases.models import (
    AttackerFile,
    AuditEvent,
    Dataset,
    Membership,
    ReleaseRequest,
    Reproduction,
    Role,
)
from releases.requests import rules as lifecycle
from tests.conftest import ADULT, ADULT_QUASI_IDENTIFIERS
from tests.test_cross_release_web import classes_at, joint_sizes


@pytest.fixture
def small_adult(tmp_path, monkeypatch):
    """The first 3,000 rows of Adult with ARX's hierarchies: the same command, in seconds."""
    folder = tmp_path / "adult"
    folder.mkdir()
    frame = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    frame.head(3000).to_csv(folder / "adult.csv", sep=";", index=False)
    for path in ADULT.glob("adult_hierarchy_*.csv"):
        shutil.copy(path, folder / path.name)
    monkeypatch.setattr(seed_demo, "ADULT", folder)
    return folder


@pytest.mark.django_db(transaction=True)
def test_seed_demo_with_release_makes_an_approved_release_for_the_recipient(
    small_adult, settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--with-release")
    release_request = ReleaseRequest.objects.get(state=ReleaseRequest.State.APPROVED)
    assert release_request.state == ReleaseRequest.State.APPROVED
    assert release_request.model_description == "k=5, at most 5% of rows suppressed"
    assert release_request.reviews.get().reviewer.username == "officer"
    recipient = User.objects.get(username="recipient")
    assert list(release_request.recipients.all()) == [recipient]
    assert lifecycle.can_accept_terms(recipient, release_request)
    adult = Dataset.objects.get(project__slug="default")
    roles = dict(adult.columns.values_list("name", "role"))
    assert roles == {
        **dict.fromkeys(ADULT_QUASI_IDENTIFIERS, Role.QUASI_IDENTIFIER),
        "workclass": Role.INSENSITIVE,
    }
    sources = {
        q["name"]: q["hierarchy_filename"] for q in release_request.config["quasi_identifiers"]
    }
    assert sources == {q: f"adult_hierarchy_{q}.csv" for q in ADULT_QUASI_IDENTIFIERS}
    assert release_request.files.count() == 3
    assert release_request.reproductions.get().state == Reproduction.State.IDENTICAL
    # A second extract of the same rows waits for review and fails the cross-release check:
    # the figures are those of a plain group-by of the two extracts' classes per source row.
    second = ReleaseRequest.objects.exclude(pk=release_request.pk).get()
    assert second.state == ReleaseRequest.State.READY
    first_levels, second_levels = release_request.summary["levels"], second.summary["levels"]
    assert any(second_levels[q] < first_levels[q] for q in ADULT_QUASI_IDENTIFIERS)
    original = pd.read_csv(small_adult / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    expected = joint_sizes(classes_at(original, second_levels), classes_at(original, first_levels))
    [entry] = second.summary["cross_release"]
    assert entry["request"] == release_request.pk and entry["passed"] is False
    assert entry["smallest_joint_class"] == int(expected.min()) < 5
    assert entry["rows_below_k"] == int(expected[expected < 5].sum())
    # A second run leaves it as it is.
    call_command("seed_demo", "--with-release")
    assert ReleaseRequest.objects.count() == 2 and Dataset.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_seed_demo_links_a_demo_voter_list_to_the_demo_release(small_adult, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", "--with-release")
    release_request = ReleaseRequest.objects.get(state=ReleaseRequest.State.APPROVED)
    voters = AttackerFile.objects.get(request=release_request)
    assert voters.name == seed_demo.VOTER_LIST and voters.uploaded_by.username == "officer"
    # The same bytes every time, derived from the demo dataset: a name and five of its columns.
    content = seed_demo.demo_voter_list(small_adult / "adult.csv")
    assert content == seed_demo.demo_voter_list(small_adult / "adult.csv")
    assert storage.sha256_hex(content) == voters.sha256
    listed = pd.read_csv(io.BytesIO(content), dtype=str, keep_default_na=False)
    assert list(listed.columns) == ["name", "age", "sex", "race", "native-country", "workclass"]
    assert listed["name"].is_unique and len(listed) == 3000
    # Linked before the approval, on the columns the extract shares with it.
    assert voters.state == AttackerFile.State.DONE and voters.linked_round == 1
    found = voters.linkage
    assert found["attacker_records"] == 3000
    assert found["matched_columns"] == ["sex", "age", "race", "native-country", "workclass"]
    assert found["matched_one"] > 0  # workclass, released unchanged, singles voters out
    linked = AuditEvent.objects.get(action=AuditEvent.Action.LINKED)
    approved = AuditEvent.objects.get(action=AuditEvent.Action.REVIEW)
    assert linked.pk < approved.pk
    # The officer's page shows it; the recipient's does not.
    client = Client()
    client.force_login(User.objects.get(username="officer"))
    assert 'id="linkage-table"' in client.get(release_request.get_absolute_url()).content.decode()
    client.force_login(User.objects.get(username="recipient"))
    assert "demo-voter-list" not in client.get(release_request.get_absolute_url()).content.decode()


@pytest.mark.django_db(transaction=True)
def test_seed_demo_makes_two_projects_whose_people_see_only_their_own(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo")
    passwords = json.loads((tmp_path / "demo-accounts.txt").read_text())
    assert {"steward", "officer", "officer2", "recipient", "steward_b", "officer_b"} <= set(
        passwords
    )
    held = {
        (m.user.username, m.project.slug, m.role)
        for m in Membership.objects.select_related("user", "project")
    }
    assert ("steward_b", "study-b", "steward") in held
    assert ("officer_b", "study-b", "officer") in held
    assert not any(u in ("steward_b", "officer_b") and p == "default" for u, p, _ in held)
    assert not any(u in ("steward", "officer") and p == "study-b" for u, p, _ in held)
    second = Dataset.objects.get(project__slug="study-b")
    assert second.owner.username == "steward_b" and second.is_ready
    client = Client()
    # The passwords written down are the accounts'.
    for username in ("steward_b", "officer_b"):
        assert User.objects.get(username=username).check_password(passwords[username])
    client.force_login(User.objects.get(username="steward_b"))
    assert client.get(f"/datasets/{second.pk}/").status_code == 200
    client.force_login(User.objects.get(username="steward"))
    assert client.get(f"/datasets/{second.pk}/").status_code == 404
    assert second.name.encode() not in client.get("/datasets/").content
    # A second run keeps the same accounts and dataset.
    call_command("seed_demo")
    assert json.loads((tmp_path / "demo-accounts.txt").read_text()) == passwords
    assert Dataset.objects.filter(project__slug="study-b").count() == 1
