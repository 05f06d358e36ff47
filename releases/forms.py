from decimal import Decimal

from django import forms

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


class ModelForm(forms.Form):
    """The privacy model and algorithm of a release request."""

    k = forms.IntegerField(
        label="k (smallest equivalence class)", min_value=1, max_value=1_000_000, initial=5
    )
    suppression_percent = forms.DecimalField(
        label="Suppression limit (% of rows that may be removed)",
        min_value=0,
        max_value=100,
        decimal_places=2,
        initial=5,
    )
    l_diversity = forms.FloatField(
        label="l (l-diversity of sensitive columns; empty for none)", min_value=1, required=False
    )
    l_variant = forms.ChoiceField(
        label="l-diversity variant",
        required=False,
        choices=ReleaseRequest.LVariant.choices,
        initial=ReleaseRequest.LVariant.DISTINCT,
    )
    c = forms.FloatField(label="c (recursive (c,l)-diversity)", min_value=0.0001, required=False)
    t_closeness = forms.FloatField(
        label="t (t-closeness of sensitive columns; empty for none)",
        min_value=0,
        max_value=1,
        required=False,
    )
    t_distance = forms.ChoiceField(
        label="t-closeness distance",
        required=False,
        choices=ReleaseRequest.TDistance.choices,
        initial=ReleaseRequest.TDistance.EQUAL,
    )
    algorithm = forms.ChoiceField(
        choices=ReleaseRequest.Algorithm.choices,
        initial=ReleaseRequest.Algorithm.OPTIMAL,
        required=False,
    )

    def model_fields(self):
        """The privacy model's fields (not the sharing or justification fields)."""
        return [self[name] for name in ModelForm.base_fields]

    def clean(self):
        data = super().clean()
        if data.get("l_variant") == "recursive" and data.get("l_diversity") and not data.get("c"):
            self.add_error("c", "Recursive (c,l)-diversity needs c.")
        return data

    def parameters(self) -> ReleaseParameters:
        data = self.cleaned_data
        return ReleaseParameters(
            k=data["k"],
            suppression_limit=float(data["suppression_percent"] / Decimal(100)),
            l_diversity=data.get("l_diversity"),
            l_variant=data["l_variant"] or ReleaseRequest.LVariant.DISTINCT,
            c=data.get("c"),
            t_closeness=data.get("t_closeness"),
            t_distance=data["t_distance"] or ReleaseRequest.TDistance.EQUAL,
            algorithm=data["algorithm"] or ReleaseRequest.Algorithm.OPTIMAL,
        )

    @classmethod
    def initial_from(cls, release_request: ReleaseRequest) -> dict:
        return {
            "k": release_request.k,
            "suppression_percent": Decimal(str(round(release_request.suppression_percent, 2))),
            "l_diversity": release_request.l_diversity,
            "l_variant": release_request.l_variant,
            "c": release_request.c,
            "t_closeness": release_request.t_closeness,
            "t_distance": release_request.t_distance,
            "algorithm": release_request.algorithm,
        }


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
