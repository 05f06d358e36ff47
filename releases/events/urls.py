"""Addresses of the webhook and notification pages (namespace ``events``)."""

from django.urls import path

from releases.events import views

app_name = "events"

urlpatterns = [
    path("webhooks/", views.webhook_list, name="webhooks"),
    path("webhooks/<int:endpoint_id>/active/", views.webhook_active, name="webhook_active"),
    path("webhooks/<int:endpoint_id>/delete/", views.webhook_delete, name="webhook_delete"),
    path("notifications/", views.notification_list, name="notifications"),
    path("notifications/badge/", views.notification_badge, name="notification_badge"),
    path(
        "notifications/<int:notification_id>/read/",
        views.notification_read,
        name="notification_read",
    ),
    path("notifications/read-all/", views.notification_read_all, name="notification_read_all"),
    path("notifications/preferences/", views.preferences, name="preferences"),
]
