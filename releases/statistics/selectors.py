"""Reads for the differential privacy pages: the officers' overview of budgets, a dataset's
budget page, and a statistics release's results. Nothing here changes state (see
``datasets.budget`` and ``statistics.services``); nothing here reads the original data.

Who sees a dataset's budget and ledger: privacy officers (every dataset, without its rows) and
the dataset's steward. Recipients never do.
"""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import Count, DecimalField, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import Http404

from releases.core import roles
from releases.datasets import budget
from releases.datasets.selectors import budget_context, can_see_budget
from releases.engine import EngineError, dp
from releases.models import BudgetEntry, Dataset, PrivacyBudget, ReleaseRequest

BUDGETS_PER_PAGE = 25
Kind = BudgetEntry.Kind


def dataset_for_budget(user, dataset_id: int) -> Dataset:
    """A dataset whose budget ``user`` may see (404 for a steward's other datasets)."""
    if not (roles.is_officer(user) or roles.is_steward(user)):
        raise PermissionDenied("Only privacy officers and data stewards see privacy budgets.")
    dataset = Dataset.objects.select_related("owner").filter(pk=dataset_id).first()
    if dataset is None or not can_see_budget(user, dataset):
        raise Http404("No such dataset.")
    return dataset


# --- Officers' overview ---------------------------------------------------------------------------


def budgets_overview(user, page_number=None) -> Page:
    """Every profiled dataset with its budget, what was spent and what remains, and its DP and
    row-level releases: for privacy officers, without any value of the data."""
    roles.require(user, roles.OFFICERS, "see every dataset's privacy budget")
    amount = DecimalField(max_digits=30, decimal_places=12)
    spent = (
        BudgetEntry.objects.filter(dataset=OuterRef("pk"), kind=Kind.DP_SPEND)
        .values("dataset")
        .annotate(total=Sum("epsilon"))
        .values("total")
    )
    datasets = (
        Dataset.objects.filter(
            status=Dataset.Status.READY,
            project__in=roles.projects_where(user, roles.OFFICER),
        )
        .select_related("owner", "privacy_budget")
        .annotate(
            epsilon_spent=Coalesce(Subquery(spent, output_field=amount), Value(Decimal(0))),
            dp_releases=Count(
                "budget_entries", filter=Q(budget_entries__kind=Kind.DP_SPEND), distinct=True
            ),
            row_level_releases=Count(
                "budget_entries", filter=Q(budget_entries__kind=Kind.ROW_LEVEL), distinct=True
            ),
        )
        .order_by("name", "id")
    )
    page = Paginator(datasets, BUDGETS_PER_PAGE).get_page(page_number)
    for dataset in page:
        try:
            found: PrivacyBudget | None = dataset.privacy_budget
        except PrivacyBudget.DoesNotExist:
            found = None
        spent = vars(dataset)["epsilon_spent"]  # the query's annotation
        # What the overview's rows show besides the model's fields.
        vars(dataset).update(
            budget=found, epsilon_remaining=found.epsilon_total - spent if found else None
        )
    return page


# --- A statistics release's page -----------------------------------------------------------------


def _bounds(query: dict) -> str:
    if "lower" in query and "upper" in query:
        return f"[{_number(query['lower'])}, {_number(query['upper'])}]"
    return ""


def _number(value) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else format(value, "g")


def _groups(query: dict) -> list[str]:
    """How a histogram groups each column and where its labels come from, in words."""
    return [dp.describe_grouping(g) for g in query.get("by", [])]


def result_tables(summary: dict) -> list[dict]:
    """Each query's result, for the pages: what it is, its mechanism, ε, δ, bounds, and its
    rows (group, noisy value, error at 95 %)."""
    tables = []
    for data in (summary.get("result") or {}).get("results", []):
        result = dp.QueryResult.from_dict(data)
        plan = result.plan
        tables.append(
            {
                "number": plan.index + 1,
                "kind": plan.kind,
                "description": plan.description,
                "mechanism": plan.mechanism,
                "epsilon": plan.epsilon,
                "delta": plan.delta,
                "bounds": _bounds(plan.query),
                "groups": _groups(plan.query),
                "error_kind": plan.error_kind,
                "error_note": plan.error_note,
                "scale": plan.scale,
                "rows": result.table_rows(),
                "detail": result.detail,
            }
        )
    return tables


def planned_queries(release_request: ReleaseRequest) -> list[dict]:
    """The request's queries as planned (before or without a result): mechanism and error at
    95 % from the free preview, computed without the data (a mean's error needs the noisy
    count, so it shows once the run is done)."""
    try:
        queries = dp.queries_from_list(release_request.queries)
        plans = dp.preview(queries)
    except EngineError:
        return []
    return [
        {
            "number": p.index + 1,
            "description": p.description,
            "mechanism": p.mechanism,
            "epsilon": p.epsilon,
            "delta": p.delta,
            "bounds": _bounds(p.query),
            "groups": _groups(p.query),
            "error": p.error,
            "error_kind": p.error_kind,
            "error_note": p.error_note,
        }
        for p in plans
    ]


def statistics_page(user, release_request: ReleaseRequest, ledger_page_number=None) -> dict:
    """What the officer's and the requester's page shows of a statistics release: its queries,
    results with their errors, the budget around its spend, and the dataset's ledger."""
    summary = release_request.summary or {}
    spend = budget.spend_of_round(release_request, release_request.round)
    return {
        "statistics_tables": result_tables(summary),
        "planned_queries": planned_queries(release_request),
        "statistics_epsilon": budget.show(release_request.statistics_epsilon),
        "round_spend": spend,
        "budget_figures": summary.get("budget") or {},
        **budget_context(user, release_request.dataset, ledger_page_number),
    }


__all__ = [
    "budgets_overview",
    "dataset_for_budget",
    "planned_queries",
    "result_tables",
    "statistics_page",
]
