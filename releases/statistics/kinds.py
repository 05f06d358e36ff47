"""Differentially private statistics as a kind of request (``requests.kinds``): its run, its
checks (the exact counts behind the cells for officers only), its part of the request's page
and of the release report. Registered from ``ReleasesConfig.ready``."""

from __future__ import annotations

from django.urls import reverse

from releases.models import ReleaseRequest
from releases.requests import kinds
from releases.statistics import checks, report, run, selectors
from releases.statistics.services import TASK


class StatisticsKind(kinds.RequestKind):
    name = ReleaseRequest.Kind.STATISTICS
    task = TASK

    def run(self, request_id: int) -> None:
        run.run_statistics(request_id)

    def checks(self, release_request):
        return checks.checks(release_request)

    def checks_for(self, user, release_request):
        return checks.checks_for(user, release_request)

    # Approval records nothing more: the release is in the dataset's ledger already (its spend).

    def resubmit_page(self, release_request):
        # Its queries are edited on their own page.
        url = reverse("releases:statistics_request", args=[release_request.dataset_id])
        return f"{url}?resubmit={release_request.pk}"

    def page(self, user, release_request):
        return selectors.statistics_page(user, release_request)

    def report_header(self):
        return {"kind": self.name}

    def report_body(self, release_request, audience, files):
        return report.body(release_request, audience, files)

    def compliance(self, release_request, files, approvals):
        return report.compliance(release_request, files)


kinds.register(StatisticsKind())
