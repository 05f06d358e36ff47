"""Recipes: a submitted request saved under a name and applied to a later version in one step
(a page's POST, or one API call): the new request is asked with everything the first was
(privacy model and parameters, utility controls, recipients, terms, expiry), with the
version's own roles. Refused for a version with an unroled new column, one lacking a column the
recipe needs, and another lineage; only the owner saves or applies one."""

from __future__ import annotations

import datetime

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from releases.core.errors import InvalidInput
from releases.datasets import services as datasets
from releases.models import AuditEvent, Recipe, ReleaseRequest, Role
from releases.requests import recipes
from releases.requests import services as release
from releases.requests.parameters import ReleaseParameters
from releases.requests.services import Sharing
from tests.support import factories
from tests.support.api import client_for, token_for
from tests.test_versions import column, make_version, people

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    cache.clear()


@pytest.fixture
def first(steward):
    dataset = factories.make_dataset(steward, people(300, 1), "people.csv")
    roles = {
        "pid": Role.IDENTIFIER,
        "age": Role.QUASI_IDENTIFIER,
        "sex": Role.QUASI_IDENTIFIER,
        "zip": Role.WITHHELD,
        "visits": Role.INSENSITIVE,
        "diagnosis": Role.SENSITIVE,
    }
    for name, role in roles.items():
        datasets.set_column_role(steward, dataset, column(dataset, name).pk, role)
    return dataset


@pytest.fixture
def asked(steward, first, recipient):
    """A submitted request of version 1 with l-diversity, weights, level limits, a recipient,
    its own terms and an expiry ten days after it."""
    params = ReleaseParameters(
        k=4,
        l=2,
        suppression_limit=0.1,
        weights={"age": 2.0, "sex": 0.5},
        level_limits={"age": (1, None)},
    )
    sharing = Sharing(
        recipients=[recipient],
        terms="Use for the monthly report only.",
        expires_at=timezone.localdate() + datetime.timedelta(days=10),
    )
    return release.request_release(steward, first, params, sharing)


def test_a_recipe_asks_the_same_of_a_new_version(steward, first, asked, recipient):
    recipe = recipes.save_recipe(steward, asked.pk, "Monthly k=4, l=2")
    second = make_version(steward, first, people(200, 2))
    new = recipes.apply_recipe(steward, recipe.pk, second.pk)

    assert new.dataset_id == second.pk and new.state == ReleaseRequest.State.QUEUED
    assert new.parameters == asked.parameters
    assert ReleaseParameters.of(new).weights == {"age": 2.0, "sex": 0.5}
    assert ReleaseParameters.of(new).level_limits == {"age": (1, None)}
    assert list(new.recipients.all()) == [recipient]
    assert new.terms == "Use for the monthly report only."
    assert new.expires_at == timezone.localdate() + datetime.timedelta(days=10)
    assert [q["name"] for q in new.config["quasi_identifiers"]] == ["age", "sex"]
    assert AuditEvent.objects.filter(action="recipe_applied", request=new).exists()
    assert AuditEvent.objects.filter(action="request", request=new).exists()


def test_applying_is_refused_while_a_new_column_has_no_role(steward, first, asked):
    recipe = recipes.save_recipe(steward, asked.pk, "Monthly")
    second = make_version(steward, first, people(200, 2, extra="region"))
    with pytest.raises(InvalidInput, match="new columns without a role: region"):
        recipes.apply_recipe(steward, recipe.pk, second.pk)
    assert not ReleaseRequest.objects.filter(dataset=second).exists()


def test_applying_is_refused_when_a_needed_column_is_missing(steward, first, asked):
    recipe = recipes.save_recipe(steward, asked.pk, "Monthly")
    assert {"age", "sex", "visits", "diagnosis"} <= set(recipe.columns)
    second = make_version(steward, first, people(200, 2, drop="sex"))
    with pytest.raises(InvalidInput, match="lacks columns the recipe 'Monthly' needs: sex"):
        recipes.apply_recipe(steward, recipe.pk, second.pk)


def test_a_recipe_applies_only_to_its_own_lineage(steward, first, asked):
    recipe = recipes.save_recipe(steward, asked.pk, "Monthly")
    unrelated = factories.make_dataset(steward, people(100, 7), "other.csv")
    with pytest.raises(InvalidInput, match="another dataset"):
        recipes.apply_recipe(steward, recipe.pk, unrelated.pk)


