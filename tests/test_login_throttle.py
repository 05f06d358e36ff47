"""Failed logins throttle an address, not a person: the owner of a name someone is guessing can
still log in from elsewhere; an address waits longer after each further failure; a name is
locked only when many addresses fail on it, until an administrator or a password reset by
e-mail releases it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.core import mail
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils import timezone

from releases.accounts import services as accounts
from releases.models import AuditEvent, UsernameLock
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

A, B = "203.0.113.1", "198.51.100.2"


def login(client, username: str, password: str, ip: str, url: str | None = None):
    return client.post(
        url or reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip
    )


def signed_in(response) -> bool:
    return response.status_code == 302 and bool(response.wsgi_request.session.get("_auth_user_id"))


def wait_shown(response) -> tuple[str, int]:
    """The "try again after HH:MM (UTC): a wait of N minutes" of a refusal."""
    text = response.content.decode()
    found = re.search(r"Try again after (\d\d:\d\d) \(\w+\): a wait of (\d+) minutes?", text)
    assert found, text
    return found.group(1), int(found.group(2))


def age_failures(ip: str, seconds: float) -> None:
    """Move an address's failures into the past, as if ``seconds`` had gone by."""
    for attempt in AccessAttempt.objects.filter(ip_address=ip):
        AccessAttempt.objects.filter(pk=attempt.pk).update(
            attempt_time=attempt.attempt_time - timedelta(seconds=seconds)
        )


@pytest.fixture
def alice(db):
    return make_user("alice")


def test_five_wrong_passwords_from_one_address_do_not_stop_the_owner_elsewhere(
    client, settings, alice
):
    assert settings.AXES_FAILURE_LIMIT == 5
    for _ in range(4):
        assert login(client, "alice", "wrong", A).status_code == 200  # the form, with its error
    refused = login(client, "alice", "wrong", A)
    assert refused.status_code == 429
    assert "Too many failed logins came from your address" in refused.content.decode()
    # From A even the right password waits...
    assert login(client, "alice", "pw-alice", A).status_code == 429
    # ...but from B alice logs in at once.
    other = type(client)()
    assert signed_in(login(other, "alice", "pw-alice", B))
    # And A's failures are still counted: A still waits.
    assert login(type(client)(), "alice", "pw-alice", A).status_code == 429


def test_an_address_meets_a_longer_wait_after_each_further_failure(client, settings, alice):
    settings.LOGIN_DELAY_MINUTES = 1
    settings.LOGIN_MAX_DELAY_MINUTES = 4
    for _ in range(5):
        response = login(client, "alice", "wrong", A)
    assert wait_shown(response)[1] == 1
    # Trying again during the wait is refused and does not lengthen it.
    refused = login(client, "alice", "wrong", A)
    assert refused.status_code == 429
    assert AccessAttempt.objects.get(ip_address=A).failures_since_start == 5
    waits = []
    for _ in range(4):
        age_failures(A, 61 * 60)  # past any wait, well within the memory (24 h)
        response = login(client, "alice", "wrong", A)  # allowed again: one more failure
        assert response.status_code == 429
        last = AccessAttempt.objects.get(ip_address=A).attempt_time
        shown, minutes = wait_shown(response)
        waits.append(minutes)
        # The time shown is the end of the wait, rounded up to the minute.
        end = timezone.localtime(last) + timedelta(minutes=minutes)
        rounded_up = end.replace(second=0, microsecond=0)
        if rounded_up < end:
            rounded_up += timedelta(minutes=1)
        assert shown == rounded_up.strftime("%H:%M")
    assert waits == [2, 4, 4, 4]  # doubled each time, capped at LOGIN_MAX_DELAY_MINUTES
    # Once the wait is over, the right password works and forgets alice's failures from A.
    age_failures(A, 5 * 60)
    assert signed_in(login(client, "alice", "pw-alice", A))
    assert not AccessAttempt.objects.filter(ip_address=A, username="alice").exists()


