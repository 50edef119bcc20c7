"""Tenant admin for the episodic log: read-only for everyone (the log is append-only); each session
links to its timeline."""

from __future__ import annotations

import json
from datetime import UTC

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin import EstimatedCountPaginator, ReadOnlyAdminMixin, session_link, shown

from .models import Event

EVENT_FIELDS: tuple[str, ...] = (
    "seq",
    "session_link",
    "execution_id",
    "agent",
    "role",
    "kind",
    "actor",
    "content",
    "payload_shown",
    "data_subject",
    "redaction",
    "occurred_at",
    "recorded_at",
    "hash_version",
    "prev_hash",
    "hash",
)


@admin.register(Event)
class EventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    # fits 1366 px beside the admin's sidebar and filters: who is the person or job when one acted
    # (the actor), else the agent; the recorded time is on each event's page
    list_display = ["seq", "occurred", "who", "session_link", "kind", "short_content"]
    list_filter = ["kind", "role", "agent", ("occurred_at", admin.DateFieldListFilter)]
    list_select_related = ["agent"]
    search_fields = ["content", "session_id", "execution_id"]
    date_hierarchy = "occurred_at"
    # newest recorded first: occurred_at is the client's claim (a far-future date must not pin a row)
    ordering = ["-seq"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    fields = EVENT_FIELDS
    readonly_fields = EVENT_FIELDS

    @admin.display(description="content")
    def short_content(self, obj: Event) -> str:
        return shown(obj.content, 120)

    @admin.display(description="occurred (UTC)", ordering="occurred_at")
    def occurred(self, obj: Event) -> str:
        return f"{obj.occurred_at.astimezone(UTC):%Y-%m-%d %H:%M:%S}"

    @admin.display(description="who")
    def who(self, obj: Event) -> str:
        return obj.actor or obj.agent.name

    @admin.display(description="session", ordering="session_id")
    def session_link(self, obj: Event) -> SafeString:
        return session_link(obj.session_id)

    @admin.display(description="payload")
    def payload_shown(self, obj: Event) -> SafeString:
        """The payload as JSON, indented (not Python's repr of the parsed dict)."""
        if obj.payload_json in ("", "{}"):
            return format_html("{}", "-")
        pretty = json.dumps(json.loads(obj.payload_json), indent=2, ensure_ascii=False, sort_keys=True)
        return format_html('<pre class="event-payload">{}</pre>', shown(pretty, 20_000))

    @admin.display(description="redacted")
    def redaction(self, obj: Event) -> SafeString:
        """When the event's content was removed, and the decision (by seq) that did it."""
        if obj.redacted_at is None:
            return format_html("{}", "-")
        return format_html(
            '{} UTC by <a class="redacted-by" href="{}?seq={}">decision #{}</a>',
            f"{obj.redacted_at.astimezone(UTC):%Y-%m-%d %H:%M:%S}",
            reverse("admin:memory_event_changelist"),
            obj.redacted_by,
            obj.redacted_by,
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Event]:
        return super().get_queryset(request).defer("search", "payload_index")
