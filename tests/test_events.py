"""Events of a request's state changes: who is told, which webhooks fire, preferences,
digests, and who sees whose notifications and webhooks (pages, fragments and the API)."""

from __future__ import annotations

import datetime
import json

import pytest
from django.urls import reverse
from django.utils import timezone

from releases.background import outbox
from releases.core import roles
from releases.core.errors import InvalidInput
from releases.events import emit, notifications, secrets, selectors, services, webhooks
from releases.models import (
    AuditEvent,
    Membership,
    Notification,
    NotificationPreference,
    OutboxMessage,
    ReleaseRequest,
    RequestEvent,
    WebhookDelivery,
    WebhookEndpoint,
)
from releases.requests import run as release_run
from releases.review import services as review
from tests.conftest import READY_ROLES, make_user
from tests.support import factories, workflow
from tests.support.members import grant, make_project

pytestmark = pytest.mark.django_db

Kind = Notification.Kind
State = ReleaseRequest.State


def _kinds(user) -> list[str]:
    return list(Notification.objects.filter(user=user).values_list("kind", flat=True))


def test_every_transition_of_a_run_is_one_event_in_order(steward, officer):
    release_request = workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
    steps = list(
        RequestEvent.objects.filter(request=release_request).values_list("previous_state", "state")
    )
    assert steps == [
        ("", State.QUEUED),
        (State.QUEUED, State.RUNNING),
        (State.RUNNING, State.READY),
    ]
    review.review(officer, release_request.pk, "changes", "Coarser ages.")
    last = RequestEvent.objects.filter(request=release_request).last()
    assert (last.previous_state, last.state) == (State.READY, State.CHANGES_REQUESTED)


def test_ready_for_review_tells_the_projects_officers_but_the_requester(
    steward_officer, officer, second_officer, steward
):
    elsewhere = make_user("officer_elsewhere")
    grant(elsewhere, roles.OFFICER, project=make_project("study-b"))
    release_request = workflow.ready_release(
        steward_officer, factories.synthetic_csv(), READY_ROLES
    )
    assert _kinds(officer) == [Kind.REVIEW_READY]
    assert _kinds(second_officer) == [Kind.REVIEW_READY]
    assert Kind.REVIEW_READY not in _kinds(steward_officer)
    assert _kinds(steward) == []
    # An officer of another project reviews nothing here, so is told nothing.
    assert _kinds(elsewhere) == []
    note = Notification.objects.get(user=officer)
    assert f"#{release_request.pk}" in note.text
    assert note.link == reverse("releases:request_detail", args=[release_request.pk])
    # Officers have no e-mail address here: kept in the list, e-mailed to nobody.
    assert note.mail == Notification.Mail.NONE


def test_an_immediate_notification_is_mailed_once_through_the_outbox(steward, officer, mailoutbox):
    officer.email = "officer@example.org"
    officer.save()
    workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
    note = Notification.objects.get(user=officer, kind=Kind.REVIEW_READY)
    assert note.mail == Notification.Mail.NOW
    message = outbox.latest(emit.MAIL_TASK, note.pk)
    assert message is not None and message.sent_at is None
    assert notifications.mail_now(note.pk) is True
    assert notifications.mail_now(note.pk) is False  # a repeated message sends nothing
    assert [m.to for m in mailoutbox] == [["officer@example.org"]]
    assert note.text in mailoutbox[0].body


def test_off_keeps_the_notification_and_sends_nothing(steward, officer, mailoutbox):
    officer.email = "officer@example.org"
    officer.save()
    services.set_preferences(officer, {Kind.REVIEW_READY: "off"})
    workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
    note = Notification.objects.get(user=officer, kind=Kind.REVIEW_READY)
    assert note.mail == Notification.Mail.NONE
    assert outbox.latest(emit.MAIL_TASK, note.pk) is None
    assert notifications.mail_now(note.pk) is False
    assert notifications.send_digests() == 0
    assert mailoutbox == []


