from django.db import migrations, models


class Migration(migrations.Migration):
    """How a round's seed orders its rows: rounds run before keep numpy's permutation (their
    reproduction writes the same bytes); new rounds get the keyed hash."""

    dependencies = [
        ("releases", "0028_project_webhooks_allowed"),
    ]

    operations = [
        migrations.AddField(
            model_name="releaserequest",
            name="shuffle_scheme",
            field=models.CharField(
                choices=[
                    ("keyed-hash", "Keyed hash of the seed and the input row"),
                    ("permutation", "Permutation drawn from the seed"),
                ],
                default="permutation",
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="releaserequest",
            name="shuffle_scheme",
            field=models.CharField(
                choices=[
                    ("keyed-hash", "Keyed hash of the seed and the input row"),
                    ("permutation", "Permutation drawn from the seed"),
                ],
                default="keyed-hash",
                max_length=20,
            ),
        ),
    ]
