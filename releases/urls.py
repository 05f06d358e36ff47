from django.urls import path

from .views import datasets, home, requests

app_name = "releases"

urlpatterns = [
    path("", home.home, name="home"),
    path("datasets/", datasets.dataset_list, name="dataset_list"),
    path("datasets/<int:dataset_id>/", datasets.dataset_detail, name="dataset_detail"),
    path("datasets/<int:dataset_id>/tagging/", datasets.tagging, name="tagging"),
    path(
        "datasets/<int:dataset_id>/columns/<int:column_id>/",
        datasets.column_update,
        name="column_update",
    ),
    path("datasets/<int:dataset_id>/request/", requests.request_create, name="request_create"),
    path("requests/<int:request_id>/", requests.request_detail, name="request_detail"),
    path("requests/<int:request_id>/status/", requests.request_status, name="request_status"),
    path("requests/<int:request_id>/classes/", requests.request_classes, name="request_classes"),
    path("requests/<int:request_id>/decide/", requests.request_decide, name="request_decide"),
    path("requests/<int:request_id>/download/", requests.download_extract, name="download"),
    path(
        "requests/<int:request_id>/download/report/",
        requests.download_report,
        name="download_report",
    ),
    path("reviews/", requests.review_queue, name="review_queue"),
    path("releases/", requests.release_list, name="release_list"),
]
