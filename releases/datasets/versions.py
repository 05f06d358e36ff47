"""Versions of a dataset: a new file of the same data (next month's, say) uploaded as the next
version of a lineage, its columns' decisions carried over from the previous version once it is
profiled, and the lineage's key column.

A version is a dataset of its own (``Dataset.previous``, ``version``, ``root``), owned like the
first. When its profiling finishes, :func:`carry_over` compares its schema with the previous
version's and, in the same transaction, gives each column present in both the previous
column's role, hierarchy, type override, date order and declared values. A new column gets no
role (and blocks requests until the steward gives it one: ``rules.check_request``); a missing
or retyped column is named in ``Dataset.schema_changes``.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max, Q, QuerySet

from releases.core import audit
from releases.core.errors import InvalidInput
from releases.datasets import column_store, hierarchies, rules
from releases.datasets.profiles import column_profile
from releases.datasets.selectors import get_dataset_for
from releases.engine import Hierarchy, HierarchyError
from releases.models import RELEASED_ROLES, AuditEvent, Dataset, DatasetColumn, Role

#: The fields of a column a new version keeps from the previous one.
CARRIED = (
    "role",
    "hierarchy_source",
    "hierarchy_filename",
    "hierarchy_text",
    "hierarchy_height",
    "hierarchy_params",
    "type_override",
    "declared_domain",
)
Source = DatasetColumn.HierarchySource


def lineage(dataset: Dataset) -> QuerySet[Dataset]:
    """Every version of the dataset's lineage, newest first."""
    root = dataset.lineage_id
    return Dataset.objects.filter(Q(pk=root) | Q(root_id=root)).order_by("-version", "-id")


def version_fields(user, dataset: Dataset) -> dict:
    """The fields of a new version following the lineage of ``dataset`` (its owner's): it
    follows the newest version that was profiled (``InvalidInput`` when none was)."""
    dataset = get_dataset_for(user, dataset.pk)
    versions = lineage(dataset)
    previous = versions.filter(status=Dataset.Status.READY).first()
    if previous is None:
        raise InvalidInput(
            "No version of this dataset has been profiled yet: wait until its columns are "
            "shown before uploading the next version."
        )
    number = (versions.aggregate(top=Max("version"))["top"] or 1) + 1
    return {
        "previous": previous,
        "root_id": dataset.lineage_id,
        "version": number,
        "key_column": previous.key_column,
    }


# --- Carry-over (inside the profiling's final transaction) ------------------------------------


def _rebuilt(dataset: Dataset, column: DatasetColumn) -> str:
    """Rebuild a built hierarchy on the new values, or check an uploaded one still covers them;
    "" when it is fine, else why not (the hierarchy is kept, the steward decides)."""
    if not column.hierarchy_text or column.hierarchy_source == Source.AUTOMATIC:
        return ""
    values = column_store.distinct_values(dataset, column.name)
    try:
        if column.hierarchy_source == Source.UPLOADED:
            hierarchy = Hierarchy.from_arx_csv(column.hierarchy_text, attribute=column.name)
            hierarchy.validate_against(values)
            return ""
        hierarchy = hierarchies.build(
            values, column.hierarchy_source, column.hierarchy_params or {}, column.name
        )
    except HierarchyError as exc:
        return str(exc)
    column.hierarchy_text = hierarchy.to_arx_csv()
    column.hierarchy_height = hierarchy.height
    return ""


