"""The review's forms: an officer's decision."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from releases.models import Review
from releases.requests.forms import offer
from releases.requests.selectors import recipient_choices, recipient_group_choices
from releases.requests.services import Additions
from releases.review.audit_trail import TrailFilter


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=Review.Decision.choices)
    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=5000
    )
    # Required when approving a result whose cross-release check fails (the service says so).
    justification = forms.CharField(
        label="Why do you accept the failing cross-release check? (on approval; kept in the "
        "release report and the audit log)",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=5000,
    )
    # An approving officer may name more recipients and set the expiry date.
    add_recipients = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Also name these recipients (on approval)",
    )
    add_recipient_groups = forms.ModelMultipleChoiceField(
        queryset=Group.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Also name these groups (on approval)",
    )
    expires_at = forms.DateField(
        label="Available until (on approval; empty: keep the requester's choice)",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def __init__(self, *args, justification_needed: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        #: The result fails a check an approval must accept in writing.
        self.justification_needed = justification_needed
        offer(self, "add_recipients", recipient_choices())
        offer(self, "add_recipient_groups", recipient_group_choices())

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
        if (
            self.justification_needed
            and data.get("decision") == Review.Decision.APPROVE
            and not (data.get("justification") or "").strip()
        ):
            self.add_error(
                "justification",
                "The cross-release check fails: write why you accept it to approve.",
            )
        return data


class AuditTrailForm(forms.Form):
    """Which part of the audit trail: a date range and, optionally, one dataset's number."""

    since = forms.DateField(
        label="From", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        label="Until (included)", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    dataset = forms.IntegerField(label="Dataset number", required=False, min_value=1)
    project = forms.SlugField(label="Project (short name)", required=False, max_length=100)

    def clean(self):
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "The end of the range is before its start.")
        return data

    def chosen(self) -> TrailFilter:
        data = self.cleaned_data
        return TrailFilter(
            data.get("since"), data.get("until"), data.get("dataset"), data.get("project") or None
        )
