"""The request forms: the privacy model of an extract (generated from the engine's registry of
privacy models), who receives a release and on which terms, a resubmission, a revocation."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, cast

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import QuerySet

from releases.core.errors import InvalidInput
from releases.engine import POPULATION_PARAMS, REGISTRY, EngineError, ParamSpec, PrivacyModel
from releases.engine.microaggregation import FUNCTIONS as AGGREGATE_FUNCTIONS
from releases.engine.microaggregation import describe as describe_aggregate
from releases.models import ReleaseRequest
from releases.requests.cross_release import protected_model, protecting, release_name
from releases.requests.history import released_extracts
from releases.requests.parameters import (
    DEFAULT_TIME_LIMIT,
    HEURISTIC_SUGGESTED_FROM,
    MAX_TIME_LIMIT,
    ReleaseParameters,
)
from releases.requests.selectors import (
    identifiers_released_unchanged,
    quasi_identifier_columns,
    recipient_choices,
    recipient_group_choices,
)
from releases.requests.services import Sharing, default_terms


def offer(form: forms.Form, name: str, queryset: QuerySet) -> None:
    """The choices of the form's field ``name`` (people, groups): ``queryset``."""
    cast(forms.ModelMultipleChoiceField, form.fields[name]).queryset = queryset


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
    time_limit = forms.DecimalField(
        label="Time limit of the search (seconds)",
        min_value=1,
        max_value=MAX_TIME_LIMIT,
        decimal_places=1,
        initial=DEFAULT_TIME_LIMIT,
        required=False,
        help_text="The search within a time limit keeps improving its best transformation "
        "until then, and states whether it is proven optimal.",
    )
    #: 15 or more quasi-identifiers are tagged: the search within a time limit is suggested.
    heuristic_suggested = False

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
        names = ["suppression_percent", "algorithm", "time_limit"]
        for name, kind in REGISTRY.items():
            names += [_use_key(name), *(spec.key(name) for spec in kind.params)]
        names += [spec.name for spec in POPULATION_PARAMS]
        return [self[name] for name in names]

    # --- validation, through the engine

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a Form's clean gives its cleaned_data
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
            problem = _web_input_problem(kind, data)
            if problem:
                self.add_error(main.key(name), problem)
                continue
            chosen.update({spec.key(name): values[spec.name] for spec in kind.params})
        for spec in POPULATION_PARAMS:
            try:
                problem = spec.problem(spec.coerce(data.get(spec.name)), "The population")
            except EngineError as exc:
                problem = str(exc)
            if problem:
                self.add_error(spec.name, problem)
        if data.get("algorithm") == ReleaseRequest.Algorithm.HEURISTIC and (
            data.get("time_limit") is None
        ):
            self.add_error(
                "time_limit",
                "The search within a time limit needs the time limit, in seconds (1 to "
                f"{MAX_TIME_LIMIT:,}).",
            )
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
        algorithm = self.cleaned_data.get("algorithm") or ReleaseRequest.Algorithm.OPTIMAL
        limit = self.cleaned_data.get("time_limit")
        heuristic = algorithm == ReleaseRequest.Algorithm.HEURISTIC
        return ReleaseParameters(
            self.privacy_model,
            algorithm,
            time_limit=float(limit) if heuristic and limit is not None else None,
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
        if params.time_limit is not None:
            initial["time_limit"] = params.time_limit
        initial.update({_use_key(name): False for name in REGISTRY})
        initial.update({_use_key(c.name): True for c in model.criteria if c.name in REGISTRY})
        initial["protect_earlier"] = protecting(model)
        initial.update({k: v for k, v in model.fields().items() if k != "suppression_limit"})
        return initial

    @classmethod
    def initial_from(cls, release_request: ReleaseRequest) -> dict:
        return cls.initial_for(ReleaseParameters.of(release_request))


def _web_input_problem(kind, data: dict) -> str | None:
    """Why ``kind`` cannot judge a request made on these pages: a research subset (the
    population table with the released rows marked) is taken by the command line only."""
    if kind.uses_research_subset == "required":
        return (
            f"{kind.label} needs a research subset: the population table with the released "
            "rows marked. A request made here cannot attach one yet; the command line can "
            "(python manage.py anonymize --research-subset FILE)."
        )
    if kind.uses_research_subset == "optional" and not any(
        data.get(spec.name) is not None for spec in POPULATION_PARAMS
    ):
        return (
            f"A {kind.label} request made here needs the population size or the sampling "
            "fraction to estimate the population from (a research subset can be given on the "
            "command line only)."
        )
    return None


def sharing_fields() -> tuple[
    forms.ModelMultipleChoiceField,
    forms.ModelMultipleChoiceField,
    forms.CharField,
    forms.DateField,
]:
    """The fields naming who receives a release and on which terms (recipients, recipient
    groups, terms, expiry), declared in this order on the forms that ask (:class:`SharingMixin`)."""
    return (
        forms.ModelMultipleChoiceField(
            queryset=get_user_model().objects.none(),
            required=False,
            widget=forms.CheckboxSelectMultiple,
            label="Recipients (only they can see and download the release)",
        ),
        forms.ModelMultipleChoiceField(
            queryset=Group.objects.none(),
            required=False,
            widget=forms.CheckboxSelectMultiple,
            label="Recipient groups (their members who are recipients)",
        ),
        forms.CharField(
            label="Terms of use (the data sharing agreement each recipient accepts; empty: the "
            "site's default)",
            widget=forms.Textarea(attrs={"rows": 4}),
            max_length=20000,
            required=False,
        ),
        forms.DateField(
            label="Available until (last day; empty: no expiry)",
            required=False,
            widget=forms.DateInput(attrs={"type": "date"}),
        ),
    )


class SharingMixin:
    """Who receives a release and on which terms, for a form that declares
    :func:`sharing_fields`: the people and groups it may name, the terms it offers, and what
    was chosen."""

    # What the form it is mixed into has.
    fields: dict[str, forms.Field]
    cleaned_data: dict[str, Any]

    def offer_sharing(self, dataset) -> None:
        cast(
            forms.ModelMultipleChoiceField, self.fields["recipients"]
        ).queryset = recipient_choices()
        cast(
            forms.ModelMultipleChoiceField, self.fields["recipient_groups"]
        ).queryset = recipient_group_choices()
        # The dataset's project's terms, else the site's.
        self.fields["terms"].initial = default_terms(dataset)

    def sharing(self) -> Sharing:
        data = self.cleaned_data
        return Sharing(
            recipients=list(data.get("recipients") or []),
            recipient_groups=list(data.get("recipient_groups") or []),
            terms=(data.get("terms") or "").strip() or None,
            expires_at=data.get("expires_at"),
        )


class JustificationsMixin:
    """One text field per column suggested as a direct identifier that the tagging releases as
    it is: releasing it needs a written reason, kept on the request and shown to officers."""

    # What the form it is mixed into has.
    fields: dict[str, forms.Field]
    cleaned_data: dict[str, Any]

    def add_justification_fields(self, dataset) -> None:
        self.justified_columns = (
            identifiers_released_unchanged(dataset) if dataset is not None else []
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


class ProtectionMixin:
    """The checkbox "Protect earlier releases", offered when the dataset has released extracts
    (ticked by default): the search then keeps every joint class with each of them at k rows
    or more (``criteria.EarlierReleases``), and the round's parameters name them."""

    fields: dict[str, forms.Field]
    cleaned_data: dict[str, Any]
    privacy_model: PrivacyModel

    def add_protection_field(self, dataset, exclude: int | None = None, initial=None) -> None:
        self.earlier_extracts = (
            list(released_extracts(dataset, exclude=exclude)) if dataset is not None else []
        )
        if not self.earlier_extracts:
            return
        names = ", ".join(release_name(r) for r in self.earlier_extracts)
        self.fields["protect_earlier"] = forms.BooleanField(
            label="Protect earlier releases",
            required=False,
            initial=True if initial is None else initial,
            help_text=f"Search only among releases whose joint classes with each earlier "
            f"released extract of this dataset ({names}) hold at least k rows: whoever "
            "receives both cannot single people out by linking them.",
        )

    def clean_protection(self, data: dict[str, Any]) -> None:
        """Refuse the protection where it cannot work (no k, or Mondrian)."""
        if not data.get("protect_earlier") or not hasattr(self, "privacy_model"):
            return
        if data.get("algorithm") == ReleaseRequest.Algorithm.MONDRIAN:
            cast(forms.Form, self).add_error(
                "protect_earlier",
                "Mondrian recodes locally and cannot protect earlier releases; choose the "
                "optimal full-domain generalization, or untick the protection.",
            )
            return
        try:
            self.privacy_model = protected_model(self.privacy_model)
        except InvalidInput as exc:
            cast(forms.Form, self).add_error("protect_earlier", str(exc))

    def protected_parameters(self, params: ReleaseParameters) -> ReleaseParameters:
        if not protecting(params.model):
            return params
        return dataclasses.replace(
            params, earlier_releases=tuple(r.pk for r in self.earlier_extracts)
        )


class UtilityMixin:
    """Per quasi-identifier, its weight in the Loss and the lowest and highest level the search
    may choose, or its microaggregation instead of generalization (ARX's utility controls; all
    optional). A column without a weight weighs 0.5, as in ARX, and the weights count relative
    to the largest."""

    fields: dict[str, forms.Field]
    cleaned_data: dict[str, Any]

    def add_utility_fields(self, dataset, initial: ReleaseParameters | None = None) -> None:
        self.utility_columns = list(quasi_identifier_columns(dataset)) if dataset else []
        weights = (initial.weights if initial else None) or {}
        limits = (initial.level_limits if initial else None) or {}
        aggregated = (initial.microaggregate if initial else None) or {}
        for column in self.utility_columns:
            self.fields[f"aggregate-{column.pk}"] = forms.ChoiceField(
                label=f"Microaggregation of {column.name}",
                choices=[("", "generalize")]
                + [(f, describe_aggregate(f)) for f in AGGREGATE_FUNCTIONS],
                required=False,
                initial=aggregated.get(column.name, ""),
            )
            top = column.hierarchy_height - 1 if column.hierarchy_height else None
            low, high = limits.get(column.name, (None, None))
            self.fields[f"weight-{column.pk}"] = forms.DecimalField(
                label=f"Weight of {column.name}",
                min_value=0,
                max_value=1,
                decimal_places=2,
                required=False,
                initial=weights.get(column.name),
                widget=forms.NumberInput(attrs={"step": "0.1", "placeholder": "0.5"}),
            )
            for name, value, what in (("min", low, "Lowest"), ("max", high, "Highest")):
                self.fields[f"{name}-level-{column.pk}"] = forms.IntegerField(
                    label=f"{what} level of {column.name}",
                    min_value=0,
                    max_value=top,
                    required=False,
                    initial=value,
                    widget=forms.NumberInput(attrs={"placeholder": "0" if name == "min" else top}),
                )

    def utility_rows(self):
        """Per quasi-identifier: its column and its three fields (for the template)."""
        form = cast(forms.Form, self)
        return [
            {
                "column": c,
                "weight": form[f"weight-{c.pk}"],
                "min": form[f"min-level-{c.pk}"],
                "max": form[f"max-level-{c.pk}"],
                "aggregate": form[f"aggregate-{c.pk}"],
            }
            for c in self.utility_columns
        ]

    def utility_given(self) -> bool:
        """Whether a weight or a limit is filled in or wrong (the section then shows open)."""
        form = cast(forms.Form, self)
        return any(
            form[f"{name}-{c.pk}"].value() not in (None, "") or form[f"{name}-{c.pk}"].errors
            for c in self.utility_columns
            for name in ("weight", "min-level", "max-level", "aggregate")
        )

    def clean_utility(self, data: dict[str, Any]) -> None:
        form = cast(forms.Form, self)
        limited = False
        for c in self.utility_columns:
            low, high = data.get(f"min-level-{c.pk}"), data.get(f"max-level-{c.pk}")
            limited |= low is not None or high is not None
            if low is not None and high is not None and low > high:
                form.add_error(
                    f"max-level-{c.pk}",
                    f"The highest level of {c.name} ({high}) is below its lowest ({low}).",
                )
        if limited and data.get("algorithm") == ReleaseRequest.Algorithm.MONDRIAN:
            form.add_error(
                "algorithm",
                "Level limits apply to the optimal full-domain generalization, not to Mondrian: "
                "choose the optimal search, or clear the limits.",
            )
        aggregated = [c for c in self.utility_columns if data.get(f"aggregate-{c.pk}")]
        for c in aggregated:
            if (
                data.get(f"min-level-{c.pk}") is not None
                or data.get(f"max-level-{c.pk}") is not None
            ):
                form.add_error(
                    f"aggregate-{c.pk}",
                    f"{c.name} is microaggregated, not generalized: clear its level limits.",
                )
        if aggregated and data.get("algorithm") in (
            ReleaseRequest.Algorithm.MONDRIAN,
            ReleaseRequest.Algorithm.HEURISTIC,
        ):
            other = (
                "Mondrian"
                if data.get("algorithm") == ReleaseRequest.Algorithm.MONDRIAN
                else "the search within a time limit"
            )
            form.add_error(
                "algorithm",
                "Microaggregation applies to the optimal full-domain generalization, not to "
                f"{other}: choose the optimal search, or generalize every column.",
            )
        if aggregated and len(aggregated) == len(self.utility_columns):
            form.add_error(
                f"aggregate-{aggregated[0].pk}",
                "At least one quasi-identifier must be generalized: the classes are formed by the "
                "quasi-identifiers that are not microaggregated.",
            )

    def suggest_heuristic(self) -> None:
        """With :data:`HEURISTIC_SUGGESTED_FROM` or more quasi-identifiers the lattice is too
        large for the optimal search: the search within a time limit is chosen by default."""
        if len(self.utility_columns) >= HEURISTIC_SUGGESTED_FROM:
            form = cast(ModelForm, self)
            form.heuristic_suggested = True
            form.fields["algorithm"].initial = ReleaseRequest.Algorithm.HEURISTIC

    def utility_parameters(self, params: ReleaseParameters) -> ReleaseParameters:
        data = self.cleaned_data
        weights = {
            c.name: float(data[f"weight-{c.pk}"])
            for c in self.utility_columns
            if data.get(f"weight-{c.pk}") is not None
        }
        limits = {
            c.name: (data.get(f"min-level-{c.pk}"), data.get(f"max-level-{c.pk}"))
            for c in self.utility_columns
        }
        aggregated = {
            c.name: str(data[f"aggregate-{c.pk}"])
            for c in self.utility_columns
            if data.get(f"aggregate-{c.pk}")
        }
        return dataclasses.replace(
            params, weights=weights or None, level_limits=limits, microaggregate=aggregated or None
        )


class ReleaseRequestForm(
    SharingMixin, JustificationsMixin, ProtectionMixin, UtilityMixin, ModelForm
):
    """A release request: the privacy model, who receives it, on which terms, until when."""

    recipients, recipient_groups, terms, expires_at = sharing_fields()

    def __init__(self, *args, dataset=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.offer_sharing(dataset)
        self.add_justification_fields(dataset)
        self.add_protection_field(dataset)
        self.add_utility_fields(dataset)
        self.suggest_heuristic()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        self.clean_protection(data)
        self.clean_utility(data)
        return data

    def parameters(self) -> ReleaseParameters:
        return self.utility_parameters(self.protected_parameters(super().parameters()))


class ResubmitForm(JustificationsMixin, ProtectionMixin, UtilityMixin, ModelForm):
    response = forms.CharField(
        label="Your answer to the reviewers (or what changed)",
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=5000,
    )

    def __init__(
        self,
        *args,
        dataset=None,
        request_id: int | None = None,
        current: ReleaseParameters | None = None,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.add_justification_fields(dataset)
        self.add_protection_field(
            dataset, exclude=request_id, initial=self.initial.get("protect_earlier")
        )
        self.add_utility_fields(dataset, current)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        self.clean_protection(data)
        self.clean_utility(data)
        return data

    def parameters(self) -> ReleaseParameters:
        return self.utility_parameters(self.protected_parameters(super().parameters()))


class RevokeForm(forms.Form):
    reason = forms.CharField(
        label="Why is this release revoked? (shown to its recipients)",
        widget=forms.Textarea(attrs={"rows": 2}),
        max_length=5000,
    )


class SharingForm(SharingMixin, forms.Form):
    """Who receives a release and on which terms (the statistics request's part)."""

    recipients, recipient_groups, terms, expires_at = sharing_fields()
    response = forms.CharField(
        label="Your answer to the reviewers (or what changed)",
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=5000,
        required=False,
    )

    def __init__(self, *args, dataset=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.offer_sharing(dataset)
