"""Create the three role groups and demo accounts for each role; print their passwords.

Passwords are generated on the first run and kept in ``var/demo-accounts.txt`` (outside the
repository), so running it again prints the same accounts.
"""

import json
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from releases.services import roles

DEMO_ACCOUNTS = [
    ("steward", roles.STEWARDS),
    ("officer", roles.OFFICERS),
    ("officer2", roles.OFFICERS),
    ("recipient", roles.RECIPIENTS),
]


class Command(BaseCommand):
    help = "Create demo accounts for a data steward, two privacy officers and a recipient."

    def handle(self, *args, **options) -> None:
        store = settings.VAR_DIR / "demo-accounts.txt"
        passwords = json.loads(store.read_text()) if store.exists() else {}
        user_model = get_user_model()
        for group_name in roles.ALL_GROUPS:
            Group.objects.get_or_create(name=group_name)
        for username, group_name in DEMO_ACCOUNTS:
            password = passwords.get(username) or secrets.token_urlsafe(9)
            passwords[username] = password
            user, _ = user_model.objects.get_or_create(username=username)
            user.email = f"{username}@example.org"
            user.set_password(password)
            user.save()
            user.groups.add(Group.objects.get(name=group_name))
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(passwords))
        store.chmod(0o600)
        self.stdout.write("Demo accounts (user name / password / role):")
        for username, group_name in DEMO_ACCOUNTS:
            self.stdout.write(f"  {username:<10} {passwords[username]:<14} {group_name}")
