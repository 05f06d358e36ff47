"""The first month of the worked monthly pipeline (docs/pipeline.md), for its test: run as
``python -m tests.support.monthly_scenario`` with the app's environment before the worker and
the web server start. Prints JSON: the first version's id, the recipe's, and write tokens of
the steward and of an officer.

The steward ``monthly`` uploads the first month of Adult with a ``pid`` key column, gives its
columns roles (age, sex and race quasi-identifiers with ARX's hierarchies, the key column the
lineage's key), asks for k=5 and saves that request as the recipe ``Monthly k=5``.
"""

from __future__ import annotations

import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")
django.setup()

from releases.api import tokens  # noqa: E402
from releases.core import roles  # noqa: E402
from releases.datasets import services as datasets  # noqa: E402
from releases.datasets import versions  # noqa: E402
from releases.models import ApiToken, Role  # noqa: E402
from releases.requests import recipes  # noqa: E402
from releases.requests import services as release  # noqa: E402
from releases.requests.parameters import ReleaseParameters  # noqa: E402
from tests.conftest import hierarchy_upload, make_user  # noqa: E402
from tests.support import factories  # noqa: E402
from tests.support.monthly import QUASI, month  # noqa: E402
from tests.support.workflow import tag  # noqa: E402


def main() -> dict:
    steward = make_user("monthly", roles.STEWARDS)
    officer = make_user("monthly-officer", roles.OFFICERS)
    dataset = factories.make_dataset(steward, month(0), "adult-month-1.csv")
    tag(steward, dataset, dict.fromkeys(QUASI, Role.QUASI_IDENTIFIER))
    for name in QUASI:
        column = dataset.columns.get(name=name)
        datasets.set_hierarchy_file(steward, dataset, column.pk, hierarchy_upload(name))
    versions.set_key_column(steward, dataset, "pid")
    asked = release.request_release(
        steward, dataset, ReleaseParameters(k=5, suppression_limit=0.05)
    )
    recipe = recipes.save_recipe(steward, asked.pk, "Monthly k=5")
    return {
        "dataset": dataset.pk,
        "recipe": recipe.pk,
        "steward_token": tokens.create_token(steward, "pipeline", ApiToken.Scope.WRITE).token,
        "officer_token": tokens.create_token(officer, "approvals", ApiToken.Scope.WRITE).token,
    }


if __name__ == "__main__":
    print(json.dumps(main()))