def test_a_digest_groups_the_unsent_notifications_once(steward, officer, mailoutbox):
    officer.email = "officer@example.org"
    officer.save()
    services.set_preferences(officer, {Kind.REVIEW_READY: "digest"})
    first = workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
    second = workflow.ready_release(steward, factories.synthetic_csv(seed=3), READY_ROLES)
    assert not OutboxMessage.objects.filter(task_name=emit.MAIL_TASK).exists()
    assert notifications.send_digests() == 2
    assert len(mailoutbox) == 1
    body = mailoutbox[0].body
    assert f"#{first.pk} " in body and f"#{second.pk} " in body
    assert notifications.send_digests() == 0  # never twice
    third = workflow.ready_release(steward, factories.synthetic_csv(seed=5), READY_ROLES)
    assert notifications.send_digests() == 1
    assert f"#{third.pk} " in mailoutbox[1].body and f"#{first.pk} " not in mailoutbox[1].body


def test_a_failed_digest_is_sent_by_the_next_run(steward, officer, mailoutbox, monkeypatch):
    officer.email = "officer@example.org"
    officer.save()
    services.set_preferences(officer, {Kind.REVIEW_READY: "digest"})
    workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)

    def down(*args, **kwargs):
        raise ConnectionRefusedError("the mail server is down")

    monkeypatch.setattr(notifications, "send_mail", down)
    assert notifications.send_digests() == 0
    monkeypatch.undo()
    assert notifications.send_digests() == 1
    assert len(mailoutbox) == 1


def test_the_decision_email_follows_the_requesters_choice(
    ready_request, officer, steward, mailoutbox
):
    services.set_preferences(steward, {Kind.REQUEST_DECIDED: "digest"})
    review.review(officer, ready_request.pk, "reject", "Not this data.")
    vote = ready_request.reviews.get()
    review.notify_requester(vote.pk)
    assert mailoutbox == []  # not at once: in the digest
    note = Notification.objects.get(user=steward, kind=Kind.REQUEST_DECIDED)
    assert "rejected" in note.text
    assert notifications.send_digests() == 1
    assert mailoutbox[0].to == ["steward@example.org"]


def test_the_decision_email_still_goes_out_by_default(ready_request, officer, mailoutbox):
    review.review(officer, ready_request.pk, "changes", "Coarser ages.")
    review.notify_requester(ready_request.reviews.get().pk)
    assert len(mailoutbox) == 1 and "Coarser ages." in mailoutbox[0].body
    # The in-app notification is kept, and not e-mailed a second time.
    note = Notification.objects.get(kind=Kind.REQUEST_DECIDED)
    assert note.mail == Notification.Mail.NONE


def test_approval_tells_the_named_recipients(ready_request, officer, recipient, other_recipient):
    workflow.approve(officer, ready_request, recipient)
    assert _kinds(recipient) == [Kind.RELEASE_NAMED]
    assert _kinds(other_recipient) == []


def test_a_failed_run_tells_the_requester(steward):
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    workflow.tag(steward, dataset, READY_ROLES)
    release_request = workflow.request_release(steward, dataset)
    release_request.state = State.RUNNING
    release_request.worker = "w1"
    release_request.save()
    release_run.fail_attempt(release_request, "The disk is full.")
    note = Notification.objects.get(user=steward, kind=Kind.REQUEST_FAILED)
    assert "The disk is full." in note.text
    assert RequestEvent.objects.filter(request=release_request, state=State.FAILED).count() == 1


def test_the_expiry_reminder_is_written_once(ready_request, officer, recipient, settings):
    settings.RELEASE_EXPIRY_REMINDER_DAYS = 3
    workflow.approve(officer, ready_request, recipient)
    ReleaseRequest.objects.filter(pk=ready_request.pk).update(
        expires_at=timezone.localdate() + datetime.timedelta(days=5)
    )
    assert notifications.remind_expiring() == 0  # not yet within 3 days
    ReleaseRequest.objects.filter(pk=ready_request.pk).update(
        expires_at=timezone.localdate() + datetime.timedelta(days=2)
    )
    assert notifications.remind_expiring() == 1
    assert notifications.remind_expiring() == 0
    assert _kinds(recipient).count(Kind.RELEASE_EXPIRING) == 1