def carry_over(dataset: Dataset, columns: list[DatasetColumn]) -> dict:
    """Give ``columns`` (the new version's, not saved yet) the previous version's decisions
    and store the schema's changes on ``dataset``; returns them. Called inside the transaction
    that finishes the profiling; nothing for a first upload."""
    if dataset.previous_id is None:
        return {}
    before = {c.name: c for c in DatasetColumn.objects.filter(dataset_id=dataset.previous_id)}
    names = [c.name for c in columns]
    changes: dict = {
        "previous": dataset.previous_id,
        "new": [n for n in names if n not in before],
        "missing": [n for n in before if n not in set(names)],
        "retyped": [],
        "hierarchies": [],
    }
    for column in columns:
        old = before.get(column.name)
        if old is None:
            continue
        if old.inferred_type and old.inferred_type != column.inferred_type:
            changes["retyped"].append(
                {"name": column.name, "was": old.inferred_type, "now": column.inferred_type}
            )
        for field in CARRIED:
            setattr(column, field, getattr(old, field))
        if old.date_order and (old.type_override or old.inferred_type) == "date":
            column.date_order = old.date_order
        if column.type_override == column.inferred_type:
            column.type_override = ""
        if column.type_override:
            series = column_store.read(dataset, [column.name], categorical=True)[column.name]
            profile = column_profile(series, column.type_override, column.date_order or "")
            profile["inferred_type"] = column.inferred_type
            column.profile = profile
        problem = _rebuilt(dataset, column)
        if problem:
            changes["hierarchies"].append({"name": column.name, "problem": problem})
    Dataset.objects.filter(pk=dataset.pk).update(schema_changes=changes)
    dataset.schema_changes = changes
    audit.record(
        AuditEvent.Action.TAGGING,
        None,
        dataset=dataset,
        dataset_name=dataset.name,
        carried_over_from=dataset.previous_id,
        version=dataset.version,
        new_columns=changes["new"],
        missing_columns=changes["missing"],
        retyped_columns=[r["name"] for r in changes["retyped"]],
    )
    return changes


def change_messages(dataset: Dataset) -> list[str]:
    """The schema's changes from the previous version, as sentences for the page and the API."""
    changes = dataset.schema_changes or {}
    if not changes:
        return []
    out = []
    roles_by_name = dict(dataset.columns.values_list("name", "role"))
    for name in changes.get("new", []):
        if roles_by_name.get(name):
            out.append(f"New column {name}: given the role {Role(roles_by_name[name]).label}.")
        else:
            out.append(f"New column {name}: it needs an explicit role before any request.")
    for name in changes.get("missing", []):
        out.append(f"Missing column {name}: the previous version had it and this one does not.")
    for retyped in changes.get("retyped", []):
        out.append(
            f"Retyped column {retyped['name']}: it read as {retyped['was']} in the previous "
            f"version and as {retyped['now']} in this one."
        )
    for hierarchy in changes.get("hierarchies", []):
        out.append(
            f"The hierarchy of {hierarchy['name']} does not fit this version's values "
            f"({hierarchy['problem']}); attach another."
        )
    return out


# --- The key column -------------------------------------------------------------------------


def set_key_column(user, dataset: Dataset, name: str) -> Dataset:
    """Pick the lineage's key column (a column of every profiled version), or none (""). It is
    withheld in every version and can never be given a role that releases it."""
    dataset = get_dataset_for(user, dataset.pk)
    name = (name or "").strip()
    versions = list(lineage(dataset))
    ready = [v for v in versions if v.status == Dataset.Status.READY]
    if name:
        lacking = [
            f"version {v.version}"
            for v in ready
            if not DatasetColumn.objects.filter(dataset=v, name=name).exists()
        ]
        if lacking:
            raise InvalidInput(
                f"The key column must be a column of every version; {name!r} is not one of "
                f"{', '.join(lacking)}."
            )
    with transaction.atomic():
        Dataset.objects.filter(pk__in=[v.pk for v in versions]).update(key_column=name)
        if name:
            DatasetColumn.objects.filter(dataset__in=ready, name=name).filter(
                Q(role="") | Q(role__in=RELEASED_ROLES)
            ).update(role=Role.WITHHELD)
        audit.record(
            AuditEvent.Action.TAGGING,
            user,
            dataset=dataset,
            dataset_name=dataset.name,
            key_column=name,
            versions=[v.pk for v in versions],
        )
    dataset.key_column = name
    return dataset


def check_request(dataset: Dataset) -> None:
    """A version with an unroled new column, or without its lineage's key column, cannot be
    requested (``InvalidInput`` naming the columns)."""
    rules.check_request(
        dataset.schema_changes,
        dict(dataset.columns.values_list("name", "role")),
        dataset.key_column,
    )
