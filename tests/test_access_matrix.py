"""Who sees what: every person against every page and file of a release, before approval,
approved, expired and revoked; and nothing a recipient can reach holds a value that exists only
in the original data.

The data carries markers that never reach the extract: names (a direct identifier, dropped),
e-mail addresses (withheld) and city names (a quasi-identifier that k=5 must generalize to its
region, since no city has 5 rows). Every body a recipient is served is scanned for them.
"""

from __future__ import annotations

import datetime
import io
import json
import random
import re

import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from releases.core import storage
from releases.datasets import services as datasets
from releases.models import ReleaseRequest, Role
from tests.support import world as world_support

State = ReleaseRequest.State
pytestmark = pytest.mark.django_db

#: Every marker contains one of these: they occur in the original only.
MARKER_STEMS = ("Zorblatt", "marker-mail", "Qvillemark")
STATES = ["ready", "approved", "expired", "expired-by-date", "revoked"]
RELEASED = {"approved", "expired", "expired-by-date", "revoked"}
ENDED = {"expired", "expired-by-date", "revoked"}


def marked_csv(rows: int = 300) -> str:
    rng = random.Random(3)
    lines = ["name,email,city,age,sex,diagnosis,visits"]
    for i in range(rows):
        lines.append(
            f"Zorblatt Quixley{i:03d},qx{i}@marker-mail.example,Qvillemark{i % 100:02d},"
            f"{rng.randint(18, 90)},{rng.choice('FM')},{rng.choice(['flu', 'asthma', 'gout'])},"
            f"{rng.randint(1, 6)}"
        )
    return "\n".join(lines) + "\n"


CITY_HIERARCHY = "".join(f"Qvillemark{c:02d};Regionzone{c % 10};*\n" for c in range(100))


def attach_city_hierarchy(steward, dataset) -> None:
    city = dataset.columns.get(name="city")
    upload = SimpleUploadedFile("city.csv", CITY_HIERARCHY.encode(), content_type="text/csv")
    datasets.set_hierarchy_file(steward, dataset, city.pk, upload)


#: The marked dataset's roles (the API's matrix uses the same world).
MARKED_TAGGING = {
    "name": Role.IDENTIFIER,
    "email": Role.WITHHELD,
    "city": Role.QUASI_IDENTIFIER,
    "age": Role.QUASI_IDENTIFIER,
    "sex": Role.QUASI_IDENTIFIER,
    "diagnosis": Role.SENSITIVE,
    "visits": Role.INSENSITIVE,
}


@pytest.fixture(scope="module")
def marked(django_db_setup, django_db_blocker):
    with world_support.world(
        django_db_blocker,
        content=marked_csv(),
        tagging=MARKED_TAGGING,
        prepare=attach_city_hierarchy,
    ) as made:
        yield made


@pytest.fixture
def private_media_root(settings, marked):
    settings.MEDIA_ROOT = marked["media"]
    return settings.MEDIA_ROOT


def _set_state(release_request: ReleaseRequest, state: str, officer) -> ReleaseRequest:
    fields = {"expires_at": None}
    if state == "ready":
        fields["state"] = State.READY
    else:
        fields.update(state=State.APPROVED, decided_at=timezone.now())
    if state == "expired":
        fields.update(state=State.EXPIRED, expires_at=timezone.localdate() - datetime.timedelta(2))
    if state == "expired-by-date":
        fields["expires_at"] = timezone.localdate() - datetime.timedelta(1)
    if state == "revoked":
        fields.update(
            state=State.REVOKED,
            revoked_at=timezone.now(),
            revoked_by=officer,
            revocation_reason="Consent withdrawn by the data owner.",
        )
    ReleaseRequest.objects.filter(pk=release_request.pk).update(**fields)
    return ReleaseRequest.objects.get(pk=release_request.pk)