def test_an_event_is_not_kept_when_its_change_rolls_back(ready_request, officer):
    before = RequestEvent.objects.count()
    with pytest.raises(InvalidInput):
        review.review(officer, ready_request.pk, "reject", "")  # a comment is required
    assert RequestEvent.objects.count() == before


# --- Webhooks -----------------------------------------------------------------------------


def test_endpoints_fire_for_their_owners_datasets_only(steward, other_steward):
    release_request = workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
    other_dataset = factories.make_dataset(steward, factories.synthetic_csv(), "b.csv")
    everything = services.create_endpoint(steward, "https://a.example.org/hook").endpoint
    this_one = services.create_endpoint(
        steward, "https://b.example.org/hook", release_request.dataset_id
    ).endpoint
    services.create_endpoint(steward, "https://c.example.org/hook", other_dataset.pk)
    paused = services.create_endpoint(steward, "https://d.example.org/hook").endpoint
    services.set_active(steward, paused.pk, False)
    services.create_endpoint(other_steward, "https://e.example.org/hook")
    fired = set(selectors.endpoints_for(release_request))
    assert fired == {everything, this_one}
    event = emit.transition(release_request, State.READY, State.READY)
    assert set(WebhookDelivery.objects.filter(event=event).values_list("endpoint", flat=True)) == {
        everything.pk,
        this_one.pk,
    }
    for delivery in WebhookDelivery.objects.filter(event=event):
        assert outbox.latest(webhooks.WEBHOOK_TASK, delivery.pk) is not None


def test_an_owner_who_left_the_project_hears_nothing_more(steward):
    release_request = workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
    endpoint = services.create_endpoint(steward, "https://a.example.org/hook").endpoint
    assert list(selectors.endpoints_for(release_request)) == [endpoint]
    Membership.objects.filter(user=steward, role=roles.STEWARD).delete()
    assert list(selectors.endpoints_for(release_request)) == []


def test_the_secret_is_stored_encrypted_and_signs(steward):
    made = services.create_endpoint(steward, "https://ci.example.org/hook")
    stored = WebhookEndpoint.objects.get(pk=made.endpoint.pk).secret_encrypted
    assert made.secret not in stored
    assert secrets.decrypt(stored) == made.secret
    assert AuditEvent.objects.filter(action=AuditEvent.Action.WEBHOOK_CREATED).count() == 1
    assert made.secret not in json.dumps(list(AuditEvent.objects.values_list("detail", flat=True)))


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/x",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "https://",
        "http://[::1",
        "http://example.org:99999/",
        "https://example.org/a b",
    ],
)
def test_only_http_and_https_urls(steward, url):
    with pytest.raises(InvalidInput, match="http:// or https://"):
        services.create_endpoint(steward, url)
    assert not WebhookEndpoint.objects.exists()


def test_a_webhook_needs_a_steward_and_the_stewards_own_dataset(
    steward, other_steward, recipient, client
):
    mine = factories.make_dataset(steward, factories.synthetic_csv(), "a.csv")
    with pytest.raises(InvalidInput, match="your own datasets"):
        services.create_endpoint(other_steward, "https://x.example.org", mine.pk)
    client.force_login(recipient)
    assert client.get(reverse("events:webhooks")).status_code == 403
    assert (
        client.post(reverse("events:webhooks"), {"url": "https://x.example.org"}).status_code == 403
    )
    assert not WebhookEndpoint.objects.exists()


def test_the_webhooks_page_shows_the_secret_once(steward, client):
    client.force_login(steward)
    response = client.post(
        reverse("events:webhooks"), {"url": "https://ci.example.org/hook", "active": "on"}
    )
    assert response.status_code == 201
    endpoint = WebhookEndpoint.objects.get()
    secret = secrets.decrypt(endpoint.secret_encrypted)
    assert secret in response.content.decode()
    page = client.get(reverse("events:webhooks")).content.decode()
    assert "https://ci.example.org/hook" in page and secret not in page