def test_a_correct_password_only_clears_its_own_failures(client, alice):
    make_user("mallory")
    for _ in range(3):
        login(client, "alice", "wrong", A)
    login(client, "mallory", "wrong", A)
    # mallory, who holds an account, cannot wipe A's failures on alice by logging in.
    assert signed_in(login(client, "mallory", "pw-mallory", A))
    assert AccessAttempt.objects.get(ip_address=A, username="alice").failures_since_start == 3
    assert not AccessAttempt.objects.filter(ip_address=A, username="mallory").exists()
    assert login(type(client)(), "alice", "wrong", A).status_code == 200  # the 4th
    assert login(type(client)(), "alice", "wrong", A).status_code == 429  # the 5th


def test_failures_forgotten_after_the_memory(client, settings, alice):
    for _ in range(5):
        login(client, "alice", "wrong", A)
    age_failures(A, settings.LOGIN_FAILURE_MEMORY_HOURS * 3600 + 60)
    assert login(client, "alice", "wrong", A).status_code == 200
    assert AccessAttempt.objects.get(ip_address=A).failures_since_start == 1


def fail_from_many(client, username: str, count: int) -> list:
    return [login(type(client)(), username, "wrong", f"192.0.2.{i}") for i in range(1, count + 1)]


def test_failures_from_many_addresses_lock_the_name_everywhere(client, settings, alice):
    settings.LOGIN_USERNAME_LOCK_IPS = 4
    responses = fail_from_many(client, "alice", 3)
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert not UsernameLock.objects.exists()
    fourth = fail_from_many(client, "alice", 4)[-1]  # 192.0.2.4 is the fourth address
    assert fourth.status_code == 429
    assert "is locked" in fourth.content.decode()
    lock = UsernameLock.objects.get(username="alice")
    assert lock.is_active and lock.addresses == 4
    event = AuditEvent.objects.get(action=AuditEvent.Action.LOGIN_LOCKED)
    assert event.detail == {"username": "alice", "addresses": 4}
    # Locked: the right password from a fresh address is refused too.
    response = login(client, "alice", "pw-alice", B)
    assert response.status_code == 429 and "reset the password" in response.content.decode()
    assert "_auth_user_id" not in client.session
    # Other names are not affected.
    make_user("bob")
    assert signed_in(login(client, "bob", "pw-bob", B))


@pytest.fixture
def locked_alice(client, settings, alice):
    settings.LOGIN_USERNAME_LOCK_IPS = 3
    fail_from_many(client, "alice", 3)
    assert UsernameLock.objects.get(username="alice").is_active
    return alice


def test_an_administrator_releases_a_locked_name_in_the_admin(client, locked_alice):
    admin_user = User.objects.create_superuser("root", "root@example.org", "pw-root")
    client.force_login(admin_user)
    changelist = reverse("admin:releases_usernamelock_changelist")
    assert "alice" in client.get(changelist).content.decode()
    lock = UsernameLock.objects.get(username="alice")
    response = client.post(changelist, {"action": "release", "_selected_action": [lock.pk]})
    assert response.status_code == 302
    lock.refresh_from_db()
    assert not lock.is_active
    assert (lock.released_by, lock.released_how) == (admin_user, "administrator")
    event = AuditEvent.objects.get(action=AuditEvent.Action.LOGIN_RELEASED)
    assert event.actor == admin_user
    assert event.detail == {"username": "alice", "how": "administrator"}
    # The failures that locked it are gone too: alice logs in, and one more failure from a
    # fourth address does not lock her again.
    client.logout()
    assert signed_in(login(client, "alice", "pw-alice", B))
    assert login(type(client)(), "alice", "wrong", "192.0.2.99").status_code == 200


