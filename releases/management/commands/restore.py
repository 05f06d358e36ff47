"""Rebuild an empty install from a snapshot written by `manage.py backup`.

Refuses a database that holds data; checks every file of the snapshot before writing anything;
restores the database, applies the migrations, copies the files back to storage and checks
every file whose SHA-256 the database records. See docs/operations.md for the drill.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from releases.core import backup


class Command(BaseCommand):
    help = "Restore a snapshot (from `manage.py backup`) into an empty database and storage."

    def add_arguments(self, parser) -> None:
        parser.add_argument("dir", help="The snapshot's folder (holding manifest.json).")

    def handle(self, *args, **options) -> None:
        try:
            with backup.refusals():
                summary = backup.restore(Path(options["dir"]), progress=self.stdout.write)
        except backup.BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Restored from {summary.where}: {summary.files} files, and every one of the "
            f"{summary.checked} files the database records matches its SHA-256."
        )
