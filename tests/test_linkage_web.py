"""The linkage attack before approval, on the web: an attacker file attached to a request, read
with the upload bounds, linked to the extract by a worker's job, shown beside the risk
estimates and in the report to officers and the requester only, and deleted with its request.
The steward's ready request is made once for the module (tests/support/world.py): each test
changes it inside its own transaction, rolled back, and works on its own copy of the files.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.datasets import services as datasets
from releases.models import AttackerFile, AuditEvent, OutboxMessage, ReleaseRequest, Role
from releases.requests import attacker, linkage
from releases.requests import rules as lifecycle
from releases.review import services as review
from tests.conftest import ADULT, hierarchy_upload
from tests.support import factories
from tests.support import world as world_support
from tests.support.workflow import approve, ready_release, request_release, run

pytestmark = pytest.mark.django_db

#: What the attacker knows of each person: the extract's quasi-identifiers but one, and
#: ``workclass``, which the extract releases unchanged.
KNOWN = ["age", "sex", "race", "native-country", "workclass"]
ADULT_QIS = ["age", "sex", "race", "native-country"]
K = 5


def _adult_rows(rows: int = 2000) -> pd.DataFrame:
    frame = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str, keep_default_na=False)
    return frame.head(rows)


def _csv(frame: pd.DataFrame, sep: str = ",") -> bytes:
    return frame.to_csv(index=False, sep=sep).encode("utf-8")


def _hierarchies(steward, dataset) -> None:
    for column in dataset.columns.filter(name__in=ADULT_QIS):
        datasets.set_hierarchy_file(steward, dataset, column.pk, hierarchy_upload(column.name))


shared_ready, steward, ready_request = world_support.module_ready_request()


@pytest.fixture
def adult_ready(steward):
    """2,000 Adult rows, k=5 with 5 % suppression on four quasi-identifiers with ARX's
    hierarchies; ``workclass`` released as it is (and so matched by equality)."""
    roles = {**dict.fromkeys(ADULT_QIS, Role.QUASI_IDENTIFIER), "workclass": Role.INSENSITIVE}
    content = _csv(_adult_rows(), sep=";")
    return ready_release(steward, content, roles, "adult.csv", prepare=_hierarchies, k=K)


def _voters(rows: int = 400, seed: int = 3) -> pd.DataFrame:
    """Identified records of people in the data: a name and what a voter list holds."""
    sample = _adult_rows().sample(rows, random_state=seed)[KNOWN].reset_index(drop=True)
    sample.insert(0, "name", [f"Voter {i:04d}" for i in range(rows)])
    return sample


def _attach(user, release_request, content: bytes, name: str = "voters.csv") -> AttackerFile:
    return attacker.attach_attacker_file(user, release_request.pk, factories.upload(content, name))


def _linked(user, release_request, frame: pd.DataFrame) -> AttackerFile:
    """Attach ``frame`` as CSV and run the queued linkage here (the worker's body)."""
    attached = _attach(user, release_request, _csv(frame))
    assert attached.state == AttackerFile.State.QUEUED
    assert OutboxMessage.objects.filter(task_name=attacker.LINK_TASK, args=[attached.pk]).exists()
    done = linkage.link_attacker_file(attached.pk)
    assert done is not None and done.state == AttackerFile.State.DONE, done and done.error
    return done


def _released(release_request) -> pd.DataFrame:
    """The round's extract as a recipient downloads it (its CSV)."""
    raw = storage.read_bytes(release_request.extract_path)
    return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)


