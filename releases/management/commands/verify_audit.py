"""Check the audit log's hash chain: every event's hash covers its content and the event
before it, so an event edited, deleted or inserted in the database shows as the first broken
link. Exits 1 naming it, 0 when the chain holds; prints the newest hash, which an auditor keeps
to notice later that the newest events were removed."""

from django.core.management.base import BaseCommand, CommandError

from releases.core.audit import verify_chain
from releases.models import AuditEvent


class Command(BaseCommand):
    help = "Verify the audit log's hash chain (exit 1 at the first broken link)."

    def handle(self, *args, **options) -> None:
        checked, broken = verify_chain()
        if broken is not None:
            raise CommandError(
                f"The audit log's chain is broken at event #{broken.event_id}: {broken.problem} "
                f"({checked} events before it hold)."
            )
        head = AuditEvent.objects.order_by("-id").values_list("id", "hash").first()
        if head is None:
            self.stdout.write("The audit log is empty.")
            return
        self.stdout.write(
            f"The audit log's chain holds: {checked} events, the newest #{head[0]} "
            f"with hash {head[1]}."
        )
