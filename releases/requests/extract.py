"""The row-level extract as a kind of request (``requests.kinds``): its run, its checks, its
part of the request's page and of the release report. Registered from ``ReleasesConfig.ready``.
"""

from __future__ import annotations

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
