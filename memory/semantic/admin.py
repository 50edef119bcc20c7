"""Tenant admin for semantic memories: search them, forget them (through ``memory_forget``)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from core.admin import EstimatedCountPaginator, shown

from .models import SemanticMemory
from .services import memory_forget


@admin.register(SemanticMemory)
class SemanticMemoryAdmin(admin.ModelAdmin):
    list_display = [
        "short_content",
        "agent",
        "scope",
        "memory_type",
        "importance",
        "confidence",
        "access_count",
        "created_at",
        "forgotten_at",
    ]
    list_filter = ["scope", "memory_type", "agent", ("forgotten_at", admin.EmptyFieldListFilter)]
    list_select_related = ["agent", "access"]
    search_fields = ["content", "session_id", "tags"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    readonly_fields = [
        "id",
        "agent",
        "scope",
        "memory_type",
        "session_id",
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
        "forgotten_at",
        "forgotten_by",
    ]
    exclude = ["embedding"]
    actions = ["forget"]

    @admin.display(description="content")
    def short_content(self, obj: SemanticMemory) -> str:
        return shown(obj.content, 100)

    def get_queryset(self, request: HttpRequest) -> QuerySet[SemanticMemory]:
        return super().get_queryset(request).defer("search", "embedding", "lexical")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # memories come from agents through the API

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # forget instead: the row stays for audit

    @admin.action(
        description="Forget selected memories (logged as a decision of their agent)", permissions=["change"]
    )
    def forget(self, request: HttpRequest, queryset: QuerySet[SemanticMemory]) -> None:
        count = 0
        for memory in queryset.filter(forgotten_at__isnull=True).select_related("agent"):
            memory_forget(agent=memory.agent, memory_id=memory.pk)
            count += 1
        self.message_user(request, f"Forgot {count} memories.")
