"""Recipes: a submitted request's settings, saved to ask for the same release of a later
version of its dataset in one step."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models

from .datasets import Dataset
from .requests import ReleaseRequest


class Recipe(models.Model):
    """What a request was asked with (``ReleaseParameters.to_json()`` without fixed levels or
    earlier releases, the protection as a flag, the sharing, the justifications by column name),
    for the versions of one lineage. The quasi-identifiers are the version's own roles."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="recipes"
    )
    #: The lineage's first dataset.
    lineage = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="recipes")
    source = models.ForeignKey(
        ReleaseRequest, on_delete=models.SET_NULL, null=True, blank=True, related_name="recipes"
    )
    name = models.CharField(max_length=200)
    parameters = models.JSONField(default=dict)
    protect_earlier = models.BooleanField(default=False)
    #: The columns a version must have: the request's released columns and the ones its
    #: weights and level limits name.
    columns = models.JSONField(default=list)
    justifications = models.JSONField(default=dict, blank=True)
    recipients = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="named_recipes"
    )
    recipient_groups = models.ManyToManyField(Group, blank=True, related_name="named_recipes")
    terms = models.TextField(blank=True)
    #: Days from the request to its expiry (None: no expiry).
    expires_after_days = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["lineage", "name"], name="unique_recipe_name"),
        ]

    def __str__(self) -> str:
        return self.name
