from django.contrib import admin

from .models import AuditEvent, Dataset, DatasetColumn, ReleaseRequest


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "row_count", "created_at"]
    readonly_fields = ["sha256", "file_path"]


@admin.register(ReleaseRequest)
class ReleaseRequestAdmin(admin.ModelAdmin):
    list_display = ["pk", "dataset", "requested_by", "k", "state", "created_at"]
    list_filter = ["state"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "actor", "action", "dataset", "request"]
    list_filter = ["action"]

    # The audit log is append-only, also for administrators.
    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


admin.site.register(DatasetColumn)
