"""The row-level extract as a kind of request (``requests.kinds``): its run, its checks, its
part of the request's page and of the release report. Registered from ``ReleasesConfig.ready``.
"""

from __future__ import annotations

from releases.datasets import budget
from releases.datasets.selectors import budget_context
from releases.models import ReleaseRequest
from releases.requests import attacker, checks, dp_budget, history, kinds, report, run
from releases.requests.services import RUN_TASK


class ExtractKind(kinds.RequestKind):
    name = ReleaseRequest.Kind.EXTRACT
    task = RUN_TASK

    def run(self, request_id: int) -> None:
        run.run_release(request_id)

    def checks(self, release_request):
        return checks.checks(release_request)

    def acceptable_checks(self):
        # Joint classes with earlier releases rest on an assumption (the rows can be linked)
        # the officer may judge does not hold: they accept it in writing.
        return frozenset({checks.CROSS_RELEASE})

    def on_approved(self, release_request, officer):
        # An approved extract goes in its dataset's privacy ledger, outside the DP budget, so
        # the officers see row-level and differentially private releases of it together. A
        # differentially private extract (SafePub) is there already, once, as its ε and δ spend
        # (made when its run started): a second line "outside the DP budget" would be untrue.
        if dp_budget.amount(release_request.privacy_model) is not None:
            return
        budget.record_row_level_release(
            release_request.dataset,
            release_request.requested_by,
            release_request=release_request,
            detail={
                "round": release_request.round,
                "model": release_request.model_description,
                "rows": (release_request.summary or {}).get("rows_out"),
                "approved_by": officer.get_username(),
            },
        )

    def page(self, user, release_request):
        # The dataset's ledger: its differentially private releases beside this extract; the
        # joint classes with its earlier extracts and the attacker file's linkage beside the
        # risk estimates (the page is the officers' and requester's).
        summary = release_request.summary or {}
        return {
            **budget_context(user, release_request.dataset),
            "cross_release": history.cross_release_entries(summary),
            "cross_release_measured": "cross_release" in summary,
            "protection": summary.get("protection"),
            "safepub_seed_statement": report.SEED_KEPT,
            **attacker.linkage_context(user, release_request),
        }

    def report_body(self, release_request, audience, files):
        return report.body(release_request, audience, files)

    def compliance(self, release_request, files, approvals):
        return report.compliance(release_request, files, approvals)

    def add_reviewer_detail(self, report_content, release_request):
        report.add_reviewer_detail(report_content, release_request)
        report_content["linkage"] = attacker.report_entry(release_request)

    def reviewer_tail(self, release_request):
        return {"reproduction": report.reproduction(release_request)}


kinds.register(ExtractKind())