def _independent_matches(voters: pd.DataFrame, extract: pd.DataFrame, levels: dict) -> pd.Series:
    """Per voter, the released records matching them on the shared columns: a quasi-identifier
    through ARX's hierarchy at the released level (or a suppressed "*"), workclass equal."""
    generalized = voters[KNOWN].copy()
    for q in ADULT_QIS:
        table = pd.read_csv(
            ADULT / f"adult_hierarchy_{q}.csv", sep=";", header=None, dtype=str
        ).fillna("")
        generalized[q] = generalized[q].map(dict(zip(table[0], table[levels[q]], strict=True)))
    # Every voter against every released record at once: a boolean matrix per column.
    match = np.ones((len(generalized), len(extract)), dtype=bool)
    for name in KNOWN:
        voter = generalized[name].to_numpy(dtype=str)[:, None]
        released = extract[name].to_numpy(dtype=str)[None, :]
        same = voter == released
        if name in ADULT_QIS:
            same |= released == "*"
        match &= same
    return pd.Series(match.sum(axis=1))


def _report(client, release_request) -> dict:
    response = client.get(reverse("releases:download_report", args=[release_request.pk]))
    assert response.status_code == 200
    return json.loads(b"".join(response.streaming_content))


def test_an_attacker_file_re_identifies_people_through_a_column_released_unchanged(
    adult_ready, officer, client
):
    voters = _voters()
    done = _linked(officer, adult_ready, voters)
    found = done.linkage
    assert done.linked_round == adult_ready.round

    # Independently: each voter against every released record, with pandas.
    extract = _released(adult_ready)
    matches = _independent_matches(voters, extract, adult_ready.summary["levels"])
    assert found["attacker_records"] == len(voters) == 400
    assert found["matched_columns"] == [c for c in extract.columns if c in KNOWN]
    assert found["matched_none"] == int((matches == 0).sum())
    assert found["matched_one"] == int((matches == 1).sum()) > 0
    assert found["matched_below_k"] == int(((matches > 0) & (matches < K)).sum())
    assert found["expected_reidentifications"] == pytest.approx(
        float((1 / matches[matches > 0]).sum())
    )
    # The same voters without workclass: fewer are singled out.
    without = _linked(officer, adult_ready, voters.drop(columns="workclass"))
    assert without.linkage["matched_one"] < found["matched_one"]
    assert "workclass" not in without.linkage["matched_columns"]

    # Put back, the page shows the figures beside the risk estimates, naming workclass.
    _linked(officer, adult_ready, voters)
    client.force_login(officer)
    page = client.get(adult_ready.get_absolute_url()).content.decode()
    risk = page[page.index('id="risk"') : page.index('id="metrics"')]
    assert 'id="risk-table"' in risk and 'id="linkage-table"' in risk
    assert (
        f'<tr data-linkage="matched_one"><td>matched by exactly one (re-identified)</td><td class="num">{found["matched_one"]}</td>'
        in risk
    )
    expected = f"{found['expected_reidentifications']:.2f}"
    assert f'<td class="num">{expected}</td>' in risk
    assert "Columns released unchanged helped: workclass" in risk
    # The report for officers carries the same figures.
    report = _report(client, adult_ready)
    assert report["linkage"]["matched_one"] == found["matched_one"]
    assert report["linkage"]["attacker_sha256"] == done.sha256
    printed = client.get(reverse("releases:report", args=[adult_ready.pk])).content.decode()
    assert 'id="report-linkage"' in printed
    assert f"{found['matched_one']} matched by exactly one released record" in printed
    events = AuditEvent.objects.filter(request=adult_ready, action=AuditEvent.Action.LINKED)
    assert events.count() == 3 and events.last().detail["matched_one"] == found["matched_one"]


def _nothing_stored(release_request) -> bool:
    return (
        not AttackerFile.objects.filter(request=release_request).exists()
        and storage.list_files(attacker.folder_of(release_request.pk)) == []
    )


