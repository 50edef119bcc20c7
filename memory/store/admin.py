"""Tenant admin for the item store: read-only (graphs write items through the API, each change in
the trail). The list shows where each item lives, who changed it last and when it expires; an
item's page shows its value and which paths of it are indexed for search."""

from __future__ import annotations

from django.contrib import admin

from core.admin import ReadOnlyAdminMixin

from .models import StoreItem

ITEM_FIELDS: tuple[str, ...] = (
    "namespace",
    "key",
    "value",
    "index_paths",
    "data_subject",
    "created_by",
    "created_at",
    "updated_by",
    "updated_at",
    "ttl_minutes",
    "expires_at",
)


@admin.register(StoreItem)
class StoreItemAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["namespace_text", "key", "updated_by", "updated_at", "expires_at", "data_subject"]
    list_filter = ["updated_by"]
    list_select_related = ["created_by", "updated_by"]
    search_fields = ["key", "data_subject"]
    ordering = ["-updated_at"]
    show_full_result_count = False
    fields = ITEM_FIELDS
    readonly_fields = ITEM_FIELDS

    @admin.display(description="namespace", ordering="namespace")
    def namespace_text(self, obj: StoreItem) -> str:
        return ".".join(obj.namespace)
