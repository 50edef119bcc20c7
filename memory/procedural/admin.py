"""Tenant admin for procedural memory: tools and their versions (read-only: agents define them), skills
(operators edit what requests match), the skill editor, diffs, publishing and the queue of agents'
proposals (the htmx views in ``admin_views``), versions and run reports (read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin import (
    EstimatedCountPaginator,
    HtmxHttpRequest,
    ReadOnlyAdminMixin,
    ServiceSaveAdmin,
    session_link,
    shown,
)
from core.errors import DomainError
from memory.embeddings import get_embedder

from . import admin_views, selectors
from .models import Skill, SkillRun, SkillVersion, Tool, ToolVersion, VersionStatus
from .services.common import Actor
from .services.skills import SkillData, skill_create, skill_update

TOOL_VERSION_FIELDS: tuple[str, ...] = (
    "version",
    "description",
    "input_schema",
    "output_schema",
    "author",
    "created_at",
)


class ToolVersionInline(ReadOnlyAdminMixin, admin.StackedInline):
    """Every contract the tool has had, newest first (immutable: skills pin them)."""

    model = ToolVersion
    fields = TOOL_VERSION_FIELDS
    readonly_fields = TOOL_VERSION_FIELDS
    extra = 0
    can_delete = False
    ordering = ["-version"]

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.has_perm("memory.view_toolversion") or request.user.has_perm("memory.view_tool")


@admin.register(Tool)
class ToolAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Tools are defined by agents (``POST /api/v1/tools``); here their contracts are read."""

    list_display = ["name", "latest_version", "latest_description", "created_at"]
    search_fields = ["name", "versions__description"]
    fields = ["name", "created_at"]
    readonly_fields = ["name", "created_at"]
    inlines = [ToolVersionInline]

    @admin.display(description="version")
    def latest_version(self, obj: Tool) -> int | None:
        return getattr(obj, "latest", None)

    @admin.display(description="description")
    def latest_description(self, obj: Tool) -> str:
        return shown(getattr(obj, "latest_text", "") or "", 100)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        from django.db.models import OuterRef, Subquery

        newest = ToolVersion.objects.filter(tool=OuterRef("pk")).order_by("-version")
        return (
            super()
            .get_queryset(request)
            .annotate(
                latest=Subquery(newest.values("version")[:1]),
                latest_text=Subquery(newest.values("description")[:1]),
            )
        )


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


