"""Tenant admin for memory: the episodic log (read-only for everyone) and semantic memories."""

from __future__ import annotations

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property

from .checkpoints import admin as checkpoints_admin  # noqa: F401 (registers CheckpointAdmin)
from .models import Event, SemanticMemory
from .semantic.services import memory_forget


class EstimatedCountPaginator(Paginator):
    """Uses PostgreSQL's row estimate for large unfiltered tables instead of ``COUNT(*)``."""

    @cached_property
    def count(self) -> int:
        query = self.object_list.query
        if not query.where:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                    [query.model._meta.db_table],
                )
                row = cursor.fetchone()
            if row and row[0] > 100_000:
                return int(row[0])
        return super().count


class ReadOnlyAdminMixin:
    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Event)
class EventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["seq", "occurred_at", "agent", "session_id", "kind", "role", "short_content"]
    list_filter = ["kind", "role", "agent", ("occurred_at", admin.DateFieldListFilter)]
    list_select_related = ["agent"]
    search_fields = ["content", "session_id", "execution_id"]
    date_hierarchy = "occurred_at"
    ordering = ["-occurred_at", "-seq"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    fields = [
        "seq",
        "session_id",
        "execution_id",
        "agent",
        "role",
        "kind",
        "content",
        "payload",
        "occurred_at",
        "recorded_at",
        "prev_hash",
        "hash",
    ]
    readonly_fields = fields

    @admin.display(description="content")
    def short_content(self, obj: Event) -> str:
        return obj.content if len(obj.content) <= 120 else obj.content[:117] + "..."

    def get_queryset(self, request: HttpRequest) -> QuerySet[Event]:
        return super().get_queryset(request).defer("search")


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
    list_select_related = ["agent"]
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
        return obj.content if len(obj.content) <= 100 else obj.content[:97] + "..."

    def get_queryset(self, request: HttpRequest) -> QuerySet[SemanticMemory]:
        return super().get_queryset(request).defer("search", "embedding")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # memories come from agents through the API

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # forget instead: the row stays for audit

    @admin.action(description="Forget selected memories (logged as a decision of their agent)")
    def forget(self, request: HttpRequest, queryset: QuerySet[SemanticMemory]) -> None:
        count = 0
        for memory in queryset.filter(forgotten_at__isnull=True).select_related("agent"):
            memory_forget(agent=memory.agent, memory_id=memory.pk)
            count += 1
        self.message_user(request, f"Forgot {count} memories.")