def test_the_webhooks_page_refuses_a_bad_url_clearly(steward, client):
    client.force_login(steward)
    response = client.post(reverse("events:webhooks"), {"url": "ftp://x.example.org"})
    assert response.status_code == 400
    assert "http:// or https://" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_another_stewards_webhook_is_out_of_sight(steward, other_steward, client):
    endpoint = services.create_endpoint(steward, "https://hooks.steward-one.test/x").endpoint
    client.force_login(other_steward)
    page = client.get(reverse("events:webhooks")).content.decode()
    assert "steward-one" not in page
    assert client.post(reverse("events:webhook_delete", args=[endpoint.pk])).status_code == 404
    assert (
        client.post(
            reverse("events:webhook_active", args=[endpoint.pk]), {"active": "0"}
        ).status_code
        == 404
    )
    endpoint.refresh_from_db()
    assert endpoint.active


# --- Notifications' pages -----------------------------------------------------------------------


def test_each_person_sees_and_marks_only_their_notifications(officer, ready_request, client):
    other = make_user("officer3")
    note = Notification.objects.get(user=officer)
    client.force_login(other)
    page = client.get(reverse("events:notifications")).content.decode()
    assert note.text not in page
    assert client.post(reverse("events:notification_read", args=[note.pk])).status_code == 404
    client.post(reverse("events:notification_read_all"))
    note.refresh_from_db()
    assert note.read_at is None

    client.force_login(officer)
    badge = client.get(reverse("events:notification_badge")).content.decode()
    assert 'title="unread notifications">1<' in badge
    assert note.text in client.get(reverse("events:notifications")).content.decode()
    assert client.get(reverse("events:notification_read", args=[note.pk])).status_code == 405
    client.post(reverse("events:notification_read", args=[note.pk]))
    note.refresh_from_db()
    assert note.read_at is not None
    assert (
        "unread notifications"
        not in client.get(reverse("events:notification_badge")).content.decode()
    )


def test_the_notifications_page_is_paginated(officer, client):
    steward = make_user("s9", roles.STEWARDS)
    release_request = workflow.ready_release(steward, factories.synthetic_csv(), READY_ROLES)
    for n in range(30):
        Notification.objects.create(
            user=officer, kind=Kind.REVIEW_READY, text=f"note {n:02d}", request=release_request
        )
    client.force_login(officer)
    first = client.get(reverse("events:notifications")).content.decode()
    assert "note 29" in first and "note 00" not in first
    second = client.get(reverse("events:notifications") + "?page=2").content.decode()
    assert "note 00" in second
    client.post(reverse("events:notification_read_all"))
    assert selectors.unread_count(officer) == 0


def test_preferences_page_saves_each_kind(officer, client):
    client.force_login(officer)
    data = {kind: "immediately" for kind in Kind.values}
    data[Kind.REVIEW_READY] = "digest"
    assert client.post(reverse("events:preferences"), data).status_code == 302
    assert selectors.delivery_of(officer, Kind.REVIEW_READY) == "digest"
    assert selectors.delivery_of(officer, Kind.RELEASE_NAMED) == "immediately"
    data[Kind.REVIEW_READY] = "hourly"
    assert client.post(reverse("events:preferences"), data).status_code == 400
    assert NotificationPreference.objects.get(user=officer, kind=Kind.REVIEW_READY).delivery == (
        "digest"
    )


def test_a_first_attempt_lost_on_the_way_is_sent_again_by_the_sweeper(steward, settings):
    settings.REDELIVER_SECONDS = 60
    services.create_endpoint(steward, "https://ci.example.org/hook")
    dataset = factories.make_dataset(steward, factories.synthetic_csv(), "people.csv")
    workflow.tag(steward, dataset, READY_ROLES)
    workflow.request_release(steward, dataset)
    delivery = WebhookDelivery.objects.get()
    assert webhooks.retry_due() == 0  # its outbox message is on its way
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        created_at=timezone.now() - datetime.timedelta(seconds=120)
    )
    assert webhooks.retry_due() == 1
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        claimed_until=timezone.now() + datetime.timedelta(seconds=30)
    )
    assert webhooks.retry_due() == 0  # a sender holds it
