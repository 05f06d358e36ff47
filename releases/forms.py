from django import forms


class UploadForm(forms.Form):
    file = forms.FileField(label="CSV file")
    name = forms.CharField(label="Name (optional)", max_length=255, required=False)


class ReleaseRequestForm(forms.Form):
    k = forms.IntegerField(
        label="k (smallest equivalence class)", min_value=2, max_value=1_000_000, initial=5
    )
    suppression_percent = forms.DecimalField(
        label="Suppression limit (% of rows that may be removed)",
        min_value=0,
        max_value=100,
        decimal_places=2,
        initial=5,
    )


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=5000)

    def clean(self):
        data = super().clean()
        if data.get("decision") == "reject" and not (data.get("reason") or "").strip():
            self.add_error("reason", "Give a reason for rejecting the release.")
        return data
