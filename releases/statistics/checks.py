"""What a statistics round must satisfy before approval: its results are there and are those in
its files; every column it reads is one chosen for release; every label comes from a public
source or a private key release; the noise hides one row where few rows stand behind a cell;
its spend is in the ledger; the files are the stored bytes. They read the stored result only.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import cast

from releases.core import roles, storage
from releases.datasets import budget
from releases.engine import Check, dp
from releases.models import (
    Dataset,
    ReleaseFile,
    ReleaseRequest,
    Role,
)
from releases.statistics.queries import amount, column_roles, role_problems

Format = ReleaseFile.Format


#: The check whose figures only privacy officers see (the exact counts behind the cells).
TRUE_COUNTS_CHECK = "smallest true count"


def checks(release_request: ReleaseRequest) -> list[Check]:
    """What a statistics round must satisfy before approval: its results are there and are
    those in its files; every column it reads is one chosen for release; every label comes
    from a public source or a private key release; the noise hides one row where few rows
    stand behind a cell; its spend is in the ledger; the files are the stored bytes."""
    summary = release_request.summary or {}
    result = summary.get("result")
    if not result:
        return [Check("result", False, "There is no result to check.")]
    out = []
    expected = len(release_request.queries or [])
    got = len(result.get("results", []))
    sha = hashlib.sha256(dp.canonical_json(result)).hexdigest()
    out.append(
        Check(
            "results",
            got == expected and sha == summary.get("result_sha256"),
            f"{got} results for {expected} queries, SHA-256 {sha[:12]}…"
            if sha == summary.get("result_sha256")
            else "the stored results do not match their SHA-256",
        )
    )
    queries = dp.queries_from_list(release_request.queries)
    out.append(columns_check(release_request.dataset, queries))
    out.append(label_check(release_request.queries, result))
    out.append(true_counts_check(summary))
    out.append(_budget_check(release_request, queries))
    out.append(_files_check(release_request, summary))
    return out


def columns_check(dataset: Dataset, queries: list[dp.Query]) -> Check:
    """Every column the queries read has a role that releases it (the roles as they are now)."""
    roles = column_roles(dataset)
    problems = role_problems(queries, roles)
    if problems:
        return Check("columns used", False, " ".join(problems))
    used = list(dict.fromkeys(c for q in queries for c in q.columns))
    if not used:
        return Check("columns used", True, "no column is read (a count of rows)")
    names = ", ".join(f"{c} ({Role(roles[c]).label.split(' (')[0].lower()})" for c in used)
    return Check("columns used", True, f"{names}: each chosen for release")


def label_sources(items: list[dict]) -> list[dict]:
    """Per histogram grouping of the stored queries: where its labels come from, in words, and
    whether that source may be published. A grouping stored without its source (requested
    before sources were recorded) with categories has labels of unknown origin: they may have
    been filled in from the data, so they may not."""
    out = []
    for number, item in enumerate(items, start=1):
        if item.get("kind") != "histogram":
            continue
        for grouping in item.get("by", []):
            unrecorded = "source" not in grouping and bool(grouping.get("categories"))
            from_data = grouping.get("source") == dp.DATA
            out.append(
                {
                    "query": number,
                    "column": grouping.get("column", ""),
                    "words": dp.describe_grouping(grouping),
                    "from_data": from_data,
                    "allowed": not unrecorded and (not from_data or bool(item.get("delta"))),
                }
            )
    return out


def label_check(items: list[dict], result: dict) -> Check:
    """Labels are public knowledge, or from the data through a private key release (which the
    run must have used: its mechanism is the threshold)."""
    sources = label_sources(items)
    if not sources:
        return Check("label sources", True, "no histogram: no label is published")
    mechanisms = {r["index"] + 1: r.get("mechanism", "") for r in result.get("results", [])}
    problems = []
    for s in sources:
        if not s["allowed"]:
            problems.append(
                f"query {s['query']}, {s['words']} (they may have been filled in from the data)"
            )
        elif s["from_data"] and "threshold" not in mechanisms.get(s["query"], ""):
            problems.append(
                f"query {s['query']}, {s['column']}: labels from the data without a private "
                "key release"
            )
    if problems:
        return Check(
            "label sources",
            False,
            "; ".join(problems) + ". Labels are published as they are: resubmit with labels "
            "typed, from the hierarchy or the declared values, or from the data released "
            "privately.",
        )
    return Check(
        "label sources", True, "; ".join(f"query {s['query']}, {s['words']}" for s in sources)
    )


def true_counts_check(summary: dict) -> Check:
    """The smallest true count behind a published cell, and whether the noise hides one row
    where few rows stand behind a cell (fails when a small cell is released nearly exact)."""
    counted = summary.get("true_counts")
    if counted is None:
        return Check(
            TRUE_COUNTS_CHECK,
            True,
            "not counted: this round ran before true counts were recorded (re-run it to see them)",
        )
    occupied = [c for c in counted if c.get("smallest") is not None]
    if not occupied:
        return Check(TRUE_COUNTS_CHECK, True, "no published cell holds a row")
    low = min(occupied, key=lambda c: c["smallest"])
    where = f"query {low['query']}" + (f", cell {low['cell']!r}" if low["cell"] else "")
    small = sum(c["small_cells"] for c in counted)
    exposed = [c for c in counted if c["small_cells"] and not c["hides_one_row"]]
    detail = (
        f"{low['smallest']} row{'s' if low['smallest'] != 1 else ''} ({where}); "
        f"{small} published cell{'s' if small != 1 else ''} hold fewer than {dp.SMALL_CELL} rows"
    )
    if exposed:
        queries = ", ".join(str(c["query"]) for c in exposed)
        return Check(
            TRUE_COUNTS_CHECK,
            False,
            f"{detail}; the noise of quer{'y' if len(exposed) == 1 else 'ies'} {queries} is "
            "smaller than one row's effect, so it hides nothing: lower its ε",
        )
    return Check(TRUE_COUNTS_CHECK, True, f"{detail}; the noise hides one row in each query")


def _budget_check(release_request: ReleaseRequest, queries: list[dp.Query]) -> Check:
    spent = budget.spend_of_round(release_request, release_request.round)
    epsilon, delta = amount(queries)
    if spent is None:
        return Check("privacy budget spent", False, "no spend of this round is in the ledger")
    return Check(
        "privacy budget spent",
        cast(Decimal, spent.epsilon) >= epsilon and cast(Decimal, spent.delta) >= delta,
        f"ε {budget.show(spent.epsilon)}"
        + (f" and δ {budget.show(spent.delta)}" if spent.delta else "")
        + f" spent (line {spent.pk} of the ledger) for the queries' ε {budget.show(epsilon)}"
        + (f" and δ {budget.show(delta)}" if delta else ""),
    )


def checks_for(user, release_request: ReleaseRequest) -> list[Check]:
    """The checks as ``user`` may see them: the exact counts behind the cells are for privacy
    officers only (the line stays, its figures are withheld from anyone else)."""
    found = checks(release_request)
    if user is not None and roles.has_role(user, roles.OFFICER, release_request.dataset.project_id):
        return found
    return [
        Check(c.name, c.passed, "shown to privacy officers only")
        if c.name == TRUE_COUNTS_CHECK
        else c
        for c in found
    ]


def _files_check(release_request: ReleaseRequest, summary: dict) -> Check:
    files = {f.format: f for f in release_request.files.filter(round=release_request.round)}
    missing = [fmt for fmt in (Format.CSV, Format.JSON) if fmt not in files]
    if missing:
        return Check("files", False, f"no {' or '.join(missing).upper()} file for this round")
    for stored in files.values():
        if not storage.exists(stored.path) or storage.sha256_of(stored.path) != stored.sha256:
            return Check(
                "files", False, f"the {stored.get_format_display()} file is not the stored bytes"
            )
    content = json.loads(storage.read_bytes(files[Format.JSON].path))
    inside = dp.canonical_json(content.get("result"))
    if storage.sha256_hex(inside) != summary.get("result_sha256"):
        return Check("files", False, "the JSON file does not hold the results shown here")
    return Check("files", True, "CSV and JSON stored intact; the JSON holds the results shown")
