from django.contrib import admin

from releases.models import (
    AuditEvent,
    Dataset,
    DatasetColumn,
    ReleaseFile,
    ReleaseRequest,
    Reproduction,
    TermsAcceptance,
)


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "row_count", "created_at"]
    readonly_fields = ["sha256", "file_path"]


@admin.register(ReleaseRequest)
class ReleaseRequestAdmin(admin.ModelAdmin):
    list_display = ["pk", "dataset", "requested_by", "model_description", "state", "created_at"]
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


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records the workflow writes (files and their hashes, acceptances, re-runs): shown, never
    edited by hand."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ReleaseFile)
class ReleaseFileAdmin(ReadOnlyAdmin):
    list_display = ["request", "round", "format", "size_bytes", "sha256"]


@admin.register(TermsAcceptance)
class TermsAcceptanceAdmin(ReadOnlyAdmin):
    list_display = ["request", "user", "accepted_at", "terms_sha256"]


@admin.register(Reproduction)
class ReproductionAdmin(ReadOnlyAdmin):
    list_display = ["request", "round", "state", "requested_by", "created_at", "finished_at"]
