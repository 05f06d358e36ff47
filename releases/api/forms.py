"""The token page's form."""

from __future__ import annotations

from django import forms
from django.conf import settings

from releases.models import ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(label="Name (what the token is for)", max_length=100)
    scope = forms.ChoiceField(
        choices=ApiToken.Scope.choices,
        initial=ApiToken.Scope.READ,
        widget=forms.RadioSelect,
    )
    expires_days = forms.IntegerField(label="Expires after (days)", min_value=1)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["expires_days"]
        field.initial = settings.API_TOKEN_DAYS
        field.widget.attrs["max"] = str(settings.API_TOKEN_MAX_DAYS)
        field.help_text = f"At most {settings.API_TOKEN_MAX_DAYS} days (API_TOKEN_MAX_DAYS)."