def test_recipe_names_are_unique_per_lineage(steward, first, asked):
    recipes.save_recipe(steward, asked.pk, "Monthly")
    with pytest.raises(InvalidInput, match="already has a recipe"):
        recipes.save_recipe(steward, asked.pk, "Monthly")
    with pytest.raises(InvalidInput, match="Name the recipe"):
        recipes.save_recipe(steward, asked.pk, "  ")


def test_the_pages_save_and_apply_a_recipe(client, steward, first, asked):
    client.force_login(steward)
    page = client.get(reverse("releases:request_detail", args=[asked.pk])).content.decode()
    assert "Save as a recipe" in page
    response = client.post(reverse("releases:recipe_save", args=[asked.pk]), {"name": "Monthly"})
    assert response.status_code == 302
    recipe = Recipe.objects.get()
    second = make_version(steward, first, people(200, 2))
    page = client.get(reverse("releases:dataset_detail", args=[second.pk])).content.decode()
    assert "Apply recipe to version 2" in page
    apply_url = reverse("releases:recipe_apply", args=[second.pk, recipe.pk])
    assert client.get(apply_url).status_code == 405  # no GET that writes
    response = client.post(apply_url)
    new = ReleaseRequest.objects.get(dataset=second)
    assert response.status_code == 302 and response.url == new.get_absolute_url()


def test_the_page_says_why_a_recipe_was_refused(client, steward, first, asked):
    recipe = recipes.save_recipe(steward, asked.pk, "Monthly")
    second = make_version(steward, first, people(200, 2, extra="region"))
    client.force_login(steward)
    response = client.post(
        reverse("releases:recipe_apply", args=[second.pk, recipe.pk]), follow=True
    )
    assert "new columns without a role: region" in response.content.decode()
    assert not ReleaseRequest.objects.filter(dataset=second).exists()


def test_the_api_saves_lists_and_applies_a_recipe(steward, first, asked):
    api = client_for(token_for(steward))
    saved = api.post(
        f"/api/v1/requests/{asked.pk}/recipe", {"name": "Monthly"}, content_type="application/json"
    )
    assert saved.status_code == 201, saved.content
    recipe = saved.json()
    assert recipe["recipients"] == ["recipient"] and recipe["expires_after_days"] == 10
    second = make_version(steward, first, people(200, 2, extra="region"))
    listed = api.get(f"/api/v1/datasets/{second.pk}/recipes").json()
    assert [r["id"] for r in listed["items"]] == [recipe["id"]]
    assert api.get(f"/api/v1/recipes/{recipe['id']}").json()["name"] == "Monthly"

    refused = api.post(
        f"/api/v1/recipes/{recipe['id']}/apply",
        {"dataset": second.pk},
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/problem+json"
    assert "region" in refused.json()["detail"]

    datasets.set_column_role(steward, second, column(second, "region").pk, Role.WITHHELD)
    applied = api.post(
        f"/api/v1/recipes/{recipe['id']}/apply",
        {"dataset": second.pk},
        content_type="application/json",
    )
    assert applied.status_code == 201, applied.content
    assert applied.json()["dataset_id"] == second.pk
    assert ReleaseRequest.objects.get(pk=applied.json()["id"]).parameters == asked.parameters


def test_only_the_owner_saves_sees_or_applies_a_recipe(
    client, steward, first, asked, other_steward, officer, recipient
):
    recipe = recipes.save_recipe(steward, asked.pk, "Monthly")
    second = make_version(steward, first, people(200, 2))
    for person, status in ((other_steward, 404), (officer, 403), (recipient, 403)):
        api = client_for(token_for(person))
        assert api.get(f"/api/v1/recipes/{recipe.pk}").status_code == status, person
        applied = api.post(
            f"/api/v1/recipes/{recipe.pk}/apply",
            {"dataset": second.pk},
            content_type="application/json",
        )
        assert applied.status_code == status, (person, applied.content)
        saved = api.post(
            f"/api/v1/requests/{asked.pk}/recipe", {"name": "Mine"}, content_type="application/json"
        )
        assert saved.status_code == status, (person, saved.content)
        client.force_login(person)
        url = reverse("releases:recipe_apply", args=[second.pk, recipe.pk])
        assert client.post(url).status_code == status, person
        assert (
            client.post(reverse("releases:recipe_save", args=[asked.pk]), {"name": "x"}).status_code
            == status
        )
    # Another steward's own dataset cannot borrow the recipe either.
    theirs = factories.make_dataset(other_steward, people(100, 8), "theirs.csv")
    with pytest.raises(Exception, match="No such recipe"):
        recipes.apply_recipe(other_steward, recipe.pk, theirs.pk)
    assert not ReleaseRequest.objects.filter(dataset=second).exists()
    assert Recipe.objects.count() == 1
