"""The platform admin (public schema only): tenants, domains and their retrieval policy."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django_tenants.utils import get_public_schema_name

from core.holds import holds_in_tenant

from .models import Domain, Tenant


class PublicAdminSite(admin.AdminSite):
    site_header = "Engram platform"
    site_title = "Engram platform"
    index_title = "Tenants and platform users"


public_admin_site = PublicAdminSite(name="public_admin")


class DomainInline(admin.TabularInline):
    model = Domain
    extra = 0


@admin.register(Tenant, site=public_admin_site)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["schema_name", "name", "is_active", "created_at"]
    search_fields = ["schema_name", "name"]
    inlines = [DomainInline]
    fieldsets = [
        (None, {"fields": ["schema_name", "name", "is_active"]}),
        (
            "Retrieval policy",
            {
                "fields": [
                    "w_similarity",
                    "w_recency",
                    "w_importance",
                    "recency_half_life_hours",
                    "near_duplicate_threshold",
                ]
            },
        ),
        (
            "Working memory",
            {
                "fields": [
                    "blackboard_ttl_seconds",
                    "scratchpad_ttl_seconds",
                    "window_ttl_seconds",
                    "window_max_turns",
                    "working_value_max_bytes",
                    "checkpoint_cache_ttl_seconds",
                    "window_log_trimmed",
                ]
            },
        ),
        (
            "Consolidation",
            {
                "fields": [
                    "consolidation_interval_hours",
                    "initial_stability_hours",
                    "stability_growth",
                    "archive_below_recall",
                    "archive_min_age_hours",
                    "promote_min_confidence",
                    "promote_min_accesses",
                    "summary_leaf_events",
                    "summary_leaf_tokens",
                    "summary_fanout",
                ]
            },
        ),
        ("Knowledge", {"fields": ["default_predicate_cardinality"]}),
        ("Limits", {"fields": ["json_max_depth"]}),
        ("Context assembly", {"fields": ["context_tokenizer"]}),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Tenant | None = None) -> list[str]:
        # the schema name cannot change once the schema exists
        return ["schema_name"] if obj else []

    def has_delete_permission(self, request: HttpRequest, obj: Tenant | None = None) -> bool:
        """Never the public tenant (the platform itself: its schema holds every tenant's row); Django's
        bulk delete asks this for every selected row too, so it cannot slip into a selection."""
        if obj is not None and obj.schema_name == get_public_schema_name():
            return False
        if obj is not None and holds_in_tenant(schema_name=obj.schema_name):
            return False  # a legal hold is active in it (Tenant.delete refuses it too)
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Tenant]) -> None:
        """Each selected tenant through ``Tenant.delete`` (its role, the hold check), all or none."""
        with transaction.atomic():
            for tenant in queryset.exclude(schema_name=get_public_schema_name()):
                tenant.delete()


public_admin_site.register(User, UserAdmin)
public_admin_site.register(Group, GroupAdmin)
