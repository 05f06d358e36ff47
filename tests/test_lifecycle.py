"""The request's lifecycle: the transition table itself, and for every person x action x state
that the page's button, ``can_<action>`` and the service agree."""

from __future__ import annotations

import datetime
import re

import pytest
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from releases.core.errors import InvalidInput
from releases.models import AuditEvent, ReleaseFile, ReleaseRequest, Role
from releases.requests import attacker, downloads, reproduction, selectors
from releases.requests import rules as lifecycle
from releases.requests import run as release_run
from releases.requests import services as release
from releases.requests import services as sharing
from releases.requests.parameters import ReleaseParameters
from releases.review import services as review
from tests.support import factories
from tests.support import world as world_support
from tests.support.workflow import request_release, tag

State = ReleaseRequest.State
pytestmark = pytest.mark.django_db

# --- The table ---------------------------------------------------------------------------------

#: The lifecycle as the issue and the design describe it: (state, action) -> (next state, who).
SPECIFIED = {
    (State.QUEUED, "start_run"): (State.RUNNING, lifecycle.SYSTEM),
    (State.RUNNING, "finish_run"): (State.READY, lifecycle.SYSTEM),
    (State.RUNNING, "fail_run"): (State.FAILED, lifecycle.SYSTEM),
    (State.RUNNING, "retry_run"): (State.QUEUED, lifecycle.SYSTEM),
    (State.QUEUED, "cancel"): (State.CANCELLED, lifecycle.REQUESTER_OR_OFFICER),
    (State.RUNNING, "cancel"): (State.CANCELLED, lifecycle.REQUESTER_OR_OFFICER),
    (State.READY, "approve"): (State.APPROVED, lifecycle.REVIEWER),
    (State.READY, "request_changes"): (State.CHANGES_REQUESTED, lifecycle.REVIEWER),
    (State.READY, "reject"): (State.REJECTED, lifecycle.REVIEWER),
    (State.CHANGES_REQUESTED, "resubmit"): (State.QUEUED, lifecycle.REQUESTER),
    (State.FAILED, "resubmit"): (State.QUEUED, lifecycle.REQUESTER),
    (State.CANCELLED, "resubmit"): (State.QUEUED, lifecycle.REQUESTER),
    # The requester re-runs a result with one of its candidates' levels instead of the optimum.
    (State.READY, "rerun"): (State.QUEUED, lifecycle.REQUESTER),
    (State.CHANGES_REQUESTED, "rerun"): (State.QUEUED, lifecycle.REQUESTER),
    (State.APPROVED, "revoke"): (State.REVOKED, lifecycle.OFFICER),
    (State.APPROVED, "expire"): (State.EXPIRED, lifecycle.SYSTEM),
    (State.APPROVED, "accept_terms"): (None, lifecycle.RECEIVER),
    (State.APPROVED, "download"): (None, lifecycle.RECEIVER),
    (State.READY, "reproduce"): (None, lifecycle.OFFICER),
    (State.APPROVED, "reproduce"): (None, lifecycle.OFFICER),
    # An attacker file is linked to the extract before the decision.
    **{
        (state, "attach_attacker_file"): (None, lifecycle.REQUESTER_OR_OFFICER)
        for state in (
            State.QUEUED,
            State.RUNNING,
            State.READY,
            State.CHANGES_REQUESTED,
            State.FAILED,
        )
    },
}


def test_the_transition_table_is_the_specified_lifecycle():
    table = {key: (t.target, t.who) for key, t in lifecycle.TRANSITIONS.items()}
    assert table == SPECIFIED
    # Every action has its metadata, and every state a label.
    assert {action for _, action in lifecycle.TRANSITIONS} == set(lifecycle.ACTIONS)
    for (state, _), transition in lifecycle.TRANSITIONS.items():
        assert state in State.values
        assert transition.target is None or transition.target in State.values


def test_rejected_revoked_and_expired_are_final_and_every_state_is_reachable():
    leaving = {state for state, _ in lifecycle.TRANSITIONS}
    assert leaving.isdisjoint({State.REJECTED, State.REVOKED, State.EXPIRED})
    reached = {State.QUEUED} | {t.target for t in lifecycle.TRANSITIONS.values() if t.target}
    assert reached == set(State.values)


def test_a_page_shows_an_action_only_in_states_where_it_can_happen_or_explain_why_not():
    for name in lifecycle.PERSON_ACTIONS:
        sources = set(lifecycle.sources(name))
        assert sources <= lifecycle.ACTIONS[name].shown_in, name


