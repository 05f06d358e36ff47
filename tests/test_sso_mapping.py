"""Single sign-on without a provider: the group mapping setting, and what a sign-in writes
(the user found by subject, the provider-given roles set, the app's own roles left alone)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured

from anonymizer_site import settings as site_settings
from releases.accounts import services
from releases.models import AuditEvent, Membership, Project, SsoIdentity
from tests.support.processes import REPO


def test_the_mapping_is_parsed_into_group_project_role():
    assert site_settings.parse_group_roles(" a=alpha:officer , b-c=beta:admin,,a=beta:steward") == (
        ("a", "alpha", "officer"),
        ("b-c", "beta", "admin"),
        ("a", "beta", "steward"),
    )
    assert site_settings.parse_group_roles("") == ()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("a=alpha", "'a=alpha' is not of the form"),
        ("alpha:officer", "'alpha:officer' is not of the form"),
        ("a=alpha:boss", "names the role 'boss'"),
        ("=alpha:officer", "is not of the form"),
    ],
)
def test_a_bad_mapping_is_a_clear_error(text, named):
    with pytest.raises(ImproperlyConfigured, match=named):
        site_settings.parse_group_roles(text)


def test_the_mapping_knows_the_models_roles():
    assert set(site_settings.OIDC_ROLE_NAMES) == set(Membership.Role.values)


@pytest.mark.process
def test_the_app_does_not_start_with_a_bad_mapping():
    env = {"PATH": "/usr/bin:/bin", "OIDC_GROUP_ROLES": "staff=alpha:chief"}
    completed = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode != 0
    assert "OIDC_GROUP_ROLES: 'staff=alpha:chief' names the role 'chief'" in completed.stderr


def claims(groups: set[str], username: str = "ada", subject: str = "sub-1") -> services.SsoClaims:
    return services.SsoClaims(
        issuer="https://idp.example.org",
        subject=subject,
        username=username,
        email=f"{username}@example.org",
        groups=frozenset(groups),
    )


def held(user) -> set[tuple[str, str, str]]:
    return set(Membership.objects.filter(user=user).values_list("project__slug", "role", "source"))


@pytest.fixture
def mapped(settings, db):
    settings.OIDC_GROUP_ROLES = (
        ("alpha-admins", "alpha", "admin"),
        ("alpha-officers", "alpha", "officer"),
        ("beta", "beta", "steward"),
        ("ghost", "no-such-project", "officer"),
    )
    Project.objects.create(slug="alpha", name="Alpha")
    Project.objects.create(slug="beta", name="Beta")


@pytest.mark.usefixtures("mapped")
def test_sign_ins_set_the_providers_roles_and_keep_the_apps():
    user = services.sign_in_by_sso(claims({"alpha-admins", "alpha-officers", "ghost"}))
    assert user.username == "ada" and not user.has_usable_password()
    assert SsoIdentity.objects.get(user=user).subject == "sub-1"
    assert held(user) == {("alpha", "admin", "idp"), ("alpha", "officer", "idp")}
    # Given in the app: the recipient role in beta.
    Membership.objects.create(project=Project.objects.get(slug="beta"), user=user, role="recipient")
    again = services.sign_in_by_sso(claims({"alpha-officers", "beta"}))
    assert again.pk == user.pk
    assert held(user) == {
        ("alpha", "officer", "idp"),
        ("beta", "recipient", "local"),
        ("beta", "steward", "idp"),
    }
    services.sign_in_by_sso(claims(set()))
    assert held(user) == {("beta", "recipient", "local")}
    changes = [
        (e.detail["project"], e.detail["roles_before"], e.detail["roles_after"])
        for e in AuditEvent.objects.filter(action=AuditEvent.Action.MEMBERSHIP).order_by("id")
    ]
    assert changes == [
        ("alpha", [], ["admin", "officer"]),
        ("alpha", ["admin", "officer"], ["officer"]),
        ("beta", ["recipient"], ["recipient", "steward"]),
        ("alpha", ["officer"], []),
        ("beta", ["recipient", "steward"], ["recipient"]),
    ]
    assert AuditEvent.objects.filter(action=AuditEvent.Action.LOGIN_SSO, actor=user).count() == 3


@pytest.mark.usefixtures("mapped")
def test_a_role_held_in_the_app_is_not_given_twice_nor_taken():
    local = User.objects.create_user("ada-local")
    identity_user = services.sign_in_by_sso(claims(set(), username="ada-local"))
    # A local account of the same name is not taken over.
    assert identity_user.username == "ada-local-2"
    Membership.objects.create(
        project=Project.objects.get(slug="alpha"), user=identity_user, role="officer"
    )
    services.sign_in_by_sso(claims({"alpha-officers"}, username="ada-local"))
    assert held(identity_user) == {("alpha", "officer", "local")}
    services.sign_in_by_sso(claims(set(), username="ada-local"))
    assert held(identity_user) == {("alpha", "officer", "local")}
    assert held(local) == set()


@pytest.mark.usefixtures("mapped")
def test_a_deactivated_account_cannot_sign_in():
    user = services.sign_in_by_sso(claims({"alpha-officers"}))
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert services.sign_in_by_sso(claims(set())) is None
    assert held(user) == {("alpha", "officer", "idp")}
