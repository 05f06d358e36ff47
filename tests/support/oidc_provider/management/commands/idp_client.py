"""Register (or update) the app as a confidential client of the test provider."""

from django.core.management.base import BaseCommand
from oauth2_provider.models import Application


class Command(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("client_id")
        parser.add_argument("client_secret")
        parser.add_argument("redirect_uri")
        parser.add_argument("post_logout_redirect_uri")

    def handle(self, client_id, client_secret, redirect_uri, post_logout_redirect_uri, **options):
        Application.objects.filter(client_id=client_id).delete()
        Application.objects.create(
            name="Anonymizer",
            client_id=client_id,
            client_secret=client_secret,
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=redirect_uri,
            post_logout_redirect_uris=post_logout_redirect_uri,
            algorithm=Application.RS256_ALGORITHM,
            skip_authorization=True,
        )
