"""The extract's part of the release report (``review.report`` builds the report; this is what
the extract kind supplies to it): what was released and how, the privacy models requested and
achieved, figures computed on the released rows, the compliance checklist, and for officers and
the requester what was computed on the original and what a reproduction needs.

Recipients get nothing computed on the original data except two counts (rows in, rows
suppressed), and neither hierarchies nor the shuffle's seed (which would undo the random order).
"""

from __future__ import annotations

from django.db.models import Count

from releases.core import figures
from releases.engine import EngineError
from releases.engine.criteria import REGISTRY, DataContext, criterion_from_spec
from releases.engine.microaggregation import describe as describe_aggregate
from releases.models import UNCHANGED_ROLES, ReleaseRequest, Reproduction, Role
from releases.requests import package
from releases.requests.kinds import (
    DONE,
    NOT_APPLICABLE,
    OPEN,
    REVIEWER,
    checklist_item,
    iso,
)

RECOMMENDED_K = 5


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


def _one_of(labels: list[str]) -> str:
    """The labels as "a, b or c"."""
    return " or ".join(filter(None, [", ".join(labels[:-1]), *labels[-1:]]))


def compliance(release_request: ReleaseRequest, files: list, approvals: list) -> list[dict]:
    """The checklist a data protection officer asks for, each item from facts the app holds."""
    summary = release_request.summary or {}
    snapshot = release_request.config or {}
    roles = snapshot.get("roles", {})
    suggested = snapshot.get("suggested", {})
    items = []

    suggested_ids = [n for n, s in suggested.items() if s.get("role") == Role.IDENTIFIER]
    released_ids = [n for n in suggested_ids if roles.get(n) in UNCHANGED_ROLES]
    if released_ids:
        justified = [n for n in released_ids if snapshot.get("justifications", {}).get(n)]
        items.append(
            checklist_item(
                "direct_identifiers",
                "Direct identifiers removed",
                OPEN,
                f"Released as they are: {_names(released_ids)}"
                + (f" (justified: {_names(justified)})." if justified else "."),
            )
        )
    else:
        dropped = snapshot.get("identifiers", [])
        withheld = snapshot.get("withheld", [])
        items.append(
            checklist_item(
                "direct_identifiers",
                "Direct identifiers removed",
                DONE,
                f"Dropped: {_names(dropped)}; withheld: {_names(withheld)}. No column that looks "
                "like a direct identifier is released."
                if "roles" in snapshot
                else f"Dropped: {_names(dropped)}.",
            )
        )

    qis = [q["name"] for q in snapshot.get("quasi_identifiers", [])]
    suggested_qis = [n for n, s in suggested.items() if s.get("role") == Role.QUASI_IDENTIFIER]
    unchanged_qis = [n for n in suggested_qis if roles.get(n) in UNCHANGED_ROLES]
    if not qis:
        items.append(
            checklist_item(
                "quasi_identifiers", "Quasi-identifiers identified", OPEN, "None tagged."
            )
        )
    elif unchanged_qis:
        items.append(
            checklist_item(
                "quasi_identifiers",
                "Quasi-identifiers identified",
                OPEN,
                f"Generalized: {_names(qis)}; but {_names(unchanged_qis)}, which look like "
                "quasi-identifiers, are released unchanged.",
            )
        )
    else:
        items.append(
            checklist_item(
                "quasi_identifiers",
                "Quasi-identifiers identified",
                DONE,
                f"Generalized: {_names(qis)}.",
            )
        )

    lines = model_lines(summary)
    model = release_request.privacy_model
    k_achieved = (summary.get("achieved") or {}).get("k") or 0
    failed = [c for entry in lines for c in entry["checks"] if not c["passed"]]
    title = f"k-anonymity applied (k ≥ {RECOMMENDED_K} recommended)"
    if not summary:
        status, reason = OPEN, "No result yet."
    elif failed:
        status, reason = OPEN, f"Not met: {failed[0]['name']} ({failed[0]['detail']})."
    elif k_achieved < RECOMMENDED_K:
        status = OPEN
        reason = (
            f"Smallest class {k_achieved} under {model.describe_criteria()}: below the "
            f"recommended {RECOMMENDED_K}."
        )
    else:
        status = DONE
        reason = f"{model.describe_criteria()} asked, smallest equivalence class {k_achieved}."
    items.append(checklist_item("k_anonymity", title, status, reason))

    sensitive = snapshot.get("sensitive", [])
    title = "Attribute disclosure controlled for sensitive attributes"
    protecting = [entry for entry in lines if entry["needs_sensitive"]]
    if not sensitive:
        items.append(
            checklist_item("sensitive", title, NOT_APPLICABLE, "No column is tagged sensitive.")
        )
    elif not protecting:
        items.append(
            checklist_item(
                "sensitive",
                title,
                OPEN,
                f"Sensitive columns {_names(sensitive)} are released without "
                f"{_one_of([kind.label for kind in REGISTRY.values() if kind.needs_sensitive])}.",
            )
        )
    else:
        met = bool(summary) and all(c["passed"] for e in protecting for c in e["checks"])
        items.append(
            checklist_item(
                "sensitive",
                title,
                DONE if met else OPEN,
                f"{' and '.join(e['description'] for e in protecting)} on {_names(sensitive)}: "
                + ("met by every class." if met else "not met."),
            )
        )

    risk = summary.get("risk_after")
    covers = summary.get("risk_covers") or {}
    if risk:
        not_covered = covers.get("not_covered", [])
        items.append(
            checklist_item(
                "risk",
                "Re-identification risk assessed and documented",
                DONE,
                f"Prosecutor risk on the extract: highest {risk['highest']:.1%}, records at risk "
                f"{risk['records_at_risk']:.1%}"
                + _other_attackers(risk)
                + f", computed on {_names(covers.get('quasi_identifiers', qis))}"
                + (
                    f"; it does not cover the columns released unchanged ({_names(not_covered)})."
                    if not_covered
                    else "."
                ),
            )
        )
    else:
        items.append(
            checklist_item(
                "risk", "Re-identification risk assessed and documented", OPEN, "No result yet."
            )
        )

    named = release_request.recipients.count() + release_request.recipient_groups.count()
    if not release_request.terms.strip():
        status, reason = OPEN, "The release has no terms of use."
    elif not named:
        status, reason = OPEN, "No recipient is named on the release."
    else:
        accepted = release_request.terms_acceptances.filter(
            terms_sha256=release_request.terms_sha256
        ).count()
        status = DONE
        reason = (
            f"Terms of use (SHA-256 {release_request.terms_sha256[:12]}…) for the named "
            f"recipients; accepted {accepted} time{'s' if accepted != 1 else ''} before download."
        )
    items.append(checklist_item("agreement", "Data sharing agreement in place", status, reason))

    reproduction = release_request.reproductions.filter(round=release_request.round).first()
    if not files:
        status, reason = OPEN, "No package yet."
    elif reproduction is None:
        status = OPEN
        reason = (
            "The configuration, hierarchies, seed and engine version are kept and every step is "
            "in the audit log, but no officer has re-run it yet."
        )
    elif reproduction.state == Reproduction.State.IDENTICAL:
        status = DONE
        reason = (
            "Configuration, hierarchies, seed and engine version kept, every step in the audit "
            f"log; re-run on {reproduction.finished_at:%Y-%m-%d} gave identical bytes."
        )
    else:
        status = OPEN
        reason = f"The last re-run is {reproduction.get_state_display().lower()}."
        if reproduction.error:
            reason += f" {reproduction.error}"
    items.append(
        checklist_item("reproducible", "Process documented and reproducible", status, reason)
    )
    return items


