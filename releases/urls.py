from django.urls import path

from releases.datasets import views as datasets
from releases.projects import views as projects
from releases.requests import views as requests
from releases.review import views as review
from releases.statistics import views as statistics

app_name = "releases"

urlpatterns = [
    path("", review.home, name="home"),
    path("datasets/", datasets.dataset_list, name="dataset_list"),
    path("datasets/<int:dataset_id>/move/", projects.dataset_move, name="dataset_move"),
    path("projects/", projects.project_list, name="project_list"),
    path("projects/new/", projects.project_create, name="project_create"),
    path("projects/<slug:slug>/settings/", projects.project_settings, name="project_settings"),
    path("projects/<slug:slug>/members/", projects.project_members, name="project_members"),
    path("projects/<slug:slug>/members/roles/", projects.member_roles, name="member_roles"),
    path("datasets/<int:dataset_id>/", requests.dataset_detail, name="dataset_detail"),
    path("datasets/<int:dataset_id>/tagging/", datasets.tagging, name="tagging"),
    path("datasets/<int:dataset_id>/status/", datasets.dataset_status, name="dataset_status"),
    path("datasets/<int:dataset_id>/delete/", datasets.dataset_delete, name="dataset_delete"),
    path("datasets/<int:dataset_id>/risk/", datasets.dataset_risk, name="dataset_risk"),
    path(
        "datasets/<int:dataset_id>/suggestions/",
        datasets.suggestions,
        name="suggestions",
    ),
    path(
        "datasets/<int:dataset_id>/suggestions/accept/",
        datasets.accept_suggestions,
        name="accept_suggestions",
    ),
    path(
        "datasets/<int:dataset_id>/columns/<int:column_id>/type/",
        datasets.column_type,
        name="column_type",
    ),
    path(
        "datasets/<int:dataset_id>/columns/<int:column_id>/domain/",
        datasets.column_domain,
        name="column_domain",
    ),
    path(
        "datasets/<int:dataset_id>/columns/<int:column_id>/hierarchy/",
        datasets.column_hierarchy,
        name="column_hierarchy",
    ),
    path(
        "datasets/<int:dataset_id>/columns/<int:column_id>/hierarchy/preview/",
        datasets.hierarchy_preview,
        name="hierarchy_preview",
    ),
    path(
        "datasets/<int:dataset_id>/columns/<int:column_id>/hierarchy.csv",
        datasets.hierarchy_download,
        name="hierarchy_download",
    ),
    path(
        "datasets/<int:dataset_id>/columns/<int:column_id>/",
        datasets.column_update,
        name="column_update",
    ),
    path("datasets/<int:dataset_id>/request/", requests.request_create, name="request_create"),
    path("datasets/<int:dataset_id>/versions/", datasets.version_upload, name="version_upload"),
    path("datasets/<int:dataset_id>/key-column/", datasets.key_column, name="key_column"),
    path(
        "datasets/<int:dataset_id>/recipes/<int:recipe_id>/apply/",
        requests.recipe_apply,
        name="recipe_apply",
    ),
    path("requests/<int:request_id>/recipe/", requests.recipe_save, name="recipe_save"),
    path(
        "datasets/<int:dataset_id>/request/decisions/",
        requests.request_decisions,
        name="request_decisions",
    ),
    path(
        "datasets/<int:dataset_id>/statistics/",
        statistics.statistics_request,
        name="statistics_request",
    ),
    path(
        "datasets/<int:dataset_id>/statistics/preview/",
        statistics.statistics_preview,
        name="statistics_preview",
    ),
    path("audit/", review.audit_trail_page, name="audit_trail"),
    path("audit/export/", review.audit_trail_export, name="audit_trail_export"),
    path("budgets/", statistics.budget_list, name="budget_list"),
    path("budgets/<int:dataset_id>/", statistics.budget_detail, name="budget_detail"),
    path("budgets/<int:dataset_id>/set/", statistics.budget_set, name="budget_set"),
    path("budgets/<int:dataset_id>/ledger/", statistics.ledger, name="ledger"),
    path("requests/<int:request_id>/", review.request_detail, name="request_detail"),
    path("requests/<int:request_id>/status/", requests.request_status, name="request_status"),
    path("requests/<int:request_id>/classes/", review.request_classes, name="request_classes"),
    path("requests/<int:request_id>/activity/", review.request_activity, name="request_activity"),
    path(
        "requests/<int:request_id>/section/<str:section>/",
        review.request_section,
        name="request_section",
    ),
    path(
        "requests/<int:request_id>/classes/<int:class_id>/",
        review.class_detail,
        name="class_detail",
    ),
    path("requests/<int:request_id>/review/", review.request_review, name="request_review"),
    path("requests/<int:request_id>/resubmit/", review.request_resubmit, name="request_resubmit"),
    path("requests/<int:request_id>/rerun/", requests.request_rerun, name="request_rerun"),
    path("requests/<int:request_id>/cancel/", requests.request_cancel, name="request_cancel"),
    path("requests/<int:request_id>/revoke/", requests.request_revoke, name="request_revoke"),
    path(
        "requests/<int:request_id>/reproduce/",
        requests.request_reproduce,
        name="request_reproduce",
    ),
    path("requests/<int:request_id>/terms/", requests.accept_terms, name="accept_terms"),
    path(
        "requests/<int:request_id>/attacker/",
        requests.attach_attacker_file,
        name="attach_attacker_file",
    ),
    path("requests/<int:request_id>/linkage/", requests.linkage_status, name="linkage_status"),
    # The CSV under the plain address; every format under its own.
    path("requests/<int:request_id>/download/", requests.download_file, name="download"),
    path(
        "requests/<int:request_id>/download/<str:fmt>/",
        requests.download_file,
        name="download_file",
    ),
    path("requests/<int:request_id>/report/", review.report, name="report"),
    path(
        "requests/<int:request_id>/report.json",
        review.download_report,
        name="download_report",
    ),
    path("reviews/", review.review_queue, name="review_queue"),
    path("releases/", requests.release_list, name="release_list"),
]
