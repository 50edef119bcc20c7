"""Tenant admin for semantic memories: search them, forget them (through ``memory_forget``), restore
archived ones (``memories_restore``)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from core.admin import EstimatedCountPaginator, ServiceSaveAdmin, session_link, shown

from .models import MemoryType, SemanticMemory
from .services.clocks import memories_restore
from .services.erase import memory_forget


@admin.register(SemanticMemory)
class SemanticMemoryAdmin(ServiceSaveAdmin):
    list_display = [
        "short_content",
        "agent",
        "scope",
        "memory_type",
        "importance",
        "confidence",
        "access_count",
        "session",
        "created_at",
        "archived_at",
        "forgotten_at",
    ]
    list_filter = [
        "scope",
        "memory_type",
        "agent",
        ("archived_at", admin.EmptyFieldListFilter),
        ("forgotten_at", admin.EmptyFieldListFilter),
        ("superseded_at", admin.EmptyFieldListFilter),
    ]
    list_select_related = ["agent", "access"]
    search_fields = ["content", "session_id", "tags"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    readonly_fields = [
        "id",
        "agent",
        "scope",
        "memory_type",
        "session",
        "tags",
        "content",
        "content_hash",
        "metadata",
        "importance",
        "confidence",
        "embedding_model",
        "embedding_dimensions",
        "created_at",
        "last_accessed_at",
        "access_count",
        "stability_hours",
        "fact_hint",
        "source_event",
        "archived_at",
        "merged_into",
        "superseded_by",
        "superseded_at",
        "forgotten_at",
        "forgotten_by",
    ]
    exclude = ["embedding"]
    actions = ["forget", "restore"]

    @admin.display(description="content")
    def short_content(self, obj: SemanticMemory) -> str:
        return shown(obj.content, 100)

    @admin.display(description="session", ordering="session_id")
    def session(self, obj: SemanticMemory) -> SafeString:
        return session_link(obj.session_id)

    @admin.display(description="stability (hours)")
    def stability_hours(self, obj: SemanticMemory) -> float:
        return round(obj.access.stability_hours, 1)

    def get_queryset(self, request: HttpRequest) -> QuerySet[SemanticMemory]:
        # the store's linked rows are the store's (``memory.store``): its items are what people see
        return (
            super()
            .get_queryset(request)
            .exclude(memory_type=MemoryType.STORE)
            .defer("search", "embedding", "lexical")
        )

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # memories come from agents through the API

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # forget instead: the row stays for audit

    def has_restore_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("memory.restore_semanticmemory")

    def service_save(self, request: HttpRequest, obj: SemanticMemory, form: object, change: bool) -> None:
        """Nothing to save: every field is read-only, and the one change is ``forget`` (a service
        that records the person); a posted change form must not rewrite the row unrecorded."""

    @admin.action(
        description="Forget selected memories (logged as a decision of their agent)", permissions=["change"]
    )
    def forget(self, request: HttpRequest, queryset: QuerySet[SemanticMemory]) -> None:
        count = 0
        for memory in queryset.filter(forgotten_at__isnull=True).select_related("agent"):
            memory_forget(agent=memory.agent, memory_id=memory.pk, username=request.user.get_username())
            count += 1
        self.message_user(request, f"Forgot {count} memories.")

    @admin.action(
        description="Restore selected archived memories to recall (logged as your decision)",
        permissions=["restore"],
    )
    def restore(self, request: HttpRequest, queryset: QuerySet[SemanticMemory]) -> None:
        ids = list(queryset.filter(archived_at__isnull=False).values_list("pk", flat=True))
        restored = memories_restore(ids=ids, reason="operator", username=request.user.get_username())
        self.message_user(request, f"Restored {len(restored)} memories.")
