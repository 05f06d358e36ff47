"""Re-check every open or approved statistics release against the rules of 0015.

A statistics query may read only the columns chosen for release (quasi-identifiers, sensitive
columns, columns released as is), and a histogram's labels are published as they are, so they
must come from a public source or a private key release. Before 0015 neither was checked, and
the request form could fill a histogram's categories with the column's values from the data
without recording it. So:

* a query reading a direct identifier, a withheld column or a column with no role breaks the
  rules;
* a grouping stored with categories and no ``source`` has labels of unknown origin (they may
  have come from the data): it breaks them too.

An open request (queued, running, ready for review) that breaks them goes back to its steward
("changes requested") with the reason; an approved one is listed for the privacy officers to
revoke (``recheck_reason``, shown on its page and in the review queue). Each finding is written
to the audit log. Self-contained on purpose: a migration must not import the app's services,
whose models move on.
"""

from django.db import migrations
from django.utils import timezone

OPEN_STATES = ("queued", "running", "ready")
APPROVED = "approved"
RELEASED_ROLES = {"quasi", "sensitive", "insensitive"}
ROLE_WORDS = {"identifier": "a direct identifier", "withheld": "withheld", "": "a column with no role"}


def _columns_of(item: dict) -> list[str]:
    names = [item["column"]] if item.get("column") else []
    names += [g.get("column", "") for g in item.get("by", []) if isinstance(g, dict)]
    return list(dict.fromkeys(n for n in names if n))


def problems_of(queries: list, columns: dict) -> list[str]:
    """What in these stored queries breaks the rules, one phrase each."""
    problems = []
    for number, item in enumerate(queries or [], start=1):
        if not isinstance(item, dict):
            continue
        for name in _columns_of(item):
            column = columns.get(name)
            role = column.role if column is not None else ""
            if role not in RELEASED_ROLES:
                problems.append(f"query {number} uses {name}, which is {ROLE_WORDS.get(role, 'not released')}")
        if item.get("kind") != "histogram":
            continue
        for grouping in item.get("by", []):
            if not isinstance(grouping, dict) or "source" in grouping:
                continue
            categories = grouping.get("categories") or []
            if not categories:
                continue
            column = columns.get(grouping.get("column", ""))
            distinct = f"; the column has {column.distinct_values} distinct values" if column else ""
            problems.append(
                f"query {number} groups by {grouping.get('column')} with {len(categories)} labels "
                f"whose origin was not recorded{distinct} (they may have been filled in from the data)"
            )
    return problems


def recheck(apps, schema_editor):
    ReleaseRequest = apps.get_model("releases", "ReleaseRequest")
    AuditEvent = apps.get_model("releases", "AuditEvent")
    now = timezone.now()
    found = ReleaseRequest.objects.filter(
        kind="statistics", state__in=(*OPEN_STATES, APPROVED)
    ).select_related("dataset")
    for release_request in found.iterator():
        columns = {c.name: c for c in release_request.dataset.columns.all()}
        problems = problems_of(release_request.queries, columns)
        if not problems:
            continue
        reason = (
            "This statistics release breaks the rules on what a release may publish: "
            + "; ".join(problems)
            + ". Statistics may use only columns chosen for release, and labels typed, from the "
            "hierarchy or the declared values, or from the data released privately."
        )
        before = release_request.state
        fields = ["recheck_reason", "rechecked_at"]
        if before in OPEN_STATES:
            outcome = "returned to the steward"
            release_request.state = "changes"
            release_request.stage = "Returned to the steward by the statistics re-check"
            release_request.error = reason
            release_request.worker = ""
            fields += ["state", "stage", "error", "worker"]
        else:
            outcome = "listed for revocation"
        release_request.recheck_reason = reason
        release_request.rechecked_at = now
        release_request.save(update_fields=fields)
        AuditEvent.objects.create(
            action="recheck",
            actor=None,
            dataset_id=release_request.dataset_id,
            request=release_request,
            detail={
                "outcome": outcome,
                "state_before": before,
                "state_after": release_request.state,
                "problems": problems,
                "dataset_name": release_request.dataset.name,
            },
        )


class Migration(migrations.Migration):
    dependencies = [("releases", "0015_statistics_columns_and_labels")]

    operations = [migrations.RunPython(recheck, migrations.RunPython.noop)]
