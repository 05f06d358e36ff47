"""Write a snapshot of the install (database and stored files) to a new folder.

Runs beside the app: the database is copied consistently (SQLite's online backup API,
PostgreSQL's pg_dump), then every stored file. See docs/operations.md for the drill.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from releases.core import backup


def megabytes(count: int) -> str:
    return f"{count / 1024**2:,.1f} MB"


class Command(BaseCommand):
    help = "Write a snapshot (database, stored files, manifest.json) to DIR, a new folder."

    def add_arguments(self, parser) -> None:
        parser.add_argument("dir", help="A folder that does not exist yet, or an empty one.")

    def handle(self, *args, **options) -> None:
        try:
            with backup.refusals():
                summary = backup.backup(Path(options["dir"]))
        except backup.BackupError as exc:
            raise CommandError(str(exc)) from None
        for line in summary.warnings:
            self.stderr.write(f"Warning: {line}.")
        self.stdout.write(
            f"Backed up the database ({megabytes(summary.database_bytes)}) and "
            f"{summary.files} files ({megabytes(summary.file_bytes)}) to {summary.where}."
        )
