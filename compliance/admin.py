"""Compliance in the tenant admin: chain checks (the history, "verify now", progress), anchors (and
the public key), exports (form, progress, download), the admin log of people's actions, and the
admins of the tenant's users and groups, whose changes go through services that record the person
in the trail."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin import EstimatedCountPaginator, ReadOnlyAdminMixin, ServiceSaveAdmin, shown

from . import admin_views, lifecycle, services
from .models import (
    HOLD_REVIEW_DAYS,
    Anchor,
    ChainCheck,
    ErasureRequest,
    Export,
    LegalHold,
    RetentionRule,
    RetentionRun,
    hold_review_default,
)


def _username(request: HttpRequest) -> str:
    return request.user.get_username()


CHECK_FIELDS: tuple[str, ...] = (
    "status",
    "scope",
    "requested_by",
    "created_at",
    "started_at",
    "finished_at",
    "total",
    "checked",
    "from_seq",
    "head_seq",
    "head_hash",
    "recheck_from",
    "recheck_to",
    "anchors_checked",
    "redacted",
    "findings_list",
    "error",
)


@admin.register(ChainCheck)
class ChainCheckAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The history of chain checks; "verify now" and its progress live on the admin index."""

    list_display = [
        "id",
        "status",
        "scope",
        "requested_by",
        "created_at",
        "finished_at",
        "checked",
        "head_seq",
        "first_problem",
    ]
    list_filter = ["status", "scope"]
    ordering = ["-created_at", "-id"]
    fields = CHECK_FIELDS
    readonly_fields = CHECK_FIELDS

    @admin.display(description="first problem")
    def first_problem(self, obj: ChainCheck) -> str:
        first = obj.first_finding
        return "" if first is None else f"{first['kind']}: {first['message']}"

    @admin.display(description="findings")
    def findings_list(self, obj: ChainCheck) -> SafeString:
        if not obj.findings:
            return format_html("{}", "none")
        items = "".join(
            format_html(
                "<li><strong>{}</strong> {}{}</li>",
                f["kind"],
                f["message"],
                format_html(' <a href="{}">event #{}</a>', f["url"], f["seq"]) if f["url"] else "",
            )
            for f in admin_views.findings_linked(obj.findings)
        )
        return format_html("<ul>{}</ul>", SafeString(items))

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "run/",
                self.admin_site.admin_view(admin_views.chain_check_run_view),
                name="compliance_chaincheck_run",
            ),
            path(
                "<int:check_id>/progress/",
                self.admin_site.admin_view(admin_views.chain_check_progress_view),
                name="compliance_chaincheck_progress",
            ),
            *super().get_urls(),
        ]


ANCHOR_FIELDS: tuple[str, ...] = (
    "seq",
    "hash",
    "anchored_at",
    "key_id",
    "statement",
    "signature",
    "sink",
    "sink_error",
)