def test_only_an_administrator_may_release(client, locked_alice):
    someone = make_user("someone")
    with pytest.raises(PermissionDenied):
        accounts.release_by_administrator(someone, "alice")
    staff_without_permission = make_user("helpdesk")
    staff_without_permission.is_staff = True
    staff_without_permission.save()
    client.force_login(staff_without_permission)
    assert client.get(reverse("admin:releases_usernamelock_changelist")).status_code == 403
    assert UsernameLock.objects.get(username="alice").is_active
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.LOGIN_RELEASED).exists()


def test_a_password_reset_by_e_mail_releases_the_name(client, locked_alice):
    locked_alice.email = "alice@example.org"
    locked_alice.save()
    assert login(client, "alice", "pw-alice", B).status_code == 429
    page = client.get(reverse("password_reset"))
    assert page.status_code == 200
    response = client.post(reverse("password_reset"), {"email": "alice@example.org"})
    assert response.status_code == 302
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["alice@example.org"]
    link = re.search(r"https?://[^/\s]+(/accounts/reset/\S+)", message.body).group(1)
    # Only the link's use releases the name, not the e-mail being sent.
    assert UsernameLock.objects.get(username="alice").is_active
    form = client.get(link, follow=True)
    assert b'name="new_password1"' in form.content
    new = "a-new-passphrase-2026"
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": new, "new_password2": new}, follow=True
    )
    assert b"Password changed" in done.content
    lock = UsernameLock.objects.get(username="alice")
    assert (lock.is_active, lock.released_how, lock.released_by) == (
        False,
        "password_reset",
        locked_alice,
    )
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.LOGIN_RELEASED, actor=locked_alice
    ).exists()
    assert signed_in(login(type(client)(), "alice", new, B))
    # The link works once.
    again = client.get(link, follow=True)
    assert b"already been used or has expired" in again.content


def test_a_reset_of_a_name_not_locked_changes_no_lock(client, alice):
    alice.email = "alice@example.org"
    alice.save()
    client.post(reverse("password_reset"), {"email": "alice@example.org"})
    link = re.search(r"https?://[^/\s]+(/accounts/reset/\S+)", mail.outbox[0].body).group(1)
    form = client.get(link, follow=True)
    new = "a-new-passphrase-2026"
    client.post(form.redirect_chain[-1][0], {"new_password1": new, "new_password2": new})
    assert not UsernameLock.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.LOGIN_RELEASED).exists()


def test_a_forged_forwarded_for_header_does_not_escape_the_wait(client, alice, settings):
    # Without BEHIND_TLS_PROXY (the default) only the socket's address counts.
    assert settings.BEHIND_TLS_PROXY is False
    statuses = [
        client.post(
            reverse("login"),
            {"username": "alice", "password": "wrong"},
            REMOTE_ADDR=A,
            HTTP_X_FORWARDED_FOR=f"10.9.9.{i}",
        ).status_code
        for i in range(5)
    ]
    assert statuses == [200, 200, 200, 200, 429]
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {A}


def test_behind_the_proxy_the_forwarded_address_is_the_one_throttled(client, alice, settings):
    settings.BEHIND_TLS_PROXY = True
    proxy = "10.0.0.1"
    for i in range(5):
        # The proxy appends the address it saw; what the client wrote before it is ignored.
        client.post(
            reverse("login"),
            {"username": "alice", "password": "wrong"},
            REMOTE_ADDR=proxy,
            HTTP_X_FORWARDED_FOR=f"10.9.9.{i}, {A}",
        )
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {A}
    waiting = client.post(
        reverse("login"),
        {"username": "alice", "password": "pw-alice"},
        REMOTE_ADDR=proxy,
        HTTP_X_FORWARDED_FOR=A,
    )
    assert waiting.status_code == 429
    # Another client behind the same proxy is not made to wait.
    response = type(client)().post(
        reverse("login"),
        {"username": "alice", "password": "pw-alice"},
        REMOTE_ADDR=proxy,
        HTTP_X_FORWARDED_FOR=B,
    )
    assert signed_in(response)
