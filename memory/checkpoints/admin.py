"""Tenant admin for checkpoints: read-only (agents write them through the API).

A session holds one checkpoint stream per agent: the list shows the agent of each row and filters
by it. A LangGraph checkpoint shows its namespace, parent key, metadata and the type of its opaque
serialized payload (the bytes themselves are not decoded here either).
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from core.admin import ReadOnlyAdminMixin, session_link

from .models import Checkpoint

CHECKPOINT_FIELDS: tuple[str, ...] = (
    "session",
    "step_index",
    "idempotency_key",
    "checkpoint_ns",
    "parent_key",
    "schema_version",
    "agent",
    "created_at",
    "fingerprint",
    "metadata",
    "serialized_type",
    "state",
    "plan",
)


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["session", "step_index", "agent", "schema_version", "idempotency_key", "created_at"]
    list_filter = ["agent", "schema_version"]
    list_select_related = ["agent"]
    search_fields = ["session_id", "idempotency_key"]
    ordering = ["-created_at"]
    show_full_result_count = False
    fields = CHECKPOINT_FIELDS
    readonly_fields = CHECKPOINT_FIELDS

    @admin.display(description="session", ordering="session_id")
    def session(self, obj: Checkpoint) -> SafeString:
        return session_link(obj.session_id)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Checkpoint]:
        qs = super().get_queryset(request).select_related("agent")  # the title names the agent
        match = request.resolver_match
        if match is not None and (match.url_name or "").endswith("_changelist"):
            return qs.defer("state", "plan", "serialized")  # the list shows none (up to 1 MiB each)
        return qs
