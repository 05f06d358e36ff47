"""The row-level extract as a kind of request (``requests.kinds``): its run, its checks, its
part of the request's page and of the release report. Registered from ``ReleasesConfig.ready``.
"""

from __future__ import annotations

from releases.datasets import budget
from releases.datasets.selectors import budget_context
from releases.models import ReleaseRequest
from releases.requests import checks, kinds, report, run
from releases.requests.services import RUN_TASK


class ExtractKind(kinds.RequestKind):
    name = ReleaseRequest.Kind.EXTRACT
    task = RUN_TASK

    def run(self, request_id: int) -> None:
        run.run_release(request_id)

    def checks(self, release_request):
        return checks.checks(release_request)

    def on_approved(self, release_request, officer):
        # An approved extract goes in its dataset's privacy ledger, outside the DP budget, so
        # the officers see row-level and differentially private releases of it together.
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
        # The dataset's ledger: its differentially private releases beside this extract.
        return budget_context(user, release_request.dataset)

    def report_body(self, release_request, audience, files):
        return report.body(release_request, audience, files)

    def compliance(self, release_request, files, approvals):
        return report.compliance(release_request, files, approvals)

    def add_reviewer_detail(self, report_content, release_request):
        report.add_reviewer_detail(report_content, release_request)

    def reviewer_tail(self, release_request):
        return {"reproduction": report.reproduction(release_request)}


kinds.register(ExtractKind())