@pytest.mark.parametrize(
    ("content", "name", "says"),
    [
        (b"", "voters.csv", "empty"),
        (b"\x00\x01\x02binary\x00" * 50, "voters.bin", ""),
        (b"name,age,sex\nVoter 1,39,Male\nVoter 2,50,Male,extra,cells\n", "voters.csv", "Line 3"),
        (b"name,age,sex\n", "voters.csv", "only a header"),
        (b"PAR1 not really parquet PAR1", "voters.parquet", ""),
    ],
    ids=["empty", "binary", "ragged", "header-only", "broken-parquet"],
)
def test_a_malformed_attacker_file_is_refused_and_leaves_nothing_behind(
    ready_request, officer, content, name, says
):
    with pytest.raises(InvalidInput) as refused:
        _attach(officer, ready_request, content, name)
    message = str(refused.value)
    assert message.startswith("The attacker file was refused: ")
    assert says in message
    assert _nothing_stored(ready_request)
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.ATTACKER_FILE).exists()


def test_an_attacker_file_is_read_within_the_upload_bounds(ready_request, officer, settings):
    voters = _csv(_voters(50))
    settings.MAX_UPLOAD_BYTES = len(voters) - 1
    with pytest.raises(InvalidInput, match="MAX_UPLOAD_BYTES"):
        _attach(officer, ready_request, voters)
    settings.MAX_UPLOAD_BYTES = 10 * len(voters)
    settings.MAX_ROWS = 49
    with pytest.raises(InvalidInput, match="MAX_ROWS"):
        _attach(officer, ready_request, voters)
    settings.MAX_ROWS = 50
    settings.MAX_COLUMNS = 5
    with pytest.raises(InvalidInput, match="MAX_COLUMNS"):
        _attach(officer, ready_request, voters)
    assert _nothing_stored(ready_request)
    settings.MAX_COLUMNS = 6
    attached = _attach(officer, ready_request, voters)
    assert (attached.rows, attached.columns) == (50, ["name", *KNOWN])
    assert storage.sha256_of(attached.path) == attached.sha256


