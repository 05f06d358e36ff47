from django.urls import path

from . import views

app_name = "releases"

urlpatterns = [
    path("", views.home, name="home"),
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("datasets/<int:dataset_id>/", views.dataset_detail, name="dataset_detail"),
    path("datasets/<int:dataset_id>/tagging/", views.tagging, name="tagging"),
    path(
        "datasets/<int:dataset_id>/columns/<int:column_id>/",
        views.column_update,
        name="column_update",
    ),
    path("datasets/<int:dataset_id>/request/", views.request_create, name="request_create"),
    path("requests/<int:request_id>/", views.request_detail, name="request_detail"),
    path("requests/<int:request_id>/status/", views.request_status, name="request_status"),
    path("requests/<int:request_id>/classes/", views.request_classes, name="request_classes"),
    path("requests/<int:request_id>/decide/", views.request_decide, name="request_decide"),
    path("requests/<int:request_id>/download/", views.download_extract, name="download"),
    path(
        "requests/<int:request_id>/download/report/",
        views.download_report,
        name="download_report",
    ),
    path("reviews/", views.review_queue, name="review_queue"),
    path("releases/", views.release_list, name="release_list"),
]
