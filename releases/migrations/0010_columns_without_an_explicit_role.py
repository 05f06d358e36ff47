"""Columns tagged "insensitive" only by the old default lose that role.

"Insensitive (kept as is)" used to be every column's default, so nothing tells a column the
steward chose to release as is from one nobody looked at: both become "no role yet" (withheld),
and the steward decides again before the next request. Requests already made keep their
snapshot. Reversing gives every column without a role the old default back.
"""

from django.db import migrations


def clear_default_roles(apps, schema_editor):
    DatasetColumn = apps.get_model("releases", "DatasetColumn")
    DatasetColumn.objects.filter(role="insensitive").update(role="")


def restore_default_roles(apps, schema_editor):
    DatasetColumn = apps.get_model("releases", "DatasetColumn")
    DatasetColumn.objects.filter(role="").update(role="insensitive")


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0009_roles_recipients_package_lifecycle"),
    ]

    operations = [
        migrations.RunPython(clear_default_roles, restore_default_roles),
    ]
