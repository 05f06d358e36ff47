"""Make a personal access token for a person, printed alone on the last line (for scripts)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from releases.api import tokens
from releases.core.errors import InvalidInput
from releases.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for USERNAME; the token is printed alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--expires-days", type=int, default=None, help="days until it expires (API_TOKEN_DAYS)"
        )
        parser.add_argument("--scope", choices=ApiToken.Scope.values, default=ApiToken.Scope.READ)
        parser.add_argument("--name", default="command line")

    def handle(self, *args, **options) -> None:
        try:
            user = get_user_model().objects.get(username=options["username"])
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named {options['username']!r}.") from None
        try:
            made = tokens.create_token(
                user, options["name"], options["scope"], options["expires_days"]
            )
        except InvalidInput as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Token {made.row.prefix} for {user.get_username()} ({made.row.get_scope_display()}),"
            f" expires {made.row.expires_at:%Y-%m-%d %H:%M} UTC. It is shown once:"
        )
        self.stdout.write(made.token)