@admin.register(Anchor)
class AnchorAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Signed chain heads (append-only); the public key to check them is a download away."""

    change_list_template = "admin/compliance/anchor/change_list.html"
    list_display = ["seq", "anchored_at", "short_hash", "key_id_short", "sink", "sink_error"]
    ordering = ["-seq", "-id"]
    fields = ANCHOR_FIELDS
    readonly_fields = ANCHOR_FIELDS

    @admin.display(description="hash")
    def short_hash(self, obj: Anchor) -> str:
        return obj.hash[:16] + "…"

    @admin.display(description="key id")
    def key_id_short(self, obj: Anchor) -> str:
        return obj.key_id[:16] + "…"

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "public-key/",
                self.admin_site.admin_view(admin_views.public_key_view),
                name="compliance_anchor_public_key",
            ),
            *super().get_urls(),
        ]


EXPORT_FIELDS: tuple[str, ...] = (
    "requested_by",
    "scope",
    "session_id",
    "agent_name",
    "occurred_from",
    "occurred_to",
    "status",
    "state_text",
    "created_at",
    "started_at",
    "finished_at",
    "events_total",
    "events_done",
    "first_seq",
    "last_seq",
    "size",
    "sha256",
    "error",
    "progress_link",
)


@admin.register(Export)
class ExportAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Exports made (who, scope, archive hash); new ones from the export form."""

    change_list_template = "admin/compliance/export/change_list.html"
    list_display = [
        "short_id",
        "scope_text",
        "requested_by",
        "state_text",
        "created_at",
        "events_done",
        "sha256_short",
    ]
    list_filter = ["status", "scope"]
    ordering = ["-created_at"]
    fields = EXPORT_FIELDS
    readonly_fields = EXPORT_FIELDS

    @admin.display(description="export")
    def short_id(self, obj: Export) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="scope")
    def scope_text(self, obj: Export) -> str:
        return obj.scope_description()

    @admin.display(description="state", ordering="status")
    def state_text(self, obj: Export) -> str:
        return shown(obj.state, 200)

    @admin.display(description="archive SHA-256")
    def sha256_short(self, obj: Export) -> str:
        return obj.sha256[:16] + "…" if obj.sha256 else ""

    @admin.display(description="progress and download")
    def progress_link(self, obj: Export) -> SafeString:
        url = reverse("admin:compliance_export_progress", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, "download" if obj.archive_available else "open")

    def get_urls(self) -> list[URLPattern]:
        site = self.admin_site
        return [
            path("new/", site.admin_view(admin_views.export_new_view), name="compliance_export_new"),
            path(
                "<uuid:export_id>/progress/",
                site.admin_view(admin_views.export_progress_view),
                name="compliance_export_progress",
            ),
            path(
                "<uuid:export_id>/download/",
                site.admin_view(admin_views.export_download_view),
                name="compliance_export_download",
            ),
            *super().get_urls(),
        ]


