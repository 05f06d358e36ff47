from decimal import Decimal

from django import forms

from .engine import POPULATION_PARAMS, REGISTRY, EngineError, ParamSpec, PrivacyModel, dp
from .models import ReleaseRequest, Review
from .services import release
from .services.release import ReleaseParameters, Sharing
from .services.sharing import Additions


class UploadForm(forms.Form):
    file = forms.FileField(label="File (CSV, TSV, Excel .xlsx or Parquet)", allow_empty_file=True)
    name = forms.CharField(label="Name (optional)", max_length=255, required=False)
    sheet = forms.CharField(
        label="Excel sheet (optional; the first sheet otherwise)", max_length=255, required=False
    )


def _param_field(spec: ParamSpec) -> forms.Field:
    """A form field for one parameter of a privacy model (bounds, choices and help from its
    definition; whether it is needed is the model's to say, once it is chosen)."""
    if spec.kind == "choice":
        return forms.ChoiceField(
            label=spec.label,
            choices=spec.choices,
            initial=spec.default,
            required=False,
            help_text=spec.help,
        )
    attrs = {"step": "1" if spec.kind == "int" else "any"}
    if spec.minimum is not None:
        attrs["min"] = f"{spec.minimum:g}"
    if spec.maximum is not None:
        attrs["max"] = f"{spec.maximum:g}"
    # The bounds are checked by the engine, which also knows the exclusive ones.
    return forms.FloatField(
        label=spec.label,
        initial=spec.default,
        required=False,
        help_text=spec.help,
        widget=forms.NumberInput(attrs=attrs),
    )


def _use_key(model: str) -> str:
    """The checkbox that asks for a privacy model."""
    return f"use__{model}"


