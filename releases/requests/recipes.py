"""Recipes: a submitted extract request saved under a name, and applied to a later version of
its dataset in one step (a page's button, or one API call).

A recipe keeps what ``services.request_release`` was given: the round's parameters (privacy
model and its parameters, suppression limit, population, algorithm, attribute weights and
level limits; not fixed levels), whether it protected earlier releases, the sharing
(recipients, groups, terms, expiry as days after the request) and the justifications. The
quasi-identifiers and the other roles are the version's own (carried over from the previous
version). Applying it asks for the release with those, through the same service and checks.
"""

from __future__ import annotations

import datetime

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from releases.core import audit, roles
from releases.core.errors import InvalidInput
from releases.datasets import versions
from releases.datasets.selectors import ensure_ready, get_dataset_for
from releases.engine import PrivacyModel
from releases.engine.criteria import EarlierReleases
from releases.models import AuditEvent, Dataset, Recipe, ReleaseRequest
from releases.requests.cross_release import protected_model
from releases.requests.history import released_extracts
from releases.requests.parameters import ReleaseParameters
from releases.requests.services import Sharing, request_release


def _unprotected(model: PrivacyModel) -> PrivacyModel:
    return PrivacyModel(
        criteria=[c for c in model.criteria if not isinstance(c, EarlierReleases)],
        suppression_limit=model.suppression_limit,
        population=model.population,
    )


# --- Reads ------------------------------------------------------------------------------------


def recipes_for(user, dataset: Dataset) -> QuerySet[Recipe]:
    """The recipes of the dataset's lineage (its owner's), newest first."""
    dataset = get_dataset_for(user, dataset.pk)
    return Recipe.objects.filter(lineage_id=dataset.lineage_id, owner=user).select_related("source")


def recipe_for(user, recipe_id: int) -> Recipe:
    """A recipe its owner may see and apply; anyone else's is out of reach (404)."""
    roles.require(user, roles.STEWARDS, "work with recipes")
    try:
        return Recipe.objects.get(pk=recipe_id, owner=user)
    except Recipe.DoesNotExist:
        raise Http404("No such recipe.") from None


# --- Saving and applying ----------------------------------------------------------------------


def save_recipe(user, request_id: int, name: str) -> Recipe:
    """Save a submitted extract request of the caller's as a recipe of its dataset's lineage."""
    roles.require(user, roles.STEWARDS, "save recipes")
    release_request = (
        ReleaseRequest.objects.filter(pk=request_id, dataset__owner=user)
        .select_related("dataset")
        .first()
    )
    if release_request is None:
        raise Http404("No such request.")
    if release_request.kind != ReleaseRequest.Kind.EXTRACT:
        raise InvalidInput("Only an extract's request can be saved as a recipe.")
    name = (name or "").strip()
    if not name:
        raise InvalidInput("Name the recipe.")
    if len(name) > 200:
        raise InvalidInput("A recipe's name may be at most 200 characters.")
    params = ReleaseParameters.of(release_request)
    protect = any(isinstance(c, EarlierReleases) for c in params.model.criteria)
    stored = ReleaseParameters(
        _unprotected(params.model),
        params.algorithm,
        None,
        (),
        params.weights,
        params.level_limits,
    )
    snapshot = release_request.config or {}
    needed = list(snapshot.get("released") or [])
    needed += [
        n for n in [*(params.weights or {}), *(params.level_limits or {})] if n not in needed
    ]
    expiry = None
    if release_request.expires_at is not None:
        expiry = max(0, (release_request.expires_at - release_request.submitted_at.date()).days)
    dataset = release_request.dataset
    try:
        with transaction.atomic():
            recipe = Recipe.objects.create(
                owner=user,
                lineage_id=dataset.lineage_id,
                source=release_request,
                name=name,
                parameters=stored.to_json(),
                protect_earlier=protect,
                columns=needed,
                justifications=dict(snapshot.get("justifications") or {}),
                terms=release_request.terms,
                expires_after_days=expiry,
            )
            recipe.recipients.set(release_request.recipients.all())
            recipe.recipient_groups.set(release_request.recipient_groups.all())
            audit.record(
                AuditEvent.Action.RECIPE_SAVED,
                user,
                dataset=dataset,
                request=release_request,
                recipe=recipe.pk,
                name=name,
            )
    except IntegrityError:
        raise InvalidInput(f"This dataset already has a recipe named {name!r}.") from None
    return recipe


def parameters_for(recipe: Recipe, dataset: Dataset) -> ReleaseParameters:
    """The recipe's parameters for ``dataset``: protecting its released extracts when the
    recipe protected earlier releases and there are some."""
    params = ReleaseParameters.from_json(recipe.parameters)
    earlier = list(released_extracts(dataset)) if recipe.protect_earlier else []
    if not earlier:
        return params
    return ReleaseParameters(
        protected_model(params.model),
        params.algorithm,
        None,
        tuple(r.pk for r in earlier),
        params.weights,
        params.level_limits,
    )


def check_apply(recipe: Recipe, dataset: Dataset) -> None:
    """Refuse a version of another lineage, one with an unroled new column, or one lacking a
    column the recipe needs (``InvalidInput`` naming them)."""
    if dataset.lineage_id != recipe.lineage_id:
        raise InvalidInput(
            f"The recipe {recipe.name!r} is for the versions of another dataset; apply it to a "
            "version of its own dataset."
        )
    ensure_ready(dataset)
    versions.check_request(dataset)
    present = set(dataset.columns.values_list("name", flat=True))
    lacking = [name for name in recipe.columns if name not in present]
    if lacking:
        raise InvalidInput(
            f"This version lacks columns the recipe {recipe.name!r} needs: {', '.join(lacking)}."
        )


def apply_recipe(user, recipe_id: int, dataset_id: int) -> ReleaseRequest:
    """Ask for the recipe's release of a version of its lineage, and submit it."""
    recipe = recipe_for(user, recipe_id)
    dataset = get_dataset_for(user, dataset_id)
    check_apply(recipe, dataset)
    expires_at = None
    if recipe.expires_after_days is not None:
        expires_at = timezone.localdate() + datetime.timedelta(days=recipe.expires_after_days)
    sharing = Sharing(
        recipients=list(recipe.recipients.all()),
        recipient_groups=list(recipe.recipient_groups.all()),
        terms=recipe.terms or None,
        expires_at=expires_at,
    )
    with transaction.atomic():
        release_request = request_release(
            user, dataset, parameters_for(recipe, dataset), sharing, recipe.justifications
        )
        audit.record(
            AuditEvent.Action.RECIPE_APPLIED,
            user,
            dataset=dataset,
            request=release_request,
            recipe=recipe.pk,
            name=recipe.name,
        )
    return release_request