def _other_attackers(risk: dict) -> str:
    """Journalist and marketer risk, and Dankar's population uniques, in words."""
    text = ""
    journalist, marketer = risk.get("journalist"), risk.get("marketer")
    if journalist and marketer:
        text += (
            f"; journalist highest {journalist['highest']:.1%}, marketer {marketer['average']:.1%}"
        )
        text += (
            f" (against a {risk['population_model']})"
            if risk.get("population_model")
            else " (the release taken as the population)"
        )
    population = risk.get("population") or {}
    if population.get("dankar") is not None:
        text += f"; estimated population uniques {population['dankar']:.3%}"
    return text


def model_lines(summary: dict) -> list[dict]:
    """Each privacy model of the result: its name, what was asked (the engine's description)
    and its check lines on the released classes (what was achieved)."""
    out = []
    for entry in summary.get("models") or []:
        try:
            criterion = criterion_from_spec(entry.get("spec") or {"model": entry.get("model")})
        except EngineError:
            continue
        out.append(
            {
                "model": criterion.name,
                "label": criterion.label,
                "description": entry.get("description") or criterion.describe(),
                "needs_sensitive": criterion.needs_sensitive,
                "checks": [
                    {"name": c.name, "passed": c.passed, "detail": c.detail}
                    for c in criterion.check(entry.get("achieved") or {})
                ],
            }
        )
    return out


