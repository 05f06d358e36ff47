from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0027_audit_actions_merged"),
    ]

    operations = [
        migrations.AddField(
            model_name="project",
            name="webhooks_allowed",
            field=models.BooleanField(default=True),
        ),
    ]
