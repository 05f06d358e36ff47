"""Register a dataset whose original stays where it is: a file in a server folder an
administrator allows (DATA_IMPORT_DIRS), an S3 object (s3://bucket/key) or a PostgreSQL table
or query (postgres://NAME?table=T, postgres://NAME?query=SELECT ...). The worker profiles it in
place. See docs/guide-administrator.md."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError, CommandParser

from releases.core.errors import InvalidInput
from releases.datasets import registration


class Command(BaseCommand):
    help = (
        "Register SOURCE (a server path, s3://bucket/key, or postgres://NAME?table=T or "
        "?query=SELECT ...) as a dataset of the steward --owner in the project --project; a "
        "worker profiles it where it stays."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source")
        parser.add_argument("--project", required=True, help="the project's short name")
        parser.add_argument("--owner", required=True, help="the steward it belongs to")
        parser.add_argument("--name", default="", help="the dataset's name (default: the file's)")

    def handle(self, *args, **options) -> None:
        try:
            owner = get_user_model().objects.get(username=options["owner"])
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named {options['owner']!r}.") from None
        try:
            dataset = registration.register_dataset(
                None, options["source"], options["project"], owner, options["name"]
            )
        except (InvalidInput, PermissionDenied) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Registered dataset {dataset.pk} ({dataset.name}) from {dataset.source_locator} in "
            f"{dataset.project.name}; a worker profiles it in place."
        )
