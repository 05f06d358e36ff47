"""The dataset forms."""

from django import forms


class UploadForm(forms.Form):
    file = forms.FileField(label="File (CSV, TSV, Excel .xlsx or Parquet)", allow_empty_file=True)
    name = forms.CharField(label="Name (optional)", max_length=255, required=False)
    sheet = forms.CharField(
        label="Excel sheet (optional; the first sheet otherwise)", max_length=255, required=False
    )
