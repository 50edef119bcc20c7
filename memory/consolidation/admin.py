"""Tenant admin of consolidation: every run (when, how long, counts, errors), the promotions of
memories to facts, and the summary tree's nodes. All read-only: the jobs write them."""

from __future__ import annotations

from django.contrib import admin

from core.admin import EstimatedCountPaginator, ReadOnlyAdminMixin, shown

from .models import ConsolidationRun, Promotion, SummaryNode


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "job", "status", "started_at", "took", "counts_shown", "attempts", "error_shown"]
    list_filter = ["job", "status"]
    date_hierarchy = "started_at"
    readonly_fields = [
        "job",
        "status",
        "clock",
        "started_at",
        "finished_at",
        "took",
        "attempts",
        "counts",
        "cursor",
        "error",
    ]
    fields = list(readonly_fields)

    @admin.display(description="took")
    def took(self, obj: ConsolidationRun) -> str:
        return f"{obj.duration.total_seconds():.1f} s" if obj.duration is not None else "—"

    @admin.display(description="counts")
    def counts_shown(self, obj: ConsolidationRun) -> str:
        return ", ".join(f"{name} {value}" for name, value in sorted(obj.counts.items())) or "—"

    @admin.display(description="error")
    def error_shown(self, obj: ConsolidationRun) -> str:
        return shown(obj.error, 120) if obj.error else ""


@admin.register(Promotion)
class PromotionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["memory", "outcome", "fact", "contradiction", "source_event", "promoted_at", "run"]
    list_filter = ["outcome"]
    list_select_related = ["memory", "fact", "fact__subject", "fact__predicate", "source_event", "run"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False


@admin.register(SummaryNode)
class SummaryNodeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "session_id",
        "level",
        "position",
        "first_seq",
        "last_seq",
        "event_count",
        "method",
        "updated_at",
    ]
    list_filter = ["level", "method"]
    search_fields = ["session_id", "content"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False
