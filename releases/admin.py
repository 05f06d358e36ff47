from django.contrib import admin, messages

from releases.accounts import services as accounts
from releases.models import (
    AuditEvent,
    Dataset,
    DatasetColumn,
    ReleaseFile,
    ReleaseRequest,
    Reproduction,
    TermsAcceptance,
    UsernameLock,
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


@admin.register(UsernameLock)
class UsernameLockAdmin(ReadOnlyAdmin):
    """User names locked after failed logins from many addresses; the action releases them
    (audited), as its owner's password reset would."""

    list_display = ["username", "locked_at", "addresses", "released_at", "released_by"]
    list_filter = [("released_at", admin.EmptyFieldListFilter)]
    search_fields = ["username"]
    actions = ["release"]

    def has_change_permission(self, request, obj=None) -> bool:
        # The release action needs it; the form itself stays read-only (no editable field).
        return request.user.has_perm("releases.change_usernamelock")

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        return [f.name for f in self.model._meta.fields]

    @admin.action(description="Release the selected user names", permissions=["change"])
    def release(self, request, queryset) -> None:
        released = [
            lock.username
            for lock in queryset.filter(released_at__isnull=True)
            if accounts.release_by_administrator(request.user, lock.username)
        ]
        if released:
            self.message_user(request, f"Released: {', '.join(released)}.", messages.SUCCESS)
        else:
            self.message_user(request, "None of them was locked.", messages.WARNING)
