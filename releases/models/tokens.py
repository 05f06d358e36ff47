"""Personal access tokens for the HTTP API (``/api/v1/``): the hash of each, never the token."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """A person's token, sent as ``Authorization: Bearer <token>``.

    The token is ``anon_<prefix>_<secret>``; only its prefix (shown in lists, and how a token
    is found) and the SHA-256 of the whole token are kept, so the database never holds a
    usable token. It acts as its owner, with the owner's roles, within its ``scope``."""

    class Scope(models.TextChoices):
        READ = "read", "Read only"
        WRITE = "write", "Read and write"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    #: SHA-256 (hex) of the whole token: a token is random enough that a slow hash adds nothing.
    token_sha256 = models.CharField(max_length=64)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def can_write(self) -> bool:
        return self.scope == self.Scope.WRITE
