"""User names locked after failed sign-ins from many addresses."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class UsernameLock(models.Model):
    """A user name nobody may sign in with, from any address, until it is released.

    Written when failed sign-ins for the name came from ``LOGIN_USERNAME_LOCK_IPS`` distinct
    addresses; released by an administrator or by the owner resetting the password. Released
    locks are kept as the record of what happened."""

    class Release(models.TextChoices):
        ADMINISTRATOR = "administrator", "Released by an administrator"
        PASSWORD_RESET = "password_reset", "Released by a password reset"

    username = models.CharField(max_length=255)
    locked_at = models.DateTimeField(auto_now_add=True)
    #: How many distinct addresses the failures came from when it was locked.
    addresses = models.PositiveIntegerField()
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    released_how = models.CharField(max_length=20, choices=Release.choices, blank=True)

    class Meta:
        ordering = ["-locked_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["username"],
                condition=Q(released_at__isnull=True),
                name="one_lock_per_username",
            )
        ]

    def __str__(self) -> str:
        return self.username

    @property
    def is_active(self) -> bool:
        return self.released_at is None
