"""The dataset forms."""

from django import forms


class UploadForm(forms.Form):
    file = forms.FileField(label="File (CSV, TSV, Excel .xlsx or Parquet)", allow_empty_file=True)
    name = forms.CharField(label="Name (optional)", max_length=255, required=False)
    sheet = forms.CharField(
        label="Excel sheet (optional; the first sheet otherwise)", max_length=255, required=False
    )
    #: The project's short name; optional while the steward is in one project only.
    project = forms.CharField(label="Project", max_length=100, required=False)

    def __init__(self, *args, projects=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if projects is not None:
            choices = [(p.slug, p.name) for p in projects]
            self.fields["project"].widget = forms.Select(choices=choices)
            if len(choices) == 1:
                self.fields["project"].initial = choices[0][0]
