"""The forms of the webhook and notification pages."""

from __future__ import annotations

from django import forms

from releases.models import Dataset, Notification, NotificationPreference


class EndpointForm(forms.Form):
    url = forms.CharField(
        label="URL (http:// or https://)",
        max_length=500,
        widget=forms.URLInput(attrs={"placeholder": "https://ci.example.org/hooks/anonymizer"}),
    )
    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.none(),
        required=False,
        empty_label="All my datasets",
        label="Only for the dataset",
    )
    active = forms.BooleanField(required=False, initial=True, label="Active")

    def __init__(self, *args, owner=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["dataset"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = Dataset.objects.filter(owner=owner).order_by("name")


class PreferencesForm(forms.Form):
    """One choice per kind of notification."""

    def __init__(self, *args, current: dict[str, str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for kind, label in Notification.Kind.choices:
            self.fields[kind] = forms.ChoiceField(
                label=label,
                choices=NotificationPreference.Delivery.choices,
                initial=current.get(kind),
                widget=forms.RadioSelect,
            )
