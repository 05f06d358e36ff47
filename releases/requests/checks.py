"""What an extract's stored result must satisfy before it can be approved: each privacy
model's check lines and the suppression limit (the engine's, from the stored figures), then the
app's own: the model run is the one requested, the columns released unchanged, every
equivalence class, the package's files. They read the stored result only, never the data."""

from __future__ import annotations

from releases.engine import Check
from releases.engine import checks as criteria_checks
from releases.models import ReleaseRequest, Role
from releases.requests import package

#: The check of the joint classes with earlier releases: the one check an officer may accept
#: with a written justification (``accepted_checks``) instead of it blocking approval.
CROSS_RELEASE = "cross-release"

#: A column released unchanged on which more than this share of rows is unique looks
#: identifying: the check fails and the release cannot be approved.
UNCHANGED_UNIQUE_ROWS_LIMIT = 0.5


def checks(release_request: ReleaseRequest) -> list[Check]:
    """The extract's checks, in the order the page lists them."""
    summary = release_request.summary or {}
    if not summary:
        return [Check("result", False, "There is no result to check.")]
    out = [_as_requested(release_request, summary)]
    if "models" in summary:
        out.extend(criteria_checks(summary))
    else:
        out.append(
            Check(
                "privacy models",
                False,
                "this result was stored without its models' figures; resubmit it",
            )
        )
    out.append(unchanged_check(summary))
    out.append(cross_release_check(release_request, summary))
    # Counted by the run as it stored the classes; results from before that are counted here
    # (a JSON test on every class: slow at 100,000 classes).
    failing_classes = summary.get("failing_classes")
    if failing_classes is None:
        failing_classes = release_request.classes.exclude(fails=[]).count()
    out.append(
        Check(
            "every equivalence class",
            failing_classes == 0,
            f"{failing_classes} classes fail a model" if failing_classes else "all pass",
        )
    )
    out.append(files_check(release_request))
    return out


def _as_requested(release_request: ReleaseRequest, summary: dict) -> Check:
    """The figures are those of the model the round asked for (not of another one)."""
    requested = (release_request.parameters or {}).get("model") or {}
    ran = summary.get("privacy_model") or {}
    if "models" in summary and ran != requested:
        return Check(
            "privacy model as requested",
            False,
            f"the result was computed for {summary.get('description') or 'another model'}, "
            f"not for {release_request.model_description}",
        )
    return Check("privacy model as requested", True, release_request.model_description)


def files_check(release_request: ReleaseRequest) -> Check:
    """The round's files are recorded and the package digest is theirs (approving re-reads
    every file's bytes as well: :func:`verify_package`)."""
    files = list(release_request.files.filter(round=release_request.round))
    if not files:
        return Check("package files", False, "no file is stored for this round")
    digest = package.package_digest({f.format: f.sha256 for f in files})
    if digest != release_request.package_sha256:
        return Check("package files", False, "the files do not match the package digest")
    names = ", ".join(f.get_format_display() for f in files)
    return Check("package files", True, f"{names}; package digest matches")


def unchanged_check(summary: dict) -> Check:
    """Columns released with their values unchanged must not look identifying."""
    unchanged = summary.get("unchanged")
    if unchanged is None:
        return Check(
            "columns released unchanged",
            False,
            "not measured for this round; resubmit it to measure them",
        )
    problems = []
    for column in unchanged:
        if column["unique_row_share"] > UNCHANGED_UNIQUE_ROWS_LIMIT:
            problems.append(
                f"{column['name']}: {column['unique_row_share']:.0%} of rows are unique on it "
                f"alone (at most {UNCHANGED_UNIQUE_ROWS_LIMIT:.0%})"
            )
        if column["suggested_role"] == Role.IDENTIFIER and not column.get("justification"):
            problems.append(f"{column['name']}: looks like a direct identifier, not justified")
    if problems:
        return Check("columns released unchanged", False, "; ".join(problems))
    if not unchanged:
        return Check("columns released unchanged", True, "no column is released unchanged")
    names = ", ".join(c["name"] for c in unchanged)
    return Check("columns released unchanged", True, f"{names}: none looks identifying")


def cross_release_check(release_request: ReleaseRequest, summary: dict) -> Check:
    """Every joint class with each earlier released extract of the dataset holds at least k
    rows (and reaches the l and t the request asks for), as the run measured them."""
    entries = summary.get("cross_release")
    if entries is None:
        earlier = (
            ReleaseRequest.objects.filter(
                dataset_id=release_request.dataset_id,
                kind=ReleaseRequest.Kind.EXTRACT,
                state__in=ReleaseRequest.RELEASED_STATES,
            )
            .exclude(pk=release_request.pk)
            .exists()
        )
        if earlier:
            return Check(
                CROSS_RELEASE,
                False,
                "not measured for this round, and the dataset has earlier releases; resubmit "
                "it to measure them",
            )
        return Check(CROSS_RELEASE, True, "the dataset has no earlier release")
    if not entries:
        return Check(CROSS_RELEASE, True, "the dataset has no earlier released extract")
    problems = []
    for entry in entries:
        if not entry.get("measured", True):
            problems.append(f"with {entry['name']}: not measured ({entry.get('reason', '')})")
        elif not entry.get("passed"):
            problems.append(f"with {entry['name']}: {_failure(entry)}")
    if problems:
        return Check(CROSS_RELEASE, False, "; ".join(problems))
    smallest = min(e["smallest_joint_class"] for e in entries)
    names = ", ".join(e["name"] for e in entries)
    return Check(
        CROSS_RELEASE,
        True,
        f"with {names}: smallest joint class {smallest}, none below k={entries[0]['k']}",
    )


def _failure(entry: dict) -> str:
    """Why the joint classes with one earlier release fail, in words."""
    reasons = []
    if entry.get("rows_below_k"):
        reasons.append(
            f"{entry['rows_below_k']} rows are in joint classes smaller than k={entry['k']} "
            f"(smallest {entry['smallest_joint_class']})"
        )
    required = entry.get("l_required")
    for name, value in (entry.get("entropy_l") or entry.get("l") or {}).items():
        if required is not None and value is not None and value < required:
            reasons.append(f"a joint class has l={value:.3g} of {name}, l={required:g} asked")
    required = entry.get("t_required")
    for name, value in (entry.get("t") or {}).items():
        if required is not None and value > required:
            reasons.append(f"a joint class has t={value:.3g} of {name}, t={required:g} asked")
    return "; ".join(reasons) or "the joint classes do not pass"
