"""Recipes over the API: save a submitted request as a recipe, list a lineage's recipes, read
one, and apply one to a version of its dataset (the new request, submitted). Calls what the
pages call."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from releases.api.common import ERRORS, page, refused_as, request_out, user_of
from releases.api.problems import Problem
from releases.api.schemas import ApplyIn, PageParams, RecipeIn, RecipeOut, RecipePage, RequestOut
from releases.datasets import selectors as dataset_selectors
from releases.models import Recipe
from releases.requests import recipes

router = Router(tags=["recipes"])


def recipe_out(recipe: Recipe) -> dict[str, Any]:
    return {
        "id": recipe.pk,
        "name": recipe.name,
        "lineage_id": recipe.lineage_id,
        "source_request_id": recipe.source_id,
        "parameters": recipe.parameters,
        "protect_earlier": recipe.protect_earlier,
        "columns": list(recipe.columns),
        "recipients": [u.get_username() for u in recipe.recipients.all()],
        "recipient_groups": [g.name for g in recipe.recipient_groups.all()],
        "terms": recipe.terms,
        "expires_after_days": recipe.expires_after_days,
        "created_at": recipe.created_at,
    }


@router.post("/requests/{request_id}/recipe", response={201: RecipeOut, ERRORS: Problem})
def save_recipe(request: HttpRequest, request_id: int, body: RecipeIn):
    """Save a submitted extract request of yours as a recipe of its dataset's versions."""
    with refused_as(400):
        recipe = recipes.save_recipe(user_of(request), request_id, body.name)
    return Status(201, recipe_out(recipe))


@router.get("/datasets/{dataset_id}/recipes", response={200: RecipePage, ERRORS: Problem})
def list_recipes(request: HttpRequest, dataset_id: int, params: Query[PageParams]):
    """The recipes of the dataset's lineage (any of its versions), newest first."""
    user = user_of(request)
    dataset = dataset_selectors.get_dataset_for(user, dataset_id)
    return page(recipes.recipes_for(user, dataset), params, recipe_out)


@router.get("/recipes/{recipe_id}", response={200: RecipeOut, ERRORS: Problem})
def recipe_detail(request: HttpRequest, recipe_id: int):
    """A recipe: what its requests are asked with, and the columns a version needs."""
    return recipe_out(recipes.recipe_for(user_of(request), recipe_id))


@router.post("/recipes/{recipe_id}/apply", response={201: RequestOut, ERRORS: Problem})
def apply_recipe(request: HttpRequest, recipe_id: int, body: ApplyIn):
    """Ask for the recipe's release of a version of its dataset, submitted at once (a worker
    runs it: poll the request). Refused when the version has a new column without a role or
    lacks a column the recipe needs."""
    with refused_as(400):
        release_request = recipes.apply_recipe(user_of(request), recipe_id, body.dataset)
    return Status(201, request_out(release_request))
