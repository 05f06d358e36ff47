"""Once the lease of running work has lapsed (its worker died), its page says so and when the
sweeper will have retried it, instead of the dead worker's last progress; reading it changes
nothing (the sweeper does the retrying)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from releases.background import leases, recovery
from releases.models import AttackerFile, Dataset, ReleaseRequest, Reproduction
from tests.support import factories
from tests.support.workflow import request_release

pytestmark = pytest.mark.django_db

STOPPED = re.compile(r"The worker stopped; it will be retried by (\d\d:\d\d) \(UTC\)")
LAST = re.compile(
    r"The worker stopped; that was its last attempt, so it will be marked failed by (\d\d:\d\d)"
)


def hhmm_bounds(low, high) -> set[str]:
    """Every HH:MM from ``low`` rounded up to ``high`` rounded up."""

    def up(t):
        r = t.replace(second=0, microsecond=0)
        return r + timedelta(minutes=1) if r < t else r

    out, t = set(), up(timezone.localtime(low))
    while t <= up(timezone.localtime(high)):
        out.add(t.strftime("%H:%M"))
        t += timedelta(minutes=1)
    return out


def silent_since(model, pk, seconds: float, attempts: int = 1, **fields) -> None:
    model.objects.filter(pk=pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=seconds),
        attempts=attempts,
        worker="host:999999",
        **fields,
    )


@pytest.fixture
def running_request(steward, ready_request, settings):
    settings.LEASE_SECONDS = 60
    settings.SWEEP_SECONDS = 30
    release_request = request_release(steward, ready_request.dataset)
    ReleaseRequest.objects.filter(pk=release_request.pk).update(
        state=ReleaseRequest.State.RUNNING, progress=0.42, stage="Searching the lattice"
    )
    return release_request


def status(client, user, release_request) -> str:
    client.force_login(user)
    response = client.get(
        reverse("releases:request_status", args=[release_request.pk]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    return response.content.decode()


def test_a_live_run_shows_its_progress(client, steward, running_request):
    silent_since(ReleaseRequest, running_request.pk, 5)
    page = status(client, steward, running_request)
    assert "42% · Searching the lattice" in page
    assert "The worker stopped" not in page


def test_a_run_whose_lease_lapsed_says_when_it_will_be_retried(client, steward, running_request):
    # Lapsed 10 s ago: the next sweep comes within SWEEP_SECONDS of the lapse.
    silent_since(ReleaseRequest, running_request.pk, 70)
    lapsed = timezone.now() - timedelta(seconds=10)
    page = status(client, steward, running_request)
    found = STOPPED.search(page)
    assert found, page
    assert found.group(1) in hhmm_bounds(
        lapsed + timedelta(seconds=30), timezone.now() + timedelta(seconds=30)
    )
    assert "Searching the lattice" not in page and "42%" not in page
    # The page only read: the row is as it was, for the sweeper to retry.
    row = ReleaseRequest.objects.get(pk=running_request.pk)
    assert (row.state, row.attempts) == ("running", 1)
    # And the sweeper does retry it.
    recovery.sweep()
    assert ReleaseRequest.objects.get(pk=running_request.pk).state == "queued"


def test_a_late_sweep_moves_the_time_forward_never_into_the_past(client, steward, running_request):
    silent_since(ReleaseRequest, running_request.pk, 3600)
    before = timezone.now()
    found = STOPPED.search(status(client, steward, running_request))
    assert found
    assert found.group(1) in hhmm_bounds(
        before + timedelta(seconds=30), timezone.now() + timedelta(seconds=30)
    )


def test_on_its_last_attempt_the_run_will_be_failed_not_retried(
    client, steward, running_request, settings
):
    silent_since(ReleaseRequest, running_request.pk, 70, attempts=leases.max_attempts())
    assert LAST.search(status(client, steward, running_request))
    recovery.sweep()
    assert ReleaseRequest.objects.get(pk=running_request.pk).state == "failed"


def test_the_request_page_says_it_too(client, steward, running_request):
    silent_since(ReleaseRequest, running_request.pk, 70)
    client.force_login(steward)
    page = client.get(running_request.get_absolute_url()).content.decode()
    assert STOPPED.search(page)


def test_a_profiling_whose_lease_lapsed_says_it(client, steward, settings):
    settings.LEASE_SECONDS = 60
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "lost.csv")
    Dataset.objects.filter(pk=dataset.pk).update(
        status=Dataset.Status.PROFILING, progress=0.30, stage="Reading rows"
    )
    silent_since(Dataset, dataset.pk, 70)
    client.force_login(steward)
    fragment = client.get(reverse("releases:dataset_status", args=[dataset.pk])).content.decode()
    assert STOPPED.search(fragment)
    assert "Reading rows" not in fragment
    page = client.get(reverse("releases:dataset_detail", args=[dataset.pk])).content.decode()
    assert STOPPED.search(page)
    silent_since(Dataset, dataset.pk, 5)
    fragment = client.get(reverse("releases:dataset_status", args=[dataset.pk])).content.decode()
    assert "Reading rows" in fragment and "The worker stopped" not in fragment


def test_a_linkage_and_a_reproduction_whose_lease_lapsed_say_it(
    client, steward, officer, ready_request, settings
):
    settings.LEASE_SECONDS = 60
    attacker = AttackerFile.objects.create(
        request=ready_request,
        uploaded_by=steward,
        name="voters.csv",
        path="attacker/x.csv",
        sha256="0" * 64,
        size_bytes=1,
        file_format="csv",
        rows=1,
        columns=["age"],
        state=AttackerFile.State.RUNNING,
        stage="Linking rows",
    )
    silent_since(AttackerFile, attacker.pk, 70)
    client.force_login(steward)
    card = client.get(reverse("releases:linkage_status", args=[ready_request.pk])).content.decode()
    assert STOPPED.search(card), card
    assert "Linking rows" not in card
    reproduction = Reproduction.objects.create(
        request=ready_request,
        round=ready_request.round,
        requested_by=officer,
        state=Reproduction.State.RUNNING,
    )
    silent_since(Reproduction, reproduction.pk, 70, attempts=leases.max_attempts())
    client.force_login(officer)
    page = client.get(ready_request.get_absolute_url()).content.decode()
    assert 'id="reproduction-worker-stopped"' in page
    assert LAST.search(page)