# --- Every person x action x state: the page's button, can_<action> and the service agree -----

#: The states a request can be in, and an approval whose expiry date has passed.
STATES = [*State.values, "approved-past-expiry"]


def _set_state(release_request: ReleaseRequest, state: str) -> ReleaseRequest:
    fields = {"state": state, "expires_at": None, "revoked_at": None, "revoked_by": None}
    if state == "approved-past-expiry":
        fields.update(state=State.APPROVED, expires_at=timezone.localdate() - datetime.timedelta(1))
    if state in (State.APPROVED, State.REVOKED, State.EXPIRED, "approved-past-expiry"):
        fields["decided_at"] = timezone.now()
    if state == State.REVOKED:
        fields.update(revoked_at=timezone.now(), revocation_reason="A test revocation.")
    ReleaseRequest.objects.filter(pk=release_request.pk).update(**fields)
    return ReleaseRequest.objects.get(pk=release_request.pk)


def _other_candidate(request_id: int) -> dict:
    """Levels of a candidate the request's result does not apply."""
    summary = ReleaseRequest.objects.get(pk=request_id).summary or {}
    others = [c for c in summary.get("candidates") or [] if c["levels"] != summary["levels"]]
    return others[0]["levels"] if others else {"age": 0, "sex": 0}


def _service(action: str, user, request_id: int):
    params = ReleaseParameters(k=5, suppression_limit=0.05)
    return {
        "rerun": lambda: release.rerun_with_levels(user, request_id, _other_candidate(request_id)),
        "cancel": lambda: release.cancel(user, request_id),
        "approve": lambda: review.review(user, request_id, "approve"),
        "request_changes": lambda: review.review(user, request_id, "changes", "Coarser."),
        "reject": lambda: review.review(user, request_id, "reject", "No."),
        "resubmit": lambda: release.resubmit(user, request_id, params, "Done."),
        "revoke": lambda: sharing.revoke(user, request_id, "A reason."),
        "accept_terms": lambda: sharing.accept_terms(user, request_id),
        "download": lambda: downloads.open_download(user, request_id, "csv"),
        "reproduce": lambda: reproduction.request_reproduction(user, request_id),
        "attach_attacker_file": lambda: attacker.attach_attacker_file(
            user, request_id, factories.upload(world_support.people_csv(20), "voters.csv")
        ),
    }[action]


REFUSALS = (PermissionDenied, Http404, InvalidInput, downloads.DownloadUnavailable)


def _service_allows(action: str, user, request_id: int) -> bool:
    """Call the service in a savepoint that is rolled back: did it do the action?"""
    with transaction.atomic():
        try:
            _service(action, user, request_id)()
        except REFUSALS:
            allowed = False
        else:
            allowed = True
        transaction.set_rollback(True)
    return allowed


def _buttons_on(html: str) -> dict[str, bool]:
    """{action: enabled} for every element of the page that carries a data-action."""
    found: dict[str, bool] = {}
    for tag_html in re.findall(r"<(?:button|a)\b[^>]*data-action=\"[a-z_]+\"[^>]*>", html):
        action = re.search(r'data-action="([a-z_]+)"', tag_html).group(1)
        enabled = not re.search(r"\sdisabled[\s>=]", tag_html)
        found[action] = found.get(action, False) or enabled
    return found


@pytest.fixture(scope="module")
def lifecycle_world(django_db_setup, django_db_blocker):
    with world_support.world(django_db_blocker) as made:
        made["pages"] = {}
        yield made


@pytest.fixture
def private_media_root(settings, lifecycle_world):
    """The module's request keeps its files in the module's folder."""
    settings.MEDIA_ROOT = lifecycle_world["media"]
    return settings.MEDIA_ROOT


def _page(lifecycle_world, state: str, person: str) -> str:
    """The request's page as ``person`` sees it in ``state`` (rendered once, then kept: every
    test starts from the same rolled-back data)."""
    key = (state, person)
    if key not in lifecycle_world["pages"]:
        client = Client()
        user = lifecycle_world["people"][person]
        if user.is_authenticated:
            client.force_login(user)
        response = client.get(
            reverse("releases:request_detail", args=[lifecycle_world["request"].pk])
        )
        assert response.status_code in (200, 302, 404), response.status_code
        lifecycle_world["pages"][key] = (
            response.content.decode() if response.status_code == 200 else ""
        )
    return lifecycle_world["pages"][key]