def test_the_page_refuses_an_oversized_upload_before_reading_it(
    ready_request, steward, client, settings
):
    settings.MAX_UPLOAD_BYTES = 1000
    client.force_login(steward)
    url = reverse("releases:attach_attacker_file", args=[ready_request.pk])
    big = factories.upload(_csv(_voters(200)), "voters.csv")
    response = client.post(url, {"attacker_file": big}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "The attacker file was refused: The file is larger than" in response.content.decode()
    assert _nothing_stored(ready_request)


def test_the_steward_attaches_through_the_page_and_the_card_polls_until_linked(
    ready_request, steward, client
):
    client.force_login(steward)
    page = client.get(ready_request.get_absolute_url()).content.decode()
    assert 'id="attacker-form"' in page and 'id="no-attacker-file"' in page
    url = reverse("releases:attach_attacker_file", args=[ready_request.pk])
    people = factories.synthetic_csv(40, seed=2)  # name, age, zip, sex, diagnosis
    # htmx: the card comes back, polling while the worker has not linked the file.
    card = client.post(
        url,
        {"attacker_file": factories.upload(people, "register.csv")},
        headers={"HX-Request": "true"},
    ).content.decode()
    attached = AttackerFile.objects.get(request=ready_request)
    assert attached.uploaded_by == steward and attached.rows == 40
    assert 'id="linkage"' in card and "register.csv" in card
    assert reverse("releases:linkage_status", args=[ready_request.pk]) in card
    assert 'id="linkage-progress"' in card
    linkage.link_attacker_file(attached.pk)
    polled = client.get(reverse("releases:linkage_status", args=[ready_request.pk]))
    text = polled.content.decode()
    assert 'id="linkage-table"' in text and "hx-trigger" not in text
    # Linked on the columns the two share: age and sex generalized, diagnosis unchanged.
    done = AttackerFile.objects.get(pk=attached.pk)
    assert done.linkage["matched_columns"] == ["age", "sex", "diagnosis"]
    assert done.linkage["attacker_records"] == 40
    assert "Columns released unchanged helped: diagnosis" in text
    # A plain form post replaces the file and goes back to the page.
    response = client.post(url, {"attacker_file": factories.upload(people, "second.csv")})
    assert response.status_code == 302 and response["Location"].endswith("#linkage")
    replaced = AttackerFile.objects.get(request=ready_request)
    assert replaced.name == "second.csv" and replaced.state == AttackerFile.State.QUEUED
    assert not storage.exists(attached.path) and storage.exists(replaced.path)
    assert storage.list_files(attacker.folder_of(ready_request.pk)) == [replaced.path]
    # Without a file the post says what is missing.
    response = client.post(url, {}, headers={"HX-Request": "true"})
    assert "Choose the attacker file" in response.content.decode()


def test_a_file_shared_with_no_column_fails_its_linkage_with_the_reason(ready_request, officer):
    attached = _attach(officer, ready_request, b"name,postcode\nA,1\nB,2\n")
    failed = linkage.link_attacker_file(attached.pk)
    assert failed.state == AttackerFile.State.FAILED
    assert failed.error == "The attacker file shares no column with the extract."
    assert attacker.current_linkage(ready_request) is None


def test_a_file_attached_before_the_run_is_linked_once_the_extract_is_written(steward, officer):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    from tests.support.workflow import tag

    tag(
        steward,
        dataset,
        {
            "name": Role.IDENTIFIER,
            "age": Role.QUASI_IDENTIFIER,
            "sex": Role.QUASI_IDENTIFIER,
            "diagnosis": Role.SENSITIVE,
        },
    )
    queued = request_release(steward, dataset)
    attached = _attach(officer, queued, factories.synthetic_csv(30, seed=4).encode())
    assert attached.state == AttackerFile.State.WAITING
    assert not OutboxMessage.objects.filter(task_name=attacker.LINK_TASK).exists()
    ready = run(queued)
    waiting = AttackerFile.objects.get(pk=attached.pk)
    assert waiting.state == AttackerFile.State.QUEUED
    assert OutboxMessage.objects.filter(task_name=attacker.LINK_TASK, args=[attached.pk]).exists()
    done = linkage.link_attacker_file(attached.pk)
    assert done.state == AttackerFile.State.DONE and done.linked_round == ready.round == 1
    assert attacker.current_linkage(ready)["attacker_records"] == 30


def test_who_may_attach_an_attacker_file(ready_request, steward, officer, other_steward, recipient):
    assert lifecycle.can_attach_attacker_file(steward, ready_request)
    assert lifecycle.can_attach_attacker_file(officer, ready_request)
    assert not lifecycle.can_attach_attacker_file(other_steward, ready_request)
    assert not lifecycle.can_attach_attacker_file(recipient, ready_request)
    approved = approve(officer, ready_request, recipient)
    assert not lifecycle.can_attach_attacker_file(officer, approved)
    with pytest.raises(InvalidInput, match="before the decision"):
        lifecycle.check_attach_attacker_file(officer, approved)


def test_recipients_and_other_stewards_never_see_the_attacker_file_or_its_linkage(
    ready_request, officer, recipient, other_steward, client
):
    done = _linked(officer, ready_request, _voters_of_synthetic())
    figures = done.linkage
    approve(officer, ready_request, recipient)
    attach_url = reverse("releases:attach_attacker_file", args=[ready_request.pk])
    status_url = reverse("releases:linkage_status", args=[ready_request.pk])
    upload = factories.upload(_csv(_voters_of_synthetic()), "mine.csv")

    client.force_login(recipient)
    page = client.get(ready_request.get_absolute_url())
    assert page.status_code == 200
    text = page.content.decode()
    for hidden in ("voters.csv", done.sha256, "Linkage attack", "linkage-table", "attacker file"):
        assert hidden not in text
    assert client.get(status_url).status_code in (403, 404)
    assert client.post(attach_url, {"attacker_file": upload}).status_code in (403, 404)
    report = _report(client, ready_request)
    assert "linkage" not in report and done.sha256 not in json.dumps(report)
    printed = client.get(reverse("releases:report", args=[ready_request.pk])).content.decode()
    assert "report-linkage" not in printed and done.sha256 not in printed
    with pytest.raises(Exception) as refused:
        attacker.linkage_for(recipient, ready_request.pk)
    assert type(refused.value).__name__ in ("PermissionDenied", "Http404")

    client.force_login(other_steward)
    assert client.get(ready_request.get_absolute_url()).status_code == 404
    assert client.get(status_url).status_code == 404
    upload.seek(0)
    assert client.post(attach_url, {"attacker_file": upload}).status_code == 404
    # Nothing they did changed the file or its figures.
    assert AttackerFile.objects.get(request=ready_request).linkage == figures

    client.force_login(officer)
    assert _report(client, ready_request)["linkage"]["matched_one"] == figures["matched_one"]


def _voters_of_synthetic() -> pd.DataFrame:
    """People of ``synthetic_csv`` known by name, age and sex."""
    people = pd.read_csv(io.StringIO(factories.synthetic_csv()), dtype=str)
    return people[["name", "age", "sex"]].head(60)


def test_the_attacker_file_is_deleted_with_its_request(ready_request, steward, officer):
    done = _linked(officer, ready_request, _voters_of_synthetic())
    assert storage.exists(done.path)
    review.review(officer, ready_request.pk, "changes", "Generalize age further.")
    datasets.delete_dataset(steward, ready_request.dataset)
    assert not ReleaseRequest.objects.filter(pk=ready_request.pk).exists()
    assert not AttackerFile.objects.exists()
    assert not storage.exists(done.path)
    assert storage.list_files(attacker.folder_of(ready_request.pk)) == []


def test_a_linkage_whose_worker_died_is_retried_then_fails_with_a_reason(
    ready_request, officer, settings
):
    from datetime import timedelta

    from django.utils import timezone

    from releases.background import recovery

    settings.WORK_MAX_ATTEMPTS = 2
    attached = _attach(officer, ready_request, _csv(_voters_of_synthetic()))
    silent = timezone.now() - timedelta(minutes=5)
    lost = {"state": AttackerFile.State.RUNNING, "worker": "gone:1", "heartbeat_at": silent}
    AttackerFile.objects.filter(pk=attached.pk).update(attempts=1, **lost)
    assert recovery.sweep()["linkages"] == {"retried": 1, "failed": 0}
    retried = AttackerFile.objects.get(pk=attached.pk)
    assert retried.state == AttackerFile.State.QUEUED
    assert (
        OutboxMessage.objects.filter(task_name=attacker.LINK_TASK, args=[attached.pk]).count() == 2
    )
    AttackerFile.objects.filter(pk=attached.pk).update(attempts=2, **lost)
    assert recovery.sweep()["linkages"] == {"retried": 0, "failed": 1}
    failed = AttackerFile.objects.get(pk=attached.pk)
    assert failed.state == AttackerFile.State.FAILED
    assert "stopped before it finished, 2 times" in failed.error
    # Attached again, it is linked.
    again = _attach(officer, ready_request, _csv(_voters_of_synthetic()))
    assert linkage.link_attacker_file(again.pk).state == AttackerFile.State.DONE


def test_a_file_replaced_while_it_is_linked_keeps_nothing_of_the_old_linkage(
    ready_request, officer, monkeypatch
):
    first = _attach(officer, ready_request, _csv(_voters_of_synthetic()))
    real_link = linkage.link_round
    replaced = {}

    def replaced_meanwhile(attacker_file, release_request):
        replaced["by"] = _attach(officer, ready_request, _csv(_voters_of_synthetic().head(10)))
        return real_link(attacker_file, release_request)

    monkeypatch.setattr(linkage, "link_round", replaced_meanwhile)
    assert linkage.link_attacker_file(first.pk) is None  # its row went with the old file
    monkeypatch.setattr(linkage, "link_round", real_link)
    current = AttackerFile.objects.get(request=ready_request)
    assert current.pk == replaced["by"].pk and current.state == AttackerFile.State.QUEUED
    assert not current.linkage and not storage.exists(first.path)
    assert linkage.link_attacker_file(current.pk).linkage["attacker_records"] == 10
