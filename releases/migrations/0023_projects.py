"""Projects and per-project roles. Every dataset moves into a "Default" project, and every
member of the old site-wide role groups becomes a member of it with that role, so nobody loses
access; superusers and staff become its admins."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

#: The old role groups, as the role they grant in the default project.
GROUP_ROLES = {
    "Data stewards": "steward",
    "Privacy officers": "officer",
    "Recipients": "recipient",
}


def into_default_project(apps, schema_editor):
    Project = apps.get_model("releases", "Project")
    Membership = apps.get_model("releases", "Membership")
    Dataset = apps.get_model("releases", "Dataset")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    default = Project.objects.create(
        name="Default",
        slug="default",
        required_approvals=max(1, int(getattr(settings, "REQUIRED_APPROVALS", 1))),
    )
    Dataset.objects.update(project=default)
    members = []
    for group, role in GROUP_ROLES.items():
        for user_id in User.objects.filter(groups__name=group).values_list("pk", flat=True):
            members.append(Membership(project=default, user_id=user_id, role=role))
    admins = User.objects.filter(models.Q(is_superuser=True) | models.Q(is_staff=True))
    for user_id in admins.values_list("pk", flat=True):
        members.append(Membership(project=default, user_id=user_id, role="admin"))
    Membership.objects.bulk_create(members)


def back_to_groups(apps, schema_editor):
    """Memberships of the default project back into the role groups."""
    Group = apps.get_model("auth", "Group")
    Membership = apps.get_model("releases", "Membership")
    for group, role in GROUP_ROLES.items():
        found = Group.objects.get_or_create(name=group)[0]
        users = Membership.objects.filter(project__slug="default", role=role)
        found.user_set.add(*users.values_list("user_id", flat=True))


class Migration(migrations.Migration):

    dependencies = [
        ("releases", "0022_audit_export_action"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.CreateModel(
            name="Project",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=200)),
                ("slug", models.SlugField(max_length=100, unique=True)),
                ("required_approvals", models.PositiveSmallIntegerField(default=1)),
                ("default_terms", models.TextField(blank=True)),
                ("default_expiry_days", models.PositiveIntegerField(blank=True, null=True)),
                ("epsilon_total", models.DecimalField(blank=True, decimal_places=12, max_digits=18, null=True)),
                ("stewards_see_all", models.BooleanField(default=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["name", "id"],
                "constraints": [
                    models.CheckConstraint(condition=models.Q(("required_approvals__gte", 1)), name="project_approvals_at_least_one"),
                    models.CheckConstraint(condition=models.Q(("epsilon_total__isnull", True), ("epsilon_total__gte", 0), _connector="OR"), name="project_epsilon_not_negative"),
                ],
            },
        ),
        migrations.CreateModel(
            name="Membership",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("role", models.CharField(choices=[("steward", "Data steward"), ("officer", "Privacy officer"), ("recipient", "Recipient"), ("admin", "Project admin")], max_length=16)),
                ("project", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="memberships", to="releases.project")),
                ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="memberships", to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "ordering": ["project", "user__username", "role"],
                "constraints": [models.UniqueConstraint(fields=("project", "user", "role"), name="membership_unique")],
            },
        ),
        migrations.AddField(
            model_name="dataset",
            name="project",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name="datasets", to="releases.project"),
        ),
        migrations.RunPython(into_default_project, back_to_groups),
        migrations.AlterField(
            model_name="dataset",
            name="project",
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="datasets", to="releases.project"),
        ),
        migrations.AlterField(
            model_name='auditevent',
            name='action',
            field=models.CharField(choices=[('upload', 'Uploaded dataset'), ('upload_rejected', 'Upload rejected'), ('tagging', 'Changed tagging'), ('request', 'Requested release'), ('run_start', 'Run started'), ('run_end', 'Run finished'), ('run_failed', 'Run failed'), ('run_retried', 'Run queued again after its worker stopped'), ('profiling_retried', 'Profiling queued again after its worker stopped'), ('resubmit', 'Resubmitted'), ('review', 'Reviewed'), ('download', 'Downloaded extract'), ('profiled', 'Profiled dataset'), ('delete', 'Deleted dataset'), ('budget_set', 'Set privacy budget'), ('budget_spend', 'Spent privacy budget'), ('cancel', 'Cancelled'), ('run_cancelled', 'Run stopped after cancellation'), ('recipients', 'Named recipients'), ('terms_accepted', 'Accepted the terms of use'), ('download_refused', 'Download refused'), ('revoke', 'Revoked'), ('expire', 'Expired'), ('reproduce', 'Asked for a reproduction'), ('reproduced', 'Reproduced'), ('recheck', 'Found breaking the statistics rules'), ('attacker_file', 'Attached an attacker file'), ('linked', 'Linked the attacker file to the extract'), ('token_created', 'Created an API token'), ('token_revoked', 'Revoked an API token'), ('token_refused', 'Refused an API token'), ('login_locked', 'Locked a user name after failed sign-ins'), ('login_released', 'Released a locked user name'), ('audit_export', 'Exported the audit trail'), ('project_created', 'Created a project'), ('project_settings', "Changed a project's settings"), ('membership', "Changed a project's members"), ('dataset_moved', 'Moved a dataset to another project')], max_length=32),
        ),
        migrations.AlterField(
            model_name='privacybudget',
            name='set_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
    ]