@pytest.mark.parametrize("action", lifecycle.PERSON_ACTIONS)
@pytest.mark.parametrize("person", world_support.PEOPLE)
@pytest.mark.parametrize("state", STATES)
def test_the_button_can_and_the_service_agree(lifecycle_world, state, person, action):
    release_request = _set_state(lifecycle_world["request"], state)
    user = lifecycle_world["people"][person]
    allowed = getattr(lifecycle, f"can_{action}")(user, release_request)
    page = _page(lifecycle_world, state, person)
    buttons = _buttons_on(page)
    assert buttons.get(action, False) == allowed, f"page shows {buttons}"
    if action in buttons and not buttons[action]:
        # A disabled button says why.
        assert f'data-reason-for="{action}"' in page
    assert _service_allows(action, user, release_request.pk) == allowed
    # check_<action> raises exactly when can_<action> is false.
    check = getattr(lifecycle, f"check_{action}")
    if allowed:
        check(user, release_request)
    else:
        with pytest.raises(REFUSALS):
            check(user, release_request)


@pytest.mark.parametrize("state", STATES)
def test_the_visible_requests_query_agrees_with_can_view(lifecycle_world, state):
    release_request = _set_state(lifecycle_world["request"], state)
    for person, user in lifecycle_world["people"].items():
        listed = selectors.visible_requests(user).filter(pk=release_request.pk).exists()
        assert listed == lifecycle.can_view(user, release_request), person


# --- Running, cancelling and expiring -----------------------------------------------------------


def test_the_workers_steps_are_the_systems_alone(lifecycle_world):
    release_request = _set_state(lifecycle_world["request"], State.QUEUED)
    assert lifecycle.can_start_run(None, release_request)
    with pytest.raises(PermissionDenied, match="Only the worker"):
        lifecycle.check_start_run(lifecycle_world["people"]["officer"], release_request)
    release_request = _set_state(release_request, State.RUNNING)
    assert lifecycle.can_finish_run(None, release_request)
    assert lifecycle.can_fail_run(None, release_request)
    assert lifecycle.can_retry_run(None, release_request)
    with pytest.raises(PermissionDenied, match="Only the worker"):
        lifecycle.check_retry_run(lifecycle_world["people"]["requester"], release_request)
    with pytest.raises(InvalidInput, match="only a queued request"):
        lifecycle.check_start_run(None, release_request)
    release_request = _set_state(release_request, State.QUEUED)
    with pytest.raises(InvalidInput, match="only a running request can be retried"):
        lifecycle.check_retry_run(None, release_request)


def test_an_expiry_date_stops_downloads_at_once_and_its_state_is_written_later(lifecycle_world):
    people = lifecycle_world["people"]
    release_request = _set_state(lifecycle_world["request"], "approved-past-expiry")
    recipient = people["accepted_recipient"]
    assert release_request.state == State.APPROVED
    assert release_request.effective_state == State.EXPIRED
    with pytest.raises(downloads.DownloadUnavailable) as refused:
        downloads.open_download(recipient, release_request.pk, "csv")
    assert refused.value.status == 410
    # The refused download wrote the expired state it was read as, and both are audited.
    release_request.refresh_from_db()
    assert release_request.state == State.EXPIRED
    actions = list(
        AuditEvent.objects.filter(request=release_request).values_list("action", flat=True)
    )
    assert AuditEvent.Action.EXPIRE in actions and AuditEvent.Action.DOWNLOAD_REFUSED in actions
    assert sharing.expire_due() == 0  # nothing left to expire


def test_expire_due_expires_only_approvals_past_their_date(lifecycle_world):
    release_request = _set_state(lifecycle_world["request"], State.APPROVED)
    ReleaseRequest.objects.filter(pk=release_request.pk).update(expires_at=timezone.localdate())
    assert sharing.expire_due() == 0  # the last day is still a day of the release
    ReleaseRequest.objects.filter(pk=release_request.pk).update(
        expires_at=timezone.localdate() - datetime.timedelta(days=1)
    )
    assert sharing.expire_due() == 1
    release_request.refresh_from_db()
    assert release_request.state == State.EXPIRED
    event = AuditEvent.objects.get(action=AuditEvent.Action.EXPIRE)
    assert event.actor is None and event.request_id == release_request.pk


