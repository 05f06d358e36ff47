"""The statistics release's part of the release report (``review.report`` builds the report):
the methods note per query (mechanism, ε, δ, bounds, error at 95 %, privacy unit, composition)
with the noisy values, the privacy figures and the budget, and the compliance checklist. Noisy
values only: nothing of the original is in it.
"""

from __future__ import annotations

from releases.engine import dp
from releases.models import (
    ReleaseRequest,
)
from releases.requests.kinds import DONE, NOT_APPLICABLE, OPEN, checklist_item


def methods(result: dict) -> list[dict]:
    """Per query, the methods note: what it is, mechanism, ε, δ, bounds, error at 95 %."""
    notes = []
    for r in result.get("results", []):
        query = r.get("query") or {}
        bounds = [query["lower"], query["upper"]] if "lower" in query and "upper" in query else None
        notes.append(
            {
                "query": r["index"] + 1,
                "kind": r["kind"],
                "statistic": r["description"],
                "mechanism": r["mechanism"],
                "epsilon": r["epsilon"],
                "delta": r["delta"],
                "bounds": bounds,
                "groups": query.get("by", []),
                "labels": [dp.describe_grouping(g) for g in query.get("by", [])],
                "noise_scale": r["scale"],
                "sensitivity": r["sensitivity"],
                "error_95": r["error"],
                "error_kind": r["error_kind"],
                "error_note": r["error_note"],
            }
        )
    return notes


def body(release_request: ReleaseRequest, audience: str, files: list[dict]) -> dict:
    """The report's dataset and tables, then the methods note per query with its noisy value,
    the privacy figures and the budget. Both audiences get them: the noisy statistics are the
    release, nothing of the original is in it."""
    return {
        "dataset": {"name": release_request.dataset.name, "sha256": release_request.dataset.sha256},
        "extract": {
            "sha256": release_request.extract_sha256,
            "package_sha256": release_request.package_sha256,
            "files": files,
            "not_offered": {},
        },
        **_statistics_sections(release_request),
    }


def _statistics_sections(release_request: ReleaseRequest) -> dict:
    """The statistics part of the release report: the methods note per query with its noisy
    value, the privacy figures and the budget. Noisy values only: nothing of the original."""
    summary = release_request.summary or {}
    result = summary.get("result") or {}
    notes = methods(result)
    for note, r in zip(notes, result.get("results", []), strict=False):
        note["value"] = r["value"]
        note["error_95"] = r["error"]
        note["rows"] = dp.QueryResult.from_dict(r).table_rows()
    spend = summary.get("budget") or {}
    return {
        "statistics": {
            "queries": notes,
            "epsilon": summary.get("epsilon"),
            "delta": summary.get("delta"),
            "confidence": result.get("confidence"),
            "privacy_unit": result.get("privacy_unit"),
            "composition": result.get("composition"),
            "opendp_version": result.get("opendp_version"),
            "result_sha256": summary.get("result_sha256"),
        },
        "budget": {
            "epsilon_spent": spend.get("epsilon"),
            "delta_spent": spend.get("delta"),
            "before": spend.get("before"),
            "after": spend.get("after"),
            "spent_at": spend.get("spent_at"),
        },
    }


def compliance(release_request: ReleaseRequest, files: list) -> list[dict]:
    """The checklist items of a statistics release, each from facts the app holds."""
    summary = release_request.summary or {}
    items = []
    if summary.get("result"):
        items.append(
            checklist_item(
                "mechanisms",
                "Noise from a vetted library, drawn once",
                DONE,
                f"OpenDP {summary['result'].get('opendp_version')}: every mechanism and the "
                "accounting; the noise was drawn once, in the worker, and reviewed as stored.",
            )
        )
        items.append(
            checklist_item(
                "budget",
                "Within the dataset's privacy budget",
                DONE if summary.get("budget") else OPEN,
                f"ε {summary['budget']['epsilon']} spent of the ε {summary['budget']['before']} "
                f"that remained; ε {summary['budget']['after']} remains."
                if summary.get("budget")
                else "No spend is recorded.",
            )
        )
        bounded = [q for q in release_request.queries if "lower" in q and "upper" in q]
        items.append(
            checklist_item(
                "bounds",
                "Bounds set by the steward, not taken from the data",
                DONE if bounded else NOT_APPLICABLE,
                f"{len(bounded)} quer{'y clamps its' if len(bounded) == 1 else 'ies clamp their'} "
                "values to the bounds the steward typed."
                if bounded
                else "No query needs bounds.",
            )
        )
    else:
        items.append(checklist_item("result", "Noisy results", OPEN, "No result yet."))
    named = release_request.recipients.count() + release_request.recipient_groups.count()
    if not release_request.terms.strip():
        status, reason = OPEN, "The release has no terms of use."
    elif not named:
        status, reason = OPEN, "No recipient is named on the release."
    else:
        status, reason = DONE, "Terms of use for the named recipients, accepted before download."
    items.append(checklist_item("agreement", "Data sharing agreement in place", status, reason))
    items.append(
        checklist_item(
            "files",
            "Files bound to the review",
            DONE if files else OPEN,
            "CSV and JSON with their SHA-256, approved as a package." if files else "No files yet.",
        )
    )
    return items
