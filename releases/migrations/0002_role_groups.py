from django.db import migrations

GROUPS = ["Data stewards", "Privacy officers", "Recipients"]


def create_groups(apps, schema_editor):
    group_model = apps.get_model("auth", "Group")
    for name in GROUPS:
        group_model.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