def _body(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


def _expected(person: str, state: str) -> dict[str, int]:
    """The status of each page and file for ``person`` when the release is in ``state``."""
    if person == "anonymous":
        return dict.fromkeys(PAGES, 302)
    sees_request = (
        person in ("officer", "requester")
        or person in ("named_recipient", "accepted_recipient")
        and state in RELEASED
    )
    out: dict[str, int] = {}
    for page in REQUEST_PAGES:
        out[page] = 200 if sees_request else 404
    if person in ("named_recipient", "accepted_recipient") and sees_request:
        # The review workspace (classes) is for officers and the requester only.
        out["classes"] = out["class_detail"] = 403
    for fmt in FILES:
        if not sees_request:
            out[fmt] = 404
        elif person == "officer":
            out[fmt] = 403  # officers review; they are not recipients
        elif state in ENDED:
            out[fmt] = 410
        elif state == "ready":
            out[fmt] = 409
        else:
            out[fmt] = 200  # after accepting the terms
    out["release_list"] = 403 if person == "officer" else 200
    out["home"] = 200
    steward_pages = ("dataset", "hierarchy")
    for page in steward_pages:
        out[page] = {"requester": 200, "other_steward": 404}.get(person, 403)
    return out


REQUEST_PAGES = ("detail", "status", "classes", "class_detail", "report", "report_json")
FILES = ("csv", "xlsx", "parquet")
PAGES = (*REQUEST_PAGES, *FILES, "release_list", "home", "dataset", "hierarchy")


def _urls(release_request: ReleaseRequest) -> dict[str, str]:
    pk = release_request.pk
    first_class = release_request.classes.order_by("id").first()
    city = release_request.dataset.columns.get(name="city")
    return {
        "detail": reverse("releases:request_detail", args=[pk]),
        "status": reverse("releases:request_status", args=[pk]),
        "classes": reverse("releases:request_classes", args=[pk]),
        "class_detail": reverse("releases:class_detail", args=[pk, first_class.pk]),
        "report": reverse("releases:report", args=[pk]),
        "report_json": reverse("releases:download_report", args=[pk]),
        **{fmt: reverse("releases:download_file", args=[pk, fmt]) for fmt in FILES},
        "release_list": reverse("releases:release_list"),
        "home": reverse("releases:home"),
        "dataset": reverse("releases:dataset_detail", args=[release_request.dataset_id]),
        "hierarchy": reverse(
            "releases:hierarchy_download", args=[release_request.dataset_id, city.pk]
        ),
    }


@pytest.mark.parametrize("person", world_support.PEOPLE)
@pytest.mark.parametrize("state", STATES)
def test_every_person_against_every_page_and_file(marked, state, person):
    people = marked["people"]
    release_request = _set_state(marked["request"], state, people["officer"])
    user = people[person]
    client = Client()
    if user.is_authenticated:
        client.force_login(user)
    urls = _urls(release_request)
    expected = _expected(person, state)
    receiver = person in ("requester", "named_recipient", "accepted_recipient")
    if receiver and expected["csv"] == 200 and person != "accepted_recipient":
        # Downloads wait for the terms of use.
        assert client.get(urls["csv"]).status_code == 409
        accepted = client.post(reverse("releases:accept_terms", args=[release_request.pk]))
        assert accepted.status_code == 302
    seen = {}
    for page, url in urls.items():
        headers = {"HTTP_HX_REQUEST": "true"} if page in ("status", "classes") else {}
        response = client.get(url, **headers)
        assert response.status_code == expected[page], (page, response.status_code)
        seen[page] = _body(response)
    if person in ("named_recipient", "accepted_recipient", "other_recipient"):
        # Nothing a recipient is served holds a value of the original only.
        for page, body in seen.items():
            if page in ("xlsx", "parquet"):
                continue  # compressed: read back below
            for stem in MARKER_STEMS:
                assert stem.encode() not in body, (page, stem)
        if expected["csv"] == 200:
            readers = (
                ("xlsx", lambda raw: pd.read_excel(raw, dtype=str)),
                ("parquet", pd.read_parquet),
            )
            for fmt, reader in readers:
                frame = reader(io.BytesIO(seen[fmt]))
                text = frame.to_csv(index=False)
                assert not any(stem in text for stem in MARKER_STEMS), fmt
                assert "Regionzone" in text  # the city leaves as its region
            for fmt in FILES:
                stored = release_request.files.get(format=fmt)
                assert storage.sha256_hex(seen[fmt]) == stored.sha256
    if person in ("officer", "requester"):
        # The reviewers' page does show the original (the scan above can find markers).
        assert any(stem.encode() in seen["detail"] for stem in MARKER_STEMS)
    if state in ENDED:
        for page in ("detail", "report"):
            if expected[page] == 200:
                assert b'id="release-banner"' in seen[page], page
                word = b"Revoked" if state == "revoked" else b"Expired"
                assert word in seen[page]


def test_a_recipients_report_holds_no_hierarchy_seed_or_figure_of_the_original(marked):
    people = marked["people"]
    release_request = _set_state(marked["request"], "approved", people["officer"])
    client = Client()
    client.force_login(people["accepted_recipient"])
    report = json.loads(
        _body(client.get(reverse("releases:download_report", args=[release_request.pk])))
    )
    text = str(report)
    assert report["audience"] == "recipient"
    for absent in ("reproduction", "unchanged", "checks", "reviews", "recipients"):
        assert absent not in report
    assert "before" not in report["risk"] and "metrics" not in report["utility"]
    assert str(release_request.shuffle_seed) not in text
    assert "Regionzone" not in text  # no hierarchy content either
    client.force_login(people["officer"])
    full = json.loads(
        _body(client.get(reverse("releases:download_report", args=[release_request.pk])))
    )
    assert full["reproduction"]["shuffle_seed"] == release_request.shuffle_seed
    assert "Qvillemark00;Regionzone0;*" in str(full["reproduction"]["configuration"])


def test_releases_list_only_what_names_the_recipient(marked):
    people = marked["people"]
    release_request = _set_state(marked["request"], "approved", people["officer"])
    link = reverse("releases:request_detail", args=[release_request.pk]).encode()
    for person, listed in (
        ("named_recipient", True),
        ("other_recipient", False),
        ("requester", True),
    ):
        client = Client()
        client.force_login(people[person])
        page = client.get(reverse("releases:release_list")).content
        assert (link in page) == listed, person
    # A group names its members.
    from django.contrib.auth.models import Group

    partners = Group.objects.create(name="Partner lab")
    people["other_recipient"].groups.add(partners)
    release_request.recipient_groups.add(partners)
    client = Client()
    client.force_login(people["other_recipient"])
    assert client.get(link.decode()).status_code == 200
    assert re.search(rb"Release #\d+", client.get(link.decode()).content)


def test_only_recipients_and_purpose_groups_can_be_named_and_expiry_is_not_past(
    steward, officer, recipient, client
):
    from django.contrib.auth.models import Group

    from releases.core import roles
    from releases.core.errors import InvalidInput
    from releases.requests.parameters import ReleaseParameters
    from releases.requests.services import Sharing, request_release
    from tests.support import factories
    from tests.support.workflow import tag

    dataset = factories.make_dataset(steward, world_support.people_csv(), "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    params = ReleaseParameters(k=5, suppression_limit=0.05)
    for sharing, message in (
        (Sharing(recipients=[officer]), "not a recipient"),
        (Sharing(recipient_groups=[Group.objects.get(name=roles.RECIPIENTS)]), "whole"),
        (Sharing(expires_at=timezone.localdate() - datetime.timedelta(1)), "expiry date"),
    ):
        with pytest.raises(InvalidInput, match=message):
            request_release(steward, dataset, params, sharing)
    assert not ReleaseRequest.objects.filter(dataset=dataset).exists()
    # The form offers recipients and purpose groups only.
    Group.objects.create(name="Partner lab")
    client.force_login(steward)
    page = client.get(reverse("releases:dataset_detail", args=[dataset.pk])).content.decode()
    sharing_fields = page.split('id="sharing"')[1].split("</fieldset>")[0]
    assert "Partner lab" in sharing_fields and "recipient" in sharing_fields
    assert "Privacy officers" not in sharing_fields and ">Recipients<" not in sharing_fields


def test_an_officer_names_recipients_and_the_expiry_date_when_approving(
    steward, officer, recipient, client
):
    from releases.models import AuditEvent
    from tests.support import factories
    from tests.support.workflow import request_release, run, tag

    dataset = factories.make_dataset(steward, world_support.people_csv(), "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    ready = run(request_release(steward, dataset))
    client.force_login(officer)
    until = timezone.localdate() + datetime.timedelta(days=30)
    response = client.post(
        reverse("releases:request_review", args=[ready.pk]),
        {"decision": "approve", "add_recipients": [recipient.pk], "expires_at": until.isoformat()},
    )
    assert response.status_code == 302
    ready.refresh_from_db()
    assert ready.state == State.APPROVED and ready.expires_at == until
    assert list(ready.recipients.all()) == [recipient]
    named = AuditEvent.objects.get(action=AuditEvent.Action.RECIPIENTS)
    assert named.actor == officer and named.detail["added_recipients"] == ["recipient"]
    client.force_login(recipient)
    page = client.get(reverse("releases:request_detail", args=[ready.pk])).content.decode()
    assert f"Available until {until:%Y-%m-%d}" in page
