"""Projects (a department, a study): every dataset belongs to one, and people hold roles in
them. A project's settings feed its requests (approvals, terms, expiry) and its budgets."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q

from .privacy_budget import EPSILON_FIELD


class Project(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    #: Approvals a request of this project needs (at least 1; four-eyes rules are unchanged).
    required_approvals = models.PositiveSmallIntegerField(default=1)
    #: The terms of use a new request starts with (the steward may change them).
    default_terms = models.TextField(blank=True)
    #: Days from approval until a release expires; None: no default expiry.
    default_expiry_days = models.PositiveIntegerField(null=True, blank=True)
    #: The total ε of a dataset of this project with no budget of its own; None: none set.
    epsilon_total = models.DecimalField(**EPSILON_FIELD, null=True, blank=True)
    #: Stewards see every dataset of the project (True) or only their own (False).
    stewards_see_all = models.BooleanField(default=False)
    #: Webhooks fire for the project's requests (True); when False none does, and no webhook
    #: can be registered for one of its datasets.
    webhooks_allowed = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(required_approvals__gte=1), name="project_approvals_at_least_one"
            ),
            models.CheckConstraint(
                condition=Q(epsilon_total__isnull=True) | Q(epsilon_total__gte=Decimal(0)),
                name="project_epsilon_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """One role of one person in one project; a person may hold several."""

    class Role(models.TextChoices):
        STEWARD = "steward", "Data steward"
        OFFICER = "officer", "Privacy officer"
        RECIPIENT = "recipient", "Recipient"
        ADMIN = "admin", "Project admin"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )

    class Source(models.TextChoices):
        LOCAL = "local", "Granted in the app"
        IDP = "idp", "From the identity provider"

    role = models.CharField(max_length=16, choices=Role.choices)
    #: Where the role came from: the identity provider's claims set the ``idp`` ones at each
    #: single sign-on (docs/sso.md); a project admin's (``local``) are never touched by it.
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.LOCAL)

    class Meta:
        ordering = ["project", "user__username", "role"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user", "role"], name="membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} – {self.get_role_display()} in {self.project}"


class SsoIdentity(models.Model):
    """The identity provider's subject (``sub``) of a user who signs in by OpenID Connect: the
    user is found by it, never by a name or an e-mail address the provider lets people change."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.subject})"