class SkillForm(forms.ModelForm):
    """What describes a skill; intents one per line, tags separated by commas."""

    intents_lines = forms.CharField(
        label="intents",
        required=False,
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text="One per line: phrases an agent's request may match (embedded with the title and description).",
    )
    tags_text = forms.CharField(label="tags", required=False, help_text="Separated by commas.")

    class Meta:
        model = Skill
        fields = ["name", "title", "description", "owner"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["intents_lines"].initial = "\n".join(self.instance.intents)
            self.fields["tags_text"].initial = ", ".join(self.instance.tags)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        data["intents"] = _lines(data.get("intents_lines", ""))
        data["tags"] = [t.strip() for t in data.get("tags_text", "").split(",") if t.strip()]
        try:
            get_embedder()  # what requests match is embedded on save: say so now if that cannot work
        except DomainError as error:
            raise forms.ValidationError(error.message) from error
        return data


class TagFilter(admin.SimpleListFilter):
    """Skills by one tag: each tag the skills carry, as text (Django's filter on the JSON list
    would offer each whole list, in Python's notation)."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        tags = {
            tag
            for row in Skill.objects.values_list("tags", flat=True)
            for tag in row or []
            if isinstance(tag, str)
        }
        return [(tag, tag) for tag in sorted(tags)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Skill]) -> QuerySet[Skill]:
        value = self.value()
        return queryset.filter(tags__contains=[value]) if value else queryset


@admin.register(Skill)
class SkillAdmin(ServiceSaveAdmin):
    """Skills with their published version, its success rate and their open drafts; the change page
    lists every version with links to the editor, its diff and the publish controls."""

    form = SkillForm
    list_display = [
        "name",
        "title",
        "published",
        "success_rate",
        "drafts",
        "owner",
        "updated_at",
    ]
    list_filter = [TagFilter]
    search_fields = ["name", "title", "description", "intents_text"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    change_list_template = "admin/memory/skill/change_list.html"
    readonly_fields = ["versions_table", "created_by", "created_at", "updated_at"]

    def get_fieldsets(self, request: HttpRequest, obj: Skill | None = None) -> Any:
        fieldsets: list[tuple[str | None, dict[str, Any]]] = [
            (None, {"fields": ["name", "title", "description", "intents_lines", "tags_text", "owner"]}),
        ]
        if obj is not None:
            fieldsets += [
                ("Versions", {"fields": ["versions_table"]}),
                ("Record", {"fields": ["created_by", "created_at", "updated_at"]}),
            ]
        return fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Skill | None = None) -> list[str]:
        fields = list(self.readonly_fields)
        if obj is not None:
            fields.append("name")  # versions, runs and the trail refer to it
        return fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Skill]:
        return selectors.skills_for_admin()

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # retire its versions instead: runs and the trail refer to it

    @admin.display(description="published", ordering="published_number")
    def published(self, obj: Skill) -> str:
        number = getattr(obj, "published_number", None)
        return f"v{number}" if number else "-"

    @admin.display(description="success rate")
    def success_rate(self, obj: Skill) -> str:
        runs, successes = getattr(obj, "published_runs", None), getattr(obj, "published_successes", None)
        if not runs:
            return "no runs"
        return f"{100 * (successes or 0) / runs:.0f}% of {runs}"

    @admin.display(description="open drafts")
    def drafts(self, obj: Skill) -> SafeString | str:
        drafts, proposals = getattr(obj, "open_drafts", 0), getattr(obj, "open_proposals", 0)
        if not drafts:
            return "-"
        if proposals:
            return format_html(
                '{} <span class="sk-proposed">({} proposed by agents)</span>', drafts, proposals
            )
        return str(drafts)

    @admin.display(description="versions")
    def versions_table(self, obj: Skill) -> SafeString:
        return render_to_string(
            "admin/memory/skill/_versions_table.html",
            {"skill": obj, "versions": admin_views.version_rows(obj)},
        )

    def service_save(self, request: HttpRequest, obj: Skill, form: forms.ModelForm, change: bool) -> None:
        """Through ``skill_create`` / ``skill_update``, which record the change as this person."""
        actor = Actor(username=request.user.get_username())
        data = SkillData(
            title=obj.title,
            description=obj.description,
            intents=form.cleaned_data["intents"],
            tags=form.cleaned_data["tags"],
            owner=obj.owner,
        )
        if change:
            saved, _ = skill_update(actor=actor, skill_id=obj.pk, data=data)
        else:
            saved = skill_create(actor=actor, name=obj.name, data=data).skill
        obj.pk, obj.created_at = saved.pk, saved.created_at

    def get_urls(self) -> list[URLPattern]:
        """The editor and version page, publish, retire, new draft, the diff and the proposals queue,
        before the model's own URLs (``admin:memory_skill_<name>``)."""
        view = self.admin_site.admin_view
        return [
            path("proposals/", view(self.proposals_view), name="memory_skill_proposals"),
            path("<int:skill_id>/diff/", view(self.diff_view), name="memory_skill_diff"),
            path(
                "<int:skill_id>/versions/<int:number>/",
                view(self.version_view),
                name="memory_skill_version",
            ),
            path(
                "<int:skill_id>/versions/<int:number>/publish/",
                view(self.publish_view),
                name="memory_skill_publish",
            ),
            path(
                "<int:skill_id>/versions/<int:number>/retire/",
                view(self.retire_view),
                name="memory_skill_retire",
            ),
            path(
                "<int:skill_id>/versions/<int:number>/draft/",
                view(self.draft_view),
                name="memory_skill_draft",
            ),
            *super().get_urls(),
        ]

    def proposals_view(self, request: HtmxHttpRequest) -> HttpResponse:
        return admin_views.proposals_view(self, request)

    def diff_view(self, request: HtmxHttpRequest, skill_id: int) -> HttpResponse:
        return admin_views.diff_view(self, request, skill_id)

    def version_view(self, request: HtmxHttpRequest, skill_id: int, number: int) -> HttpResponse:
        return admin_views.version_view(self, request, skill_id, number)

    def publish_view(self, request: HtmxHttpRequest, skill_id: int, number: int) -> HttpResponse:
        return admin_views.publish_view(self, request, skill_id, number)

    def retire_view(self, request: HtmxHttpRequest, skill_id: int, number: int) -> HttpResponse:
        return admin_views.retire_view(self, request, skill_id, number)

    def draft_view(self, request: HtmxHttpRequest, skill_id: int, number: int) -> HttpResponse:
        return admin_views.draft_view(self, request, skill_id, number)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        extra_context = {**(extra_context or {}), "proposal_count": len(selectors.proposals_open())}
        return super().changelist_view(request, extra_context)


VERSION_FIELDS: tuple[str, ...] = (
    "skill",
    "number",
    "status",
    "editor_link",
    "change_note",
    "author",
    "proposed_by",
    "source_session_id",
    "based_on",
    "revision",
    "tool_versions",
    "created_at",
    "published_at",
    "published_by",
    "status_changed_at",
    "retired_at",
    "input_schema",
    "steps",
)


@admin.register(SkillVersion)
class SkillVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Every version of every skill, to filter (status, proposed by agents); edits happen in the editor."""

    list_display = [
        "skill",
        "number",
        "state",
        "author",
        "proposed_by",
        "created_at",
        "published_at",
        "editor_link",
    ]
    list_filter = ["status", ("proposed_by", admin.EmptyFieldListFilter), "skill"]
    list_select_related = ["skill", "proposed_by"]
    search_fields = ["skill__name", "change_note", "author"]
    ordering = ["-created_at", "-id"]
    fields = VERSION_FIELDS
    readonly_fields = VERSION_FIELDS

    @admin.display(description="status", ordering="status")
    def state(self, obj: SkillVersion) -> str:
        """The status in words: a retired version never published is a rejected draft."""
        if obj.status == VersionStatus.RETIRED and obj.published_at is None:
            return "Rejected"
        return str(obj.get_status_display())

    @admin.display(description="page")
    def editor_link(self, obj: SkillVersion) -> SafeString:
        url = reverse("admin:memory_skill_version", args=[obj.skill_id, obj.number])
        label = "edit / review" if obj.status == VersionStatus.DRAFT else "view"
        return format_html('<a href="{}">{}</a>', url, label)

    def get_queryset(self, request: HttpRequest) -> QuerySet[SkillVersion]:
        return super().get_queryset(request).defer("skill__embedding", "skill__search")


RUN_FIELDS: tuple[str, ...] = (
    "version",
    "agent",
    "success",
    "failed_step",
    "duration_ms",
    "session",
    "error",
    "reported_at",
)


@admin.register(SkillRun)
class SkillRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Runs as agents reported them (read-only)."""

    list_display = ["version", "agent", "success", "failed_step", "duration_ms", "session", "reported_at"]
    list_filter = ["success", "agent", "version__skill"]
    list_select_related = ["version__skill", "agent"]
    search_fields = ["version__skill__name", "session_id", "failed_step"]
    ordering = ["-reported_at", "-id"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    fields = RUN_FIELDS
    readonly_fields = RUN_FIELDS

    @admin.display(description="session", ordering="session_id")
    def session(self, obj: SkillRun) -> SafeString:
        return session_link(obj.session_id)  # the session's timeline, where the run is a row

    def get_queryset(self, request: HttpRequest) -> QuerySet[SkillRun]:
        return super().get_queryset(request).defer("version__skill__embedding", "version__skill__search")
