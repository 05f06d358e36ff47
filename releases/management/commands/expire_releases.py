"""Write the expired state of approved releases whose expiry date has passed.

Pages and downloads already treat such a release as expired; run this daily (cron, a systemd
timer) so the state, the audit log and the queues say so too. A starting worker also runs it.
"""

from django.core.management.base import BaseCommand

from releases.requests.services import expire_due


class Command(BaseCommand):
    help = "Mark approved releases past their expiry date as expired (audited)."

    def handle(self, *args, **options) -> None:
        count = expire_due()
        self.stdout.write(f"{count} release{'s' if count != 1 else ''} expired.")
