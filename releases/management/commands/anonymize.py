"""``python manage.py anonymize``: a thin wrapper around :mod:`releases.engine.cli`.

The argument handling lives in the engine's ``cli`` module (pure Python, tested without
Django); see its docstring or ``python manage.py anonymize --help`` for the options.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from releases.engine import cli


def _without_django_options(args: list[str]) -> list[str]:
    """Drop --settings / --pythonpath, which manage.py has already applied."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("--settings", "--pythonpath"):
            skip = True
        elif not arg.startswith(("--settings=", "--pythonpath=")):
            out.append(arg)
    return out


class Command(BaseCommand):
    help = "Anonymize a table under the engine's privacy models; see --help."

    def run_from_argv(self, argv: list[str]) -> None:
        # Django's own parser would reject the engine's options (--qi, --k ...): hand the whole
        # command line to the engine's parser, which reports errors in one line, status 2.
        prog = f"{os.path.basename(argv[0])} {argv[1]}"
        status = cli.run(
            _without_django_options(argv[2:]), stdout=self.stdout, stderr=self.stderr, prog=prog
        )
        if status:
            sys.exit(status)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        # Only used by call_command("anonymize", "in.csv", "--out", ...).
        parser.add_argument("argv", nargs=argparse.REMAINDER)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cli.execute([*args, *options.get("argv", [])], stdout=self.stdout)
        except cli.CliError as exc:
            raise CommandError(" ".join(str(exc).split()), returncode=cli.EXIT_ERROR) from None
