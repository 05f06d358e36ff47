"""Statistics releases and privacy budgets: the steward's request form with its free preview,
the officers' overview of budgets, a dataset's budget and its ledger. Thin: each view parses,
calls one service or selector, renders. Every page works as a plain form post; htmx refreshes
the preview and the ledger in place."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from releases.core.errors import InvalidInput
from releases.core.http import is_htmx as _is_htmx
from releases.datasets import budget
from releases.datasets import selectors as dataset_selectors
from releases.models import ReleaseRequest
from releases.requests import history
from releases.requests import selectors as request_selectors
from releases.requests.forms import SharingForm
from releases.statistics import queries, selectors, services
from releases.statistics.forms import BudgetForm, StatisticsQueryForm, StatisticsQueryFormSet

PREFIX = "q"


# --- The steward's request form ------------------------------------------------------------------


def _resubmitting(request: HttpRequest, dataset) -> ReleaseRequest | None:
    """The statistics release being resubmitted with this form, if any."""
    raw = request.POST.get("resubmit") or request.GET.get("resubmit")
    if not raw:
        return None
    try:
        release_request = request_selectors.get_request_for(request.user, int(raw))
    except ValueError:
        raise Http404("No such release request.") from None
    if not release_request.is_statistics or release_request.dataset_id != dataset.pk:
        raise Http404("No such statistics release of this dataset.")
    return release_request


def _fill(user, dataset, data: QueryDict, action: str) -> str:
    """ "hierarchy-<row>-<grouping>" or "domain-<row>-<grouping>": the row's categories become
    the labels of the column's hierarchy at the row's level, or the column's declared values
    (public sources the steward chose; never the values found in the data). Returns an error
    for the page, or ""."""
    try:
        source, row, grouping = action.split("-")
        suffix = "" if grouping == "1" else "2"
        int(row)
    except ValueError:
        return "Unknown action."
    column = data.get(f"{PREFIX}-{row}-column{suffix}", "")
    if not column:
        return "Choose the column first, then fill its categories."
    try:
        if source == "hierarchy":
            try:
                level = int(data.get(f"{PREFIX}-{row}-level{suffix}") or 1)
            except ValueError:
                return "The hierarchy level is a whole number."
            values = queries.hierarchy_labels(user, dataset, column, level)
            data[f"{PREFIX}-{row}-level{suffix}"] = str(level)
        elif source == "domain":
            values = queries.declared_labels(user, dataset, column)
        else:
            return "Unknown action."
    except InvalidInput as exc:
        return str(exc)
    data[f"{PREFIX}-{row}-categories{suffix}"] = "\n".join(values)
    data[f"{PREFIX}-{row}-edges{suffix}"] = ""
    data[f"{PREFIX}-{row}-source{suffix}"] = source
    return ""


def _context(request, dataset, formset, sharing_form, preview, resubmitting, error="") -> dict:
    return {
        "dataset": dataset,
        "formset": formset,
        "sharing_form": sharing_form,
        "preview": preview,
        "resubmitting": resubmitting,
        "error": error,
        "remaining": budget.remaining(dataset),
        "row_count": dataset.row_count,
    }


@require_http_methods(["GET", "POST"])
def statistics_request(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """Request (or resubmit) a statistics release: queries one by one, a free preview of each
    one's mechanism and expected error, and the total against the remaining budget.

    The form's buttons post ``action``: "add" (one more row), "hierarchy-<row>-<1|2>" or
    "domain-<row>-<1|2>" (the labels of the column's hierarchy or its declared values as
    categories), "preview", or "submit"."""
    dataset = dataset_selectors.get_dataset_for(request.user, dataset_id)
    resubmitting = _resubmitting(request, dataset)
    columns = queries.dataset_columns(dataset)
    if request.method == "GET":
        initial = (
            [StatisticsQueryForm.initial_from(q) for q in resubmitting.queries]
            if resubmitting
            else None
        )
        formset = StatisticsQueryFormSet(prefix=PREFIX, columns=columns, initial=initial)
        context = _context(
            request, dataset, formset, SharingForm(dataset=dataset), None, resubmitting
        )
        return render(request, "releases/statistics_request.html", context)

    data = request.POST.copy()
    action = data.get("action", "submit")
    error = ""
    if action == "add":
        total = int(data.get(f"{PREFIX}-TOTAL_FORMS") or 0)
        data[f"{PREFIX}-TOTAL_FORMS"] = str(min(total + 1, StatisticsQueryFormSet.max_num))
    elif action.startswith(("hierarchy-", "domain-")):
        error = _fill(request.user, dataset, data, action)
    formset = StatisticsQueryFormSet(data, prefix=PREFIX, columns=columns)
    sharing_form = SharingForm(data, dataset=dataset)
    valid = formset.is_valid() and sharing_form.is_valid()
    preview = services.preview(request.user, dataset, formset.items())
    if action == "submit":
        if not valid:
            error = "Correct the fields marked below."
        else:
            items = [item for item in formset.items() if item is not None]
            try:
                if resubmitting:
                    release_request = services.resubmit(
                        request.user, resubmitting.pk, items, sharing_form.cleaned_data["response"]
                    )
                    messages.success(request, f"Round {release_request.round} submitted.")
                else:
                    release_request = services.request_statistics(
                        request.user, dataset, items, sharing_form.sharing()
                    )
            except InvalidInput as exc:
                error = str(exc)
            else:
                return redirect(release_request)
    context = _context(request, dataset, formset, sharing_form, preview, resubmitting, error)
    status = 400 if action == "submit" else 200
    if _is_htmx(request) and action != "submit":
        # "Add a query" and the fill buttons swap the form in place.
        return render(request, "releases/statistics_request.html#form", context)
    return render(request, "releases/statistics_request.html", context, status=status)


@require_POST
def statistics_preview(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """The live preview (htmx): each query's mechanism and error at 95 %, the total ε against
    what remains. Reads no data, spends nothing."""
    dataset = dataset_selectors.get_dataset_for(request.user, dataset_id)
    formset = StatisticsQueryFormSet(
        request.POST, prefix=PREFIX, columns=queries.dataset_columns(dataset)
    )
    formset.is_valid()
    return render(
        request,
        "releases/partials/statistics_preview.html",
        {
            "dataset": dataset,
            "formset": formset,
            "preview": services.preview(request.user, dataset, formset.items()),
            "remaining": budget.remaining(dataset),
        },
    )


# --- Budgets and ledgers -------------------------------------------------------------------------


@require_GET
def budget_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "releases/budget_list.html",
        {"datasets": selectors.budgets_overview(request.user, request.GET.get("page"))},
    )


def _budget_page(request, dataset, form=None, status=200) -> HttpResponse:
    context = dataset_selectors.budget_context(request.user, dataset, request.GET.get("page"))
    budget_row = context["ledger"].budget
    context["budget_form"] = form or BudgetForm(
        initial={"epsilon": budget_row.epsilon_total.normalize(), "delta": budget_row.delta_total}
        if budget_row
        else None
    )
    context["dataset"] = dataset
    context["owner_view"] = dataset.owner_id == request.user.pk
    context["statistics_requests"] = request_selectors.visible_requests(request.user).filter(
        dataset=dataset, kind=ReleaseRequest.Kind.STATISTICS
    )[:20]
    # The officers' page of a dataset: its release history sits beside its budget.
    if history.can_see_history(request.user, dataset):
        context["history"] = history.history_page(request.user, dataset, request.GET.get("history"))
    return render(request, "releases/budget_detail.html", context, status=status)


@require_GET
def budget_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = selectors.dataset_for_budget(request.user, dataset_id)
    return _budget_page(request, dataset)


@require_POST
def budget_set(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = selectors.dataset_for_budget(request.user, dataset_id)
    form = BudgetForm(request.POST)
    if form.is_valid():
        try:
            budget.set_budget(
                request.user,
                dataset,
                form.cleaned_data["epsilon"],
                form.cleaned_data.get("delta") or 0,
            )
        except InvalidInput as exc:  # refusals of who may set it answer 403 with the reason
            form.add_error(None, str(exc))
        else:
            messages.success(
                request,
                f"The privacy budget of {dataset.name} is now ε "
                f"{budget.show(form.cleaned_data['epsilon'])}.",
            )
            return redirect("releases:budget_detail", dataset_id=dataset.pk)
    return _budget_page(request, dataset, form, status=400)


@require_GET
def ledger(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """One page of a dataset's ledger (htmx swaps it in place; a plain link opens the page)."""
    dataset = selectors.dataset_for_budget(request.user, dataset_id)
    page = request.GET.get("page")
    if not _is_htmx(request):
        url = reverse("releases:budget_detail", args=[dataset.pk])
        return redirect(f"{url}?page={page or 1}#ledger")
    return render(
        request,
        "releases/partials/ledger.html",
        dataset_selectors.budget_context(request.user, dataset, page),
    )