class ModelForm(forms.Form):
    """The privacy models, suppression limit, population and algorithm of a release request,
    generated from the engine's definitions (``releases.engine.criteria.REGISTRY``): one
    group per model, asked for by its checkbox, with its parameters. The engine validates."""

    #: Asked for on a new request: k-anonymity with k=5 (and 5 % suppression).
    DEFAULT_MODELS = {"k-anonymity": {"k": 5}}

    suppression_percent = forms.DecimalField(
        label="Suppression limit (% of rows that may be removed)",
        min_value=0,
        max_value=100,
        decimal_places=2,
        initial=5,
    )
    algorithm = forms.ChoiceField(
        choices=ReleaseRequest.Algorithm.choices,
        initial=ReleaseRequest.Algorithm.OPTIMAL,
        required=False,
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name, kind in REGISTRY.items():
            self.fields[_use_key(name)] = forms.BooleanField(
                label=kind.label,
                required=False,
                initial=name in self.DEFAULT_MODELS,
                help_text=kind.summary,
            )
            defaults = self.DEFAULT_MODELS.get(name, {})
            for spec in kind.params:
                field = _param_field(spec)
                if spec.name in defaults:
                    field.initial = defaults[spec.name]
                self.fields[spec.key(name)] = field
        for spec in POPULATION_PARAMS:
            self.fields[spec.name] = _param_field(spec)
        # Whole numbers show as such ("5", not "5.0") when the form is filled back.
        for name, value in list(self.initial.items()):
            if isinstance(value, float) and value.is_integer():
                self.initial[name] = int(value)

    # --- what the template shows

    def model_groups(self) -> list[dict]:
        """One group per privacy model: its checkbox, its parameters, and its errors."""
        return [
            {
                "name": name,
                "label": kind.label,
                "summary": kind.summary,
                "needs_sensitive": kind.needs_sensitive,
                "needs_population": kind.needs_population,
                "use": self[_use_key(name)],
                "params": [self[spec.key(name)] for spec in kind.params],
            }
            for name, kind in REGISTRY.items()
        ]

    def protection(self) -> dict[str, str]:
        """The models that protect against finding a person and those that also protect the
        sensitive columns (they need one), named for the form's introduction."""

        def listed(labels: list[str]) -> str:
            return " and ".join(filter(None, [", ".join(labels[:-1]), *labels[-1:]]))

        kinds = list(REGISTRY.values())
        return {
            "identity": listed([k.label for k in kinds if not k.needs_sensitive]),
            "sensitive": listed([k.label for k in kinds if k.needs_sensitive]),
        }

    def population_fields(self):
        return [self[spec.name] for spec in POPULATION_PARAMS]

    def model_fields(self):
        """The fields of the privacy model (not the sharing or justification fields)."""
        names = ["suppression_percent", "algorithm"]
        for name, kind in REGISTRY.items():
            names += [_use_key(name), *(spec.key(name) for spec in kind.params)]
        names += [spec.name for spec in POPULATION_PARAMS]
        return [self[name] for name in names]

    # --- validation, through the engine

    def clean(self):
        data = super().clean()
        chosen: dict = {}
        for name, kind in REGISTRY.items():
            if not data.get(_use_key(name)):
                continue
            values = {spec.name: data.get(spec.key(name)) for spec in kind.params}
            main = kind.params[0]
            if values[main.name] is None:
                self.add_error(main.key(name), f"{kind.label} needs {main.label}.")
                continue
            try:
                kind(**values).validate()
            except EngineError as exc:
                self.add_error(main.key(name), str(exc))
                continue
            chosen.update({spec.key(name): values[spec.name] for spec in kind.params})
        for spec in POPULATION_PARAMS:
            try:
                problem = spec.problem(spec.coerce(data.get(spec.name)), "The population")
            except EngineError as exc:
                problem = str(exc)
            if problem:
                self.add_error(spec.name, problem)
        if self.errors:
            return data
        if not chosen:
            raise forms.ValidationError("Choose at least one privacy model.")
        population = {
            spec.name: data.get(spec.name)
            for spec in POPULATION_PARAMS
            if data.get(spec.name) is not None
        }
        percent = data.get("suppression_percent")
        limit = float(percent / Decimal(100)) if percent is not None else 0.0
        try:
            self.privacy_model = PrivacyModel.from_fields(
                {**chosen, **population}, suppression_limit=limit
            )
        except EngineError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    def parameters(self) -> ReleaseParameters:
        return ReleaseParameters(
            self.privacy_model,
            self.cleaned_data.get("algorithm") or ReleaseRequest.Algorithm.OPTIMAL,
        )

    @classmethod
    def initial_for(cls, params: ReleaseParameters) -> dict:
        """The form's fields filled from parameters (to resubmit a request changed): only
        the models they ask for are ticked."""
        model = params.model
        initial: dict = {
            "suppression_percent": Decimal(str(round(model.suppression_limit * 100, 2))),
            "algorithm": params.algorithm,
        }
        initial.update({_use_key(name): False for name in REGISTRY})
        initial.update({_use_key(c.name): True for c in model.criteria})
        initial.update({k: v for k, v in model.fields().items() if k != "suppression_limit"})
        return initial

    @classmethod
    def initial_from(cls, release_request: ReleaseRequest) -> dict:
        return cls.initial_for(ReleaseParameters.of(release_request))


class JustificationsMixin:
    """One text field per column suggested as a direct identifier that the tagging releases as
    it is: releasing it needs a written reason, kept on the request and shown to officers."""

    def add_justification_fields(self, dataset) -> None:
        self.justified_columns = (
            release.identifiers_released_unchanged(dataset) if dataset is not None else []
        )
        for column in self.justified_columns:
            self.fields[f"justify-{column.pk}"] = forms.CharField(
                label=f"Why must {column.name} be released as it is?",
                help_text=column.suggestion_reason,
                widget=forms.Textarea(attrs={"rows": 2}),
                max_length=2000,
                required=False,
            )

    def justification_fields(self):
        return [self[f"justify-{c.pk}"] for c in self.justified_columns]

    def justifications(self) -> dict[str, str]:
        return {
            c.name: self.cleaned_data.get(f"justify-{c.pk}", "") for c in self.justified_columns
        }


class ReleaseRequestForm(JustificationsMixin, ModelForm):
    """A release request: the privacy model, who receives it, on which terms, until when."""

    recipients = forms.ModelMultipleChoiceField(
        queryset=ReleaseRequest.recipients.field.related_model.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Recipients (only they can see and download the release)",
    )
    recipient_groups = forms.ModelMultipleChoiceField(
        queryset=ReleaseRequest.recipient_groups.field.related_model.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Recipient groups (their members who are recipients)",
    )
    terms = forms.CharField(
        label="Terms of use (the data sharing agreement each recipient accepts; empty: the "
        "site's default)",
        widget=forms.Textarea(attrs={"rows": 4}),
        max_length=20000,
        required=False,
    )
    expires_at = forms.DateField(
        label="Available until (last day; empty: no expiry)",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def __init__(self, *args, dataset=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["recipients"].queryset = release.recipient_choices()
        self.fields["recipient_groups"].queryset = release.recipient_group_choices()
        self.fields["terms"].initial = release.default_terms()
        self.add_justification_fields(dataset)

    def sharing(self) -> Sharing:
        data = self.cleaned_data
        return Sharing(
            recipients=list(data.get("recipients") or []),
            recipient_groups=list(data.get("recipient_groups") or []),
            terms=(data.get("terms") or "").strip() or None,
            expires_at=data.get("expires_at"),
        )


class ResubmitForm(JustificationsMixin, ModelForm):
    response = forms.CharField(
        label="Your answer to the reviewers (or what changed)",
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=5000,
    )

    def __init__(self, *args, dataset=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.add_justification_fields(dataset)


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=Review.Decision.choices)
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=5000
    )
    # An approving officer may name more recipients and set the expiry date.
    add_recipients = forms.ModelMultipleChoiceField(
        queryset=ReleaseRequest.recipients.field.related_model.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Also name these recipients (on approval)",
    )
    add_recipient_groups = forms.ModelMultipleChoiceField(
        queryset=ReleaseRequest.recipient_groups.field.related_model.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Also name these groups (on approval)",
    )
    expires_at = forms.DateField(
        label="Available until (on approval; empty: keep the requester's choice)",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["add_recipients"].queryset = release.recipient_choices()
        self.fields["add_recipient_groups"].queryset = release.recipient_group_choices()

    def additions(self) -> Additions:
        data = self.cleaned_data
        return Additions(
            recipients=list(data.get("add_recipients") or []),
            recipient_groups=list(data.get("add_recipient_groups") or []),
            expires_at=data.get("expires_at"),
        )

    def clean(self):
        data = super().clean()
        if (
            data.get("decision") in (Review.Decision.CHANGES, Review.Decision.REJECT)
            and not (data.get("comment") or "").strip()
        ):
            self.add_error("comment", "Give a comment when you request changes or reject.")
        return data


class RevokeForm(forms.Form):
    reason = forms.CharField(
        label="Why is this release revoked? (shown to its recipients)",
        widget=forms.Textarea(attrs={"rows": 2}),
        max_length=5000,
    )


# --- Statistics releases and privacy budgets --------------------------------------------------


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
        self.fields["column"].choices = choices
        self.fields["column2"].choices = choices

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
        self, column: str, categories: str, edges: list[float], source: str, level
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


StatisticsQueryFormSet = forms.formset_factory(
    StatisticsQueryForm,
    formset=BaseStatisticsQueryFormSet,
    extra=2,
    max_num=50,
    absolute_max=60,
)


class SharingForm(forms.Form):
    """Who receives a release and on which terms (the statistics request's part)."""

    recipients = forms.ModelMultipleChoiceField(
        queryset=ReleaseRequest.recipients.field.related_model.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Recipients (only they can see and download the release)",
    )
    recipient_groups = forms.ModelMultipleChoiceField(
        queryset=ReleaseRequest.recipient_groups.field.related_model.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Recipient groups (their members who are recipients)",
    )
    terms = forms.CharField(
        label="Terms of use (the data sharing agreement each recipient accepts; empty: the "
        "site's default)",
        widget=forms.Textarea(attrs={"rows": 4}),
        max_length=20000,
        required=False,
    )
    expires_at = forms.DateField(
        label="Available until (last day; empty: no expiry)",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    response = forms.CharField(
        label="Your answer to the reviewers (or what changed)",
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=5000,
        required=False,
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["recipients"].queryset = release.recipient_choices()
        self.fields["recipient_groups"].queryset = release.recipient_group_choices()
        self.fields["terms"].initial = release.default_terms()

    def sharing(self) -> Sharing:
        data = self.cleaned_data
        return Sharing(
            recipients=list(data.get("recipients") or []),
            recipient_groups=list(data.get("recipient_groups") or []),
            terms=(data.get("terms") or "").strip() or None,
            expires_at=data.get("expires_at"),
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
