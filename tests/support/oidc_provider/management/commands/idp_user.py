"""Create or update a user of the test provider with exactly the groups given."""

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("password")
        parser.add_argument("--email", default="")
        parser.add_argument("--groups", default="", help="comma-separated; replaces theirs")

    def handle(self, username, password, email, groups, **options):
        user, _ = User.objects.get_or_create(username=username)
        user.set_password(password)
        user.email = email
        user.save()
        names = [name for name in groups.split(",") if name]
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in names])