@admin.register(LogEntry)
class LogEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Django's log of admin users' actions (the trail holds the same changes, hash-chained)."""

    list_display = ["action_time", "user", "content_type", "object_repr", "action_flag", "short_message"]
    list_filter = ["action_flag", "content_type"]
    list_select_related = ["user", "content_type"]
    search_fields = ["object_repr", "change_message", "user__username"]
    date_hierarchy = "action_time"
    paginator = EstimatedCountPaginator
    show_full_result_count = False

    @admin.display(description="change")
    def short_message(self, obj: LogEntry) -> str:
        return shown(obj.get_change_message(), 200)


# --- the tenant admin's users and groups ------------------------------------------------------------------
# the only admins of User and Group in the tenant admin: the site declines django.contrib.auth's own
# registrations (core.admin.AdminSite), whose saves record nobody; these save through services that do


@admin.register(User)
class RecordedUserAdmin(ServiceSaveAdmin, UserAdmin):
    """The tenant's admin users: every add, change, password change and delete is recorded."""

    def service_save(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        services.user_save(
            user=obj, username=_username(request), created=not change, changed=form.changed_data
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.account_delete(obj=obj, username=_username(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for obj in queryset:
            services.account_delete(obj=obj, username=_username(request))

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        # the password form saves the user itself (no save_model): record it here
        match = request.resolver_match
        if match is not None and match.url_name == "auth_user_password_change":
            services.account_change_record(
                username=_username(request),
                model="user",
                object_label=obj.get_username(),
                object_id=obj.pk,
                action="update",
                changed=["password"],
            )
        return super().log_change(request, obj, message)


@admin.register(Group)
class RecordedGroupAdmin(ServiceSaveAdmin, GroupAdmin):
    """The tenant's groups (operator, compliance officer, ...): every change is recorded."""

    def service_save(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        services.group_save(
            group=obj, username=_username(request), created=not change, changed=form.changed_data
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.account_delete(obj=obj, username=_username(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for obj in queryset:
            services.account_delete(obj=obj, username=_username(request))


# --- the data lifecycle --------------------------------------------------------------------------------------


def _memory_type_choices() -> list[Any]:
    """Every memory type a layer keeps by its own rule, grouped by layer, after "every type"."""
    grouped: list[Any] = [("", "every type of the layer")]
    for layer in lifecycle.LAYERS:
        kinds = [kind for kind in layer.kinds if kind]
        if layer.aged is not None and kinds:
            grouped.append((layer.label, [(kind, kind) for kind in kinds]))
    return grouped


class RetentionRuleForm(forms.ModelForm):
    """A rule's layer and memory type chosen from the lifecycle's map (the service refuses a type
    its layer lacks); keeping data 0 days needs ``confirm_zero`` ticked, since the next retention
    run then removes all of it."""

    layer = forms.ChoiceField(
        choices=[(layer.name, layer.label) for layer in lifecycle.LAYERS if layer.aged is not None]
    )
    memory_type = forms.ChoiceField(choices=_memory_type_choices, required=False)
    confirm_zero = forms.BooleanField(
        required=False,
        label="Remove everything at once",
        help_text="0 days: the next retention run removes every item of this layer and type (not held)",
    )

    class Meta:
        model = RetentionRule
        fields = ["layer", "memory_type", "keep_days"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("keep_days") == 0 and not data.get("confirm_zero"):
            self.add_error(
                "keep_days",
                "Keeping data 0 days removes all of it at the next retention run: "
                "tick “Remove everything at once” to confirm.",
            )
        return data


@admin.register(RetentionRule)
class RetentionRuleAdmin(ServiceSaveAdmin):
    """Retention rules stored for this tenant (layers without one keep their default: see the dry
    run); saves and deletes go through services that record the person."""

    form = RetentionRuleForm
    fields = ["layer", "memory_type", "keep_days", "confirm_zero", "updated_by", "updated_at"]
    change_list_template = "admin/compliance/retentionrule/change_list.html"
    list_display = ["layer", "memory_type", "keep_days", "updated_by", "updated_at"]
    readonly_fields = ["updated_by", "updated_at"]

    def service_save(self, request: HttpRequest, obj: RetentionRule, form: Any, change: bool) -> None:
        # the form checks the fields; the service refuses a type the layer lacks, or a layer kept
        # otherwise than by age, and the refusal is shown on the form (``ServiceSaveAdmin``)
        services.retention_rule_save(rule=obj, username=_username(request))

    def delete_model(self, request: HttpRequest, obj: RetentionRule) -> None:
        services.retention_rule_delete(rule=obj, username=_username(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RetentionRule]) -> None:
        for rule in queryset:
            services.retention_rule_delete(rule=rule, username=_username(request))

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "dry-run/",
                self.admin_site.admin_view(admin_views.retention_preview_view),
                name="compliance_retentionrule_preview",
            ),
            *super().get_urls(),
        ]


RUN_FIELDS: tuple[str, ...] = ("requested_by", "status", "started_at", "finished_at", "removed", "error")


@admin.register(RetentionRun)
class RetentionRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Retention passes: when, and what each removed per layer."""

    list_display = ["id", "status", "requested_by", "started_at", "finished_at", "removed"]
    list_filter = ["status"]
    fields = RUN_FIELDS
    readonly_fields = RUN_FIELDS


HOLD_FIELDS: tuple[str, ...] = (
    "kind",
    "value",
    "reason",
    "four_eyes",
    "placed_by",
    "placed_at",
    "state",
    "release_requested_by",
    "release_requested_at",
    "released_by",
    "released_at",
    "release_reason",
    "release_page",
)


class LegalHoldForm(forms.ModelForm):
    class Meta:
        model = LegalHold
        fields = ["kind", "value", "reason", "four_eyes", "review_by"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "review_by" in self.fields:
            review_by = self.fields["review_by"]
            review_by.required = "value" not in self.fields  # a placed hold's date is moved, not cleared
            review_by.help_text = f"YYYY-MM-DD; empty: {HOLD_REVIEW_DAYS} days from today"

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "review_by" in self.fields and data.get("review_by") is None and "review_by" not in self.errors:
            data["review_by"] = hold_review_default()
        if "value" not in self.fields:  # a placed hold: only its review date is a field
            return data
        if data.get("kind") != "tenant" and not (data.get("value") or "").strip():
            self.add_error("value", "Name what the hold is on.")
        return data


@admin.register(LegalHold)
class LegalHoldAdmin(ServiceSaveAdmin):
    """Legal holds: placed here (kind, value, reason, whether releasing needs a second officer, the
    review date), released on each hold's release page with a reason
    (``admin_views.hold_release_view``). Of a placed hold only the review date of an active one
    changes (``services.hold_review_set``); holds are never deleted, so the history of who held what
    and when stays."""

    form = LegalHoldForm
    list_display = [
        "id",
        "target_kind",
        "value",
        "reason",
        "placed_by",
        "placed_at",
        "review_by",
        "state",
        "release_page",
    ]
    list_filter = ["kind", ("released_at", admin.EmptyFieldListFilter), "four_eyes"]
    search_fields = ["value", "reason"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["kind", "value", "reason", "four_eyes", "review_by"]
        state = HOLD_FIELDS.index("state") + 1  # the review date next to the hold's state
        return [*HOLD_FIELDS[:state], "review_by", *HOLD_FIELDS[state:]]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return HOLD_FIELDS if obj is not None else []

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # of a placed hold only an active one's review date changes; "change" also releases, on the
        # release page
        active = obj is None or (isinstance(obj, LegalHold) and obj.active)
        return active and super().has_change_permission(request, obj)

    @admin.display(description="kind", ordering="kind")
    def target_kind(self, obj: LegalHold) -> str:
        return obj.kind  # the short name: the choice's label takes a third of the list's width

    @admin.display(description="release")
    def release_page(self, obj: LegalHold) -> SafeString:
        url = reverse("admin:compliance_legalhold_release", args=[obj.pk])
        if not obj.active:
            return format_html('<a href="{}">{}</a>', url, "released")
        return format_html('<a href="{}">{}</a>', url, "confirm or see" if obj.release_waiting else "release")

    def service_save(self, request: HttpRequest, obj: LegalHold, form: Any, change: bool) -> None:
        if change:  # the review date is the one field a placed hold's form holds
            if "review_by" in form.changed_data:
                services.hold_review_set(hold=obj.pk, review_by=obj.review_by, username=_username(request))
            return
        hold = services.hold_place(
            kind=obj.kind,
            value=obj.value,
            reason=obj.reason,
            four_eyes=obj.four_eyes,
            review_by=obj.review_by,
            username=_username(request),
        )
        obj.pk, obj.placed_by, obj.placed_at = hold.pk, hold.placed_by, hold.placed_at

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<int:hold_id>/release/",
                self.admin_site.admin_view(admin_views.hold_release_view),
                name="compliance_legalhold_release",
            ),
            *super().get_urls(),
        ]


ERASURE_FIELDS: tuple[str, ...] = (
    "status",
    "target",
    "legal_basis",
    "note",
    "requested_by",
    "requested_at",
    "approved_by",
    "approved_at",
    "started_at",
    "finished_at",
    "error",
)


@admin.register(ErasureRequest)
class ErasureRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Erasure requests and their state; new ones from the request form, approval and the receipt
    on each request's page."""

    change_list_template = "admin/compliance/erasurerequest/change_list.html"
    list_display = ["short_id", "target", "status", "requested_by", "approved_by", "requested_at", "page"]
    list_filter = ["status", "kind"]
    fields = ERASURE_FIELDS
    readonly_fields = ERASURE_FIELDS

    @admin.display(description="erasure")
    def short_id(self, obj: ErasureRequest) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="target")
    def target(self, obj: ErasureRequest) -> str:
        return shown(obj.target_label, 120)

    @admin.display(description="state, approval and receipt")
    def page(self, obj: ErasureRequest) -> SafeString:
        url = reverse("admin:compliance_erasurerequest_detail", args=[obj.pk])
        return format_html('<a href="{}">open</a>', url)

    def get_urls(self) -> list[URLPattern]:
        site = self.admin_site
        return [
            path("new/", site.admin_view(admin_views.erasure_new_view), name="compliance_erasurerequest_new"),
            path(
                "<uuid:erasure_id>/state/",
                site.admin_view(admin_views.erasure_detail_view),
                name="compliance_erasurerequest_detail",
            ),
            path(
                "<uuid:erasure_id>/approve/",
                site.admin_view(admin_views.erasure_approve_view),
                name="compliance_erasurerequest_approve",
            ),
            path(
                "<uuid:erasure_id>/receipt/",
                site.admin_view(admin_views.erasure_receipt_view),
                name="compliance_erasurerequest_receipt",
            ),
            *super().get_urls(),
        ]
