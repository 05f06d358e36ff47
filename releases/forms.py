from decimal import Decimal

from django import forms

from .models import ReleaseRequest, Review
from .services.release import ReleaseParameters


class UploadForm(forms.Form):
    file = forms.FileField(label="File (CSV, TSV, Excel .xlsx or Parquet)", allow_empty_file=True)
    name = forms.CharField(label="Name (optional)", max_length=255, required=False)
    sheet = forms.CharField(
        label="Excel sheet (optional; the first sheet otherwise)", max_length=255, required=False
    )


class ReleaseRequestForm(forms.Form):
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


class ResubmitForm(ReleaseRequestForm):
    response = forms.CharField(
        label="Your answer to the reviewers",
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=5000,
    )


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=Review.Decision.choices)
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=5000
    )

    def clean(self):
        data = super().clean()
        if (
            data.get("decision") in (Review.Decision.CHANGES, Review.Decision.REJECT)
            and not (data.get("comment") or "").strip()
        ):
            self.add_error("comment", "Give a comment when you request changes or reject.")
        return data
