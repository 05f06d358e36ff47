"""A release at scale, built in seconds: many equivalence classes and audit events inserted in
bulk next to a real (small) run, for tests of what pages read and for bench/pages.py."""

from __future__ import annotations

import random

from releases.models import AuditEvent, EquivalenceClass, ReleaseRequest

BATCH = 5000


def add_classes(release_request: ReleaseRequest, count: int, seed: int = 7) -> None:
    """``count`` more classes on the request: values over its quasi-identifiers, sizes from k
    up, per sensitive attribute a few value counts; those at k only just pass (flagged)."""
    rng = random.Random(seed)
    qis = [q["name"] for q in release_request.config.get("quasi_identifiers", [])]
    sensitive = release_request.config.get("sensitive", [])
    k = release_request.privacy_model.k
    rows = []
    for i in range(count):
        size = k + int(rng.expovariate(1 / 20))
        values = {q: f"{q}-{(i * (j + 7)) % (50 + 13 * j)}" for j, q in enumerate(qis)}
        split = rng.randint(1, size)
        borderline = ["k"] if size == k else []
        rows.append(
            EquivalenceClass(
                request=release_request,
                values=values,
                size=size,
                risk=1.0 / size,
                sensitive={
                    name: {
                        "values": {"a": split, "b": size - split} if split < size else {"a": size},
                        "distinct_l": 2 if split < size else 1,
                        "entropy_l": 1.5,
                        "t": 0.1,
                    }
                    for name in sensitive
                },
                fails=[],
                borderline=borderline,
                flagged=bool(borderline),
                search=EquivalenceClass.search_text(values),
            )
        )
        if len(rows) == BATCH:
            EquivalenceClass.objects.bulk_create(rows)
            rows = []
    EquivalenceClass.objects.bulk_create(rows)


def add_downloads(release_request: ReleaseRequest, user, count: int) -> None:
    """``count`` downloads of the CSV by ``user`` in the request's audit log."""
    rows = []
    for _ in range(count):
        rows.append(
            AuditEvent(
                action=AuditEvent.Action.DOWNLOAD,
                actor=user,
                dataset_id=release_request.dataset_id,
                request=release_request,
                detail={"file": "csv", "sha256": release_request.extract_sha256},
            )
        )
        if len(rows) == BATCH:
            AuditEvent.objects.bulk_create(rows)
            rows = []
    AuditEvent.objects.bulk_create(rows)