def _candidate(summary: dict) -> dict | None:
    """When the round applies levels chosen among the candidates: those and the optimum's."""
    optimum = summary.get("optimum")
    if not summary.get("levels_fixed") or not optimum:
        return None
    return {
        "chosen": {
            "levels": summary.get("levels"),
            "loss": (summary.get("metrics") or {}).get("loss"),
            "highest_risk": (summary.get("risk_after") or {}).get("highest"),
            "suppressed": summary.get("suppressed"),
        },
        "optimum": {k: optimum.get(k) for k in ("levels", "loss", "highest_risk", "suppressed")},
    }


def _columns(release_request: ReleaseRequest, audience: str) -> list[dict]:
    summary = release_request.summary or {}
    snapshot = release_request.config or {}
    levels = summary.get("levels") or {}
    heights = summary.get("heights") or {}
    aggregated = (summary.get("utility") or {}).get("microaggregate") or {}
    sources = {q["name"]: q for q in snapshot.get("quasi_identifiers", [])}
    roles = snapshot.get("roles") or {
        **{n: Role.IDENTIFIER for n in snapshot.get("identifiers", [])},
        **{n: Role.QUASI_IDENTIFIER for n in sources},
        **{n: Role.SENSITIVE for n in snapshot.get("sensitive", [])},
        **{n: Role.INSENSITIVE for n in snapshot.get("insensitive", [])},
    }
    out = []
    for name, role in roles.items():
        column = {
            "name": name,
            "role": role or "",
            "role_label": Role(role).label if role else "No role (withheld)",
            "released": role in (Role.QUASI_IDENTIFIER, *UNCHANGED_ROLES),
        }
        if role == Role.QUASI_IDENTIFIER:
            column["level"] = levels.get(name)
            column["height"] = heights.get(name)
            column["hierarchy"] = sources[name].get("hierarchy", "")
            column["treatment"] = (
                f"microaggregated: each value replaced by the {describe_aggregate(aggregated[name])} "
                "of its class"
                if name in aggregated
                else f"generalized to level {levels[name]} of {heights[name] - 1}"
                if levels.get(name) is not None and name in heights
                else "generalized by local recoding"
            )
        elif role in UNCHANGED_ROLES:
            column["treatment"] = "released unchanged"
            justification = snapshot.get("justifications", {}).get(name)
            if justification and audience == REVIEWER:
                column["justification"] = justification
        elif role == Role.IDENTIFIER:
            column["treatment"] = "dropped"
        else:
            column["treatment"] = "withheld"
        out.append(column)
    return out


def _class_sizes(release_request: ReleaseRequest, summary: dict) -> dict:
    """The extract's classes and rows by class size on the page's logarithmic bins."""
    stored = summary.get("class_sizes")
    if stored is not None:
        after = stored.get("after") or []
    else:  # a result stored before the sizes were: counted by size over its stored classes
        grouped = release_request.classes.order_by().values("size").annotate(n=Count("id"))
        after = list(grouped.values_list("size", "n"))
    k = release_request.privacy_model.min_class_size(DataContext(0))
    return {
        "smallest_allowed": k,
        "bins": [
            {
                "sizes": b["label"],
                "low": b["low"],
                "high": b["high"],
                "classes": b["after"]["classes"],
                "rows": b["after"]["rows"],
                "share_of_rows": b["after"]["share"],
            }
            for b in figures.size_bins(after, None, k)["bins"]
        ],
    }


#: What the report says of SafePub's seed, to every reader.
SEED_KEPT = (
    "The random seed of the sampling and of the search is kept for privacy officers, so that "
    "the release can be reproduced; it is not shown to recipients."
)


def safepub_section(summary: dict, audience: str) -> dict | None:
    """A differentially private extract (SafePub): ε, δ, the derived k and β, the search's mode
    and budget, the rows sampled and suppressed; the seed for officers and the requester only
    (with it, a recipient could tell which rows of the input were sampled)."""
    drawn = summary.get("safepub")
    if not drawn:
        return None
    section = {
        "epsilon": drawn.get("epsilon"),
        "delta": drawn.get("delta"),
        "k": drawn.get("k"),
        "beta": drawn.get("beta"),
        "mode": drawn.get("mode"),
        "epsilon_search": drawn.get("epsilon_search"),
        "input_rows": drawn.get("input_rows"),
        "sampled_rows": drawn.get("sampled_rows"),
        # Classes of the sample smaller than k: suppressed (every row count is of the sample).
        "suppressed_rows": summary.get("suppressed"),
        "seed_statement": SEED_KEPT,
    }
    if audience == REVIEWER:
        section["seed"] = drawn.get("seed")
    return section


def _recipient_spec(spec: dict | None, audience: str) -> dict | None:
    """The requested model as stored; a seed the requester gave is not the recipients'."""
    if audience == REVIEWER or not spec:
        return spec
    return {
        **spec,
        "criteria": [
            {k: v for k, v in c.items() if not (c.get("model") == "safepub" and k == "seed")}
            if isinstance(c, dict)
            else c
            for c in spec.get("criteria") or []
        ],
    }


