"""The statistics forms: a statistics release's queries, and a dataset's privacy budget."""

from __future__ import annotations

from decimal import Decimal
from typing import cast

from django import forms

from releases.engine import dp


def _lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def _numbers(text: str, what: str) -> list[float]:
    """Numbers separated by commas, semicolons or spaces ("0, 18, 65, 120")."""
    parts = [p for p in (text or "").replace(";", ",").replace(" ", ",").split(",") if p.strip()]
    try:
        return [float(p) for p in parts]
    except ValueError:
        raise forms.ValidationError(f"{what}: write numbers separated by commas.") from None


class StatisticsQueryForm(forms.Form):
    """One query of a statistics release, generated from the engine's registry of query kinds
    (``dp.QUERY_TYPES``): the kinds offered, and which parts of the form each one uses.
    Bounds are typed by the steward: never filled in from the data. An empty kind leaves the
    row out."""

    KINDS = [("", "— no query —"), *((k, cls.label) for k, cls in dp.QUERY_TYPES.items())]

    SOURCES = [
        ("typed", "Typed below (public knowledge)"),
        ("hierarchy", "A level of the column's hierarchy"),
        ("domain", "The column's declared values"),
        ("data", "From the data, released privately (needs δ)"),
    ]

    kind = forms.ChoiceField(choices=KINDS, required=False)
    epsilon = forms.FloatField(label="ε", min_value=0.000001, max_value=100, required=False)
    delta = forms.FloatField(
        label="δ (labels from the data only, e.g. 1e-6)",
        min_value=0,
        max_value=0.001,
        required=False,
    )
    column = forms.ChoiceField(label="Column", required=False)
    source = forms.ChoiceField(label="Labels", choices=SOURCES, required=False, initial="typed")
    level = forms.IntegerField(label="Hierarchy level", min_value=1, required=False)
    categories = forms.CharField(
        label="Categories (one per line)",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=100_000,
    )
    edges = forms.CharField(
        label="or bin edges (e.g. 0, 18, 65, 120)", required=False, max_length=20_000
    )
    column2 = forms.ChoiceField(label="Second column (optional)", required=False)
    source2 = forms.ChoiceField(
        label="Its labels", choices=SOURCES, required=False, initial="typed"
    )
    level2 = forms.IntegerField(label="Its hierarchy level", min_value=1, required=False)
    categories2 = forms.CharField(
        label="Its categories (one per line)",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=100_000,
    )
    edges2 = forms.CharField(label="or its bin edges", required=False, max_length=20_000)
    lower = forms.FloatField(label="Lower bound", required=False)
    upper = forms.FloatField(label="Upper bound", required=False)
    alphas = forms.CharField(
        label="Quantiles (0.5 is the median; e.g. 0.25, 0.5, 0.75)",
        required=False,
        max_length=500,
    )

    def __init__(self, *args, columns: list[str] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        choices = [("", "—"), *((c, c) for c in columns or [])]
        cast(forms.ChoiceField, self.fields["column"]).choices = choices
        cast(forms.ChoiceField, self.fields["column2"]).choices = choices

    def clean(self):
        data = super().clean()
        kind = data.get("kind")
        if not kind:
            return data
        if data.get("epsilon") is None:
            self.add_error("epsilon", "Give this query's ε.")
        parts = dp.QUERY_TYPES[kind].form_parts
        if "groupings" in parts and not data.get("column"):
            self.add_error("column", "Choose the column to group by.")
        if "column" in parts and not data.get("column"):
            self.add_error("column", "Choose the numeric column.")
        if "bounds" in parts:
            for name in ("lower", "upper"):
                if data.get(name) is None:
                    self.add_error(name, "Type the bound (it is never taken from the data).")
        try:
            data["edges_list"] = _numbers(data.get("edges", ""), "Bin edges")
            data["edges2_list"] = _numbers(data.get("edges2", ""), "Bin edges")
            data["alphas_list"] = _numbers(data.get("alphas", ""), "Quantiles")
        except forms.ValidationError as exc:
            self.add_error(None, exc)
        return data

    def _grouping(
        self, column: str, categories: str, edges: list[float], source: str | None, level
    ) -> dict:
        grouping: dict = {"column": column, "source": source or "typed"}
        if _lines(categories):
            grouping["categories"] = _lines(categories)
        if edges:
            grouping["edges"] = edges
        if grouping["source"] == "hierarchy":
            grouping["level"] = level if level is not None else 1
        return grouping

    def item(self) -> dict | None:
        """The query's dict form (``engine.dp``), or None for an empty row."""
        data = self.cleaned_data
        kind = data.get("kind")
        if not kind:
            return None
        item: dict = {"kind": kind, "epsilon": data["epsilon"]}
        parts = dp.QUERY_TYPES[kind].form_parts
        if "groupings" in parts:
            by = [
                self._grouping(
                    data["column"],
                    data["categories"],
                    data["edges_list"],
                    data.get("source"),
                    data.get("level"),
                )
            ]
            if data.get("column2"):
                by.append(
                    self._grouping(
                        data["column2"],
                        data["categories2"],
                        data["edges2_list"],
                        data.get("source2"),
                        data.get("level2"),
                    )
                )
            item["by"] = by
        if "delta" in parts and data.get("delta"):
            item["delta"] = data["delta"]
        if "column" in parts:
            item["column"] = data["column"]
        if "bounds" in parts:
            item.update(lower=data["lower"], upper=data["upper"])
        if "alphas" in parts:
            item["alphas"] = data["alphas_list"] or [0.5]
        return item

    @property
    def used_by(self) -> dict[str, str]:
        """Per part of the form, the kinds of query using it, for its label ("sum, mean")."""
        return {part: ", ".join(dp.kinds_using(part)) for part in dp.FORM_PARTS}

    @classmethod
    def initial_from(cls, query: dict) -> dict:
        """A form row from a stored query (to edit it when resubmitting)."""
        initial: dict = {"kind": query["kind"], "epsilon": query["epsilon"]}
        if query.get("delta"):
            initial["delta"] = query["delta"]
        for number, grouping in enumerate(query.get("by", [])[:2]):
            suffix = "2" if number else ""
            initial[f"column{suffix}"] = grouping["column"]
            initial[f"source{suffix}"] = grouping.get("source", "typed")
            if grouping.get("level") is not None:
                initial[f"level{suffix}"] = grouping["level"]
            initial[f"categories{suffix}"] = "\n".join(grouping.get("categories", []))
            initial[f"edges{suffix}"] = ", ".join(format(e, "g") for e in grouping.get("edges", []))
        for name in ("column", "lower", "upper"):
            if name in query:
                initial[name] = query[name]
        if "alphas" in query:
            initial["alphas"] = ", ".join(format(a, "g") for a in query["alphas"])
        return initial


class BaseStatisticsQueryFormSet(forms.BaseFormSet):
    def __init__(self, *args, columns: list[str] | None = None, **kwargs) -> None:
        self.columns = columns or []
        super().__init__(*args, **kwargs)

    def get_form_kwargs(self, index):
        return {**super().get_form_kwargs(index), "columns": self.columns}

    def items(self) -> list[dict | None]:
        """Each row's query dict (None for empty or invalid rows), in the rows' order."""
        return [form.item() if form.is_valid() else None for form in self.forms]


StatisticsQueryFormSet = cast(
    type[BaseStatisticsQueryFormSet],
    forms.formset_factory(
        StatisticsQueryForm,
        formset=BaseStatisticsQueryFormSet,
        extra=2,
        max_num=50,
        absolute_max=60,
    ),
)


class BudgetForm(forms.Form):
    """A privacy officer sets (or raises) a dataset's total ε and δ."""

    epsilon = forms.DecimalField(
        label="Total ε", min_value=0, max_digits=18, decimal_places=12, initial=1
    )
    delta = forms.DecimalField(
        label="Total δ (0 unless histograms may take their labels from the data, e.g. 1e-5)",
        min_value=0,
        max_value=Decimal("0.999999"),
        max_digits=21,
        decimal_places=20,
        initial=0,
        required=False,
    )