def test_revocation_needs_a_reason_and_stops_downloads(lifecycle_world):
    people = lifecycle_world["people"]
    release_request = _set_state(lifecycle_world["request"], State.APPROVED)
    recipient = people["accepted_recipient"]
    assert downloads.open_download(recipient, release_request.pk, "csv").sha256
    with pytest.raises(InvalidInput, match="reason"):
        sharing.revoke(people["officer"], release_request.pk, " ")
    sharing.revoke(people["officer"], release_request.pk, "Consent withdrawn.")
    release_request.refresh_from_db()
    assert (release_request.state, release_request.revoked_by) == (State.REVOKED, people["officer"])
    with pytest.raises(downloads.DownloadUnavailable, match="revoked") as refused:
        downloads.open_download(recipient, release_request.pk, "csv")
    assert refused.value.status == 410
    revoke = AuditEvent.objects.get(action=AuditEvent.Action.REVOKE)
    assert revoke.detail["reason"] == "Consent withdrawn."


def test_a_running_request_cancelled_stops_at_its_next_progress_report(steward, monkeypatch):
    dataset = factories.make_dataset(steward, world_support.people_csv(), "people.csv")
    tag(steward, dataset, {"age": Role.QUASI_IDENTIFIER, "sex": Role.QUASI_IDENTIFIER})
    release_request = request_release(steward, dataset)
    # The run searches with the rows in memory or batch by batch (requests.streamed).
    real_build, real_streamed = release_run.build_release, release_run.build_streamed

    def cancelled_while_searching(real):
        def searching(*args, **kwargs):
            release.cancel(steward, release_request.pk, "Wrong file.")
            return real(*args, **kwargs)

        return searching

    monkeypatch.setattr(release_run, "build_release", cancelled_while_searching(real_build))
    monkeypatch.setattr(release_run, "build_streamed", cancelled_while_searching(real_streamed))
    release_run.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == State.CANCELLED
    assert not release_request.summary and not release_request.package_sha256
    assert not ReleaseFile.objects.filter(request=release_request).exists()
    actions = list(
        AuditEvent.objects.filter(request=release_request).values_list("action", flat=True)
    )
    assert actions[-3:] == [
        AuditEvent.Action.RUN_START,
        AuditEvent.Action.CANCEL,
        AuditEvent.Action.RUN_CANCELLED,
    ]
    # A cancelled request can be resubmitted; a queued one cancelled never runs.
    release.resubmit(
        steward, release_request.pk, ReleaseParameters(k=5, suppression_limit=0.05), "Again."
    )
    release.cancel(steward, release_request.pk)
    monkeypatch.setattr(release_run, "build_release", real_build)
    monkeypatch.setattr(release_run, "build_streamed", real_streamed)
    release_run.run_release(release_request.pk)
    release_request.refresh_from_db()
    assert release_request.state == State.CANCELLED and release_request.round == 2


#: Who may do what, state by state: everything else is refused.
ALLOWED = {
    (State.QUEUED, "requester", "cancel"),
    (State.QUEUED, "officer", "cancel"),
    (State.RUNNING, "requester", "cancel"),
    (State.RUNNING, "officer", "cancel"),
    (State.READY, "officer", "approve"),
    (State.READY, "officer", "request_changes"),
    (State.READY, "officer", "reject"),
    (State.READY, "officer", "reproduce"),
    (State.CHANGES_REQUESTED, "requester", "resubmit"),
    (State.FAILED, "requester", "resubmit"),
    (State.CANCELLED, "requester", "resubmit"),
    (State.READY, "requester", "rerun"),
    (State.CHANGES_REQUESTED, "requester", "rerun"),
    (State.APPROVED, "officer", "revoke"),
    (State.APPROVED, "officer", "reproduce"),
    (State.APPROVED, "requester", "accept_terms"),
    (State.APPROVED, "named_recipient", "accept_terms"),
    (State.APPROVED, "accepted_recipient", "download"),
    *(
        (state, person, "attach_attacker_file")
        for state in (
            State.QUEUED,
            State.RUNNING,
            State.READY,
            State.CHANGES_REQUESTED,
            State.FAILED,
        )
        for person in ("requester", "officer")
    ),
}


def test_who_may_do_what_in_each_state(lifecycle_world):
    allowed = set()
    for state in STATES:
        release_request = _set_state(lifecycle_world["request"], state)
        for person, user in lifecycle_world["people"].items():
            for action in lifecycle.PERSON_ACTIONS:
                if getattr(lifecycle, f"can_{action}")(user, release_request):
                    allowed.add((state, person, action))
    assert allowed == ALLOWED