def body(release_request: ReleaseRequest, audience: str, files: list[dict]) -> dict:
    """The report's dataset and extract, then what was released and how."""
    summary = release_request.summary or {}
    return {
        "dataset": {
            "name": release_request.dataset.name,
            "sha256": release_request.dataset.sha256,
            "rows": summary.get("rows_in"),
        },
        "extract": {
            "rows": summary.get("rows_out"),
            "columns": summary.get("released_columns", []),
            "sha256": release_request.extract_sha256,
            "package_sha256": release_request.package_sha256,
            "row_order": "shuffled at random (seeded), not the input's order",
            "files": files,
            "not_offered": {"xlsx": summary["xlsx_refusal"]} if summary.get("xlsx_refusal") else {},
        },
        "columns": _columns(release_request, audience),
        "privacy": {
            "model": release_request.model_description,
            "spec": _recipient_spec((release_request.parameters or {}).get("model"), audience),
            "algorithm": release_request.algorithm,
            "algorithm_label": release_request.get_algorithm_display(),
            "models": model_lines(summary),
            "smallest_class_allowed": release_request.privacy_model.min_class_size(DataContext(0)),
            "achieved": summary.get("achieved", {}),
            "heuristic": summary.get("heuristic", False),
            "levels_fixed": bool(summary.get("levels_fixed")),
            # The heuristic search: its limits, steps and optimality statement.
            "search": summary.get("search") or {},
            "safepub": safepub_section(summary, audience),
        },
        "suppression": {
            "rows_in": summary.get("rows_in"),
            "rows_out": summary.get("rows_out"),
            "suppressed": summary.get("suppressed"),
            "limit": release_request.suppression_limit,
        },
        "utility": {
            "classes": summary.get("classes"),
            "average_class_size": (summary.get("metrics") or {}).get("average_class_size"),
            # After release only: the original's classes are not for every reader.
            "class_sizes": _class_sizes(release_request, summary),
        },
        "risk": {
            "attackers": ["prosecutor", "journalist", "marketer"],
            "after": summary.get("risk_after"),
            "covers": summary.get("risk_covers")
            or {"quasi_identifiers": summary.get("quasi_identifiers", []), "not_covered": []},
        },
    }


def add_reviewer_detail(report: dict, release_request: ReleaseRequest) -> None:
    """Information loss and the risk before release are measured against the original: for
    officers and the requester."""
    summary = release_request.summary or {}
    report["privacy"]["candidate"] = _candidate(summary)
    report["privacy"]["candidates"] = summary.get("candidates") or []
    report["utility"]["metrics"] = summary.get("metrics", {})
    report["risk"]["before"] = summary.get("risk_before")
    report["unchanged"] = summary.get("unchanged")
    # Joint classes with earlier releases are computed on the original, as the classes are.
    report["cross_release"] = cross_release_section(release_request)


def cross_release_section(release_request: ReleaseRequest) -> dict:
    """The extract judged with each earlier released extract: the assumption, per earlier
    release its figures and the evidence of linking, the protection's outcome, and the
    officers' written acceptances of a failing check."""
    summary = release_request.summary or {}
    entries = [
        {k: v for k, v in entry.items() if k != "joint_sizes"}
        for entry in summary.get("cross_release") or []
    ]
    accepted = [
        {
            "by": r.reviewer.get_username(),
            "round": r.round,
            "checks": list(r.accepted_checks),
            "justification": r.justification,
            "at": iso(r.created_at),
        }
        for r in release_request.reviews.select_related("reviewer").order_by("round", "id")
        if r.justification
    ]
    return {
        "measured": "cross_release" in summary,
        "assumption": summary.get("cross_release_assumption"),
        "earlier_releases": entries,
        "protection": summary.get("protection"),
        "accepted": accepted,
    }


def reproduction(release_request: ReleaseRequest) -> dict:
    """What a reproduction needs (the configuration with the hierarchies, the seed, the
    engine's version) and how the last one went."""
    last = release_request.reproductions.filter(round=release_request.round).first()
    return {
        "engine": package.engine_version(),
        "shuffle_seed": release_request.shuffle_seed,
        "shuffle_scheme": release_request.shuffle_scheme,
        "parameters": release_request.parameters,
        "configuration": release_request.config,
        "last_run": {
            "state": last.state,
            "at": iso(last.finished_at or last.created_at),
            "by": last.requested_by.get_username(),
            "outcome": last.outcome,
        }
        if last
        else None,
    }
