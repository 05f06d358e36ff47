"""The project pages' forms: a project's settings, a member's roles, a dataset's move."""

from __future__ import annotations

from decimal import Decimal

from django import forms

from releases.models import Membership, Project
from releases.projects.services import Settings

ROLE_CHOICES = Membership.Role.choices


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.SlugField(
        label="Short name (in addresses; fixed once created)", max_length=100, required=False
    )
    required_approvals = forms.IntegerField(
        label="Approvals a request needs", min_value=1, max_value=10, initial=1
    )
    default_terms = forms.CharField(
        label="Default terms of use (empty: the site's)",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=20000,
    )
    default_expiry_days = forms.IntegerField(
        label="Days until a release expires (empty: no default)",
        min_value=1,
        max_value=3650,
        required=False,
    )
    epsilon_total = forms.DecimalField(
        label="Default total ε per dataset (empty: none)",
        min_value=Decimal(0),
        max_value=Decimal(100_000),
        decimal_places=12,
        required=False,
    )
    stewards_see_all = forms.BooleanField(
        label="Stewards see all of the project's datasets (not only their own)", required=False
    )
    webhooks_allowed = forms.BooleanField(
        label="Webhooks allowed (a signed POST to the stewards' addresses on each change of state)",
        required=False,
        initial=True,
    )

    def __init__(self, *args, creating: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if creating:
            self.fields["slug"].required = True
        else:
            del self.fields["slug"]

    @classmethod
    def of(cls, project: Project, data=None) -> ProjectForm:
        initial = {
            "name": project.name,
            "required_approvals": project.required_approvals,
            "default_terms": project.default_terms,
            "default_expiry_days": project.default_expiry_days,
            "epsilon_total": project.epsilon_total,
            "stewards_see_all": project.stewards_see_all,
            "webhooks_allowed": project.webhooks_allowed,
        }
        return cls(data, initial=initial, creating=False)

    def settings(self) -> Settings:
        data = self.cleaned_data
        return Settings(
            name=data["name"].strip(),
            required_approvals=data["required_approvals"],
            default_terms=data["default_terms"] or "",
            default_expiry_days=data["default_expiry_days"],
            epsilon_total=data["epsilon_total"],
            stewards_see_all=data["stewards_see_all"],
            webhooks_allowed=data["webhooks_allowed"],
        )


class MemberForm(forms.Form):
    """A member's roles: add someone by user name, or change (none: remove) their roles."""

    username = forms.CharField(label="User name", max_length=150)
    roles = forms.MultipleChoiceField(
        choices=ROLE_CHOICES, widget=forms.CheckboxSelectMultiple, required=False
    )


class MoveForm(forms.Form):
    project = forms.SlugField(label="Move to project (short name)", max_length=100)
