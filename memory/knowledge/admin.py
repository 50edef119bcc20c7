"""Tenant admin for the knowledge layer: predicates (cardinality), entities, facts with their history,
contradictions and their review queue (the htmx views in ``admin_views``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.validators import RegexValidator
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.admin import (
    EstimatedCountPaginator,
    HtmxHttpRequest,
    ReadOnlyAdminMixin,
    ServiceSaveAdmin,
    session_link,
    shown,
)

from . import admin_views
from .models import (
    PREDICATE_PATTERN,
    Cardinality,
    Contradiction,
    ContradictionStatus,
    Entity,
    Fact,
    FactProvenance,
    Predicate,
)
from .services import predicate_save


class PredicateForm(forms.ModelForm):
    """Checks a new predicate's name the way the API does (snake_case, at most 64 characters)."""

    class Meta:
        model = Predicate
        fields = ["name", "cardinality", "description"]
        help_texts = {
            "cardinality": "one: another object for the same subject opens a contradiction; many: objects "
            "accumulate. Changing it leaves contradictions already open in the review queue.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "name" in self.fields:
            self.fields["name"].validators.append(
                RegexValidator(
                    PREDICATE_PATTERN,
                    "snake_case: a lowercase letter, then lowercase letters, digits or '_'.",
                )
            )


@admin.register(Predicate)
class PredicateAdmin(ServiceSaveAdmin):
    """Predicates: the name is fixed once created (facts refer to it); cardinality and description
    can be edited. Changing the cardinality also needs ``memory.change_cardinality``."""

    form = PredicateForm
    list_display = ["name", "cardinality", "short_description", "created_at"]
    list_filter = ["cardinality"]
    search_fields = ["name", "description"]
    ordering = ["name"]

    @admin.display(description="description")
    def short_description(self, obj: Predicate) -> str:
        return shown(obj.description, 100)

    def get_readonly_fields(self, request: HttpRequest, obj: Predicate | None = None) -> list[str]:
        fields = ["created_at"]
        if obj is not None:
            fields.append("name")
        if not request.user.has_perm("memory.change_cardinality"):
            fields.append("cardinality")
        return fields

    def get_fields(self, request: HttpRequest, obj: Predicate | None = None) -> tuple[str, ...]:
        return ("name", "cardinality", "description", "created_at")

    def service_save(self, request: HttpRequest, obj: Predicate, form: forms.ModelForm, change: bool) -> None:
        """Through ``services.predicate_save``, which records the change in the trail as this person."""
        saved, changed = predicate_save(
            name=obj.name,
            cardinality=obj.cardinality,
            description=obj.description,
            username=request.user.get_username(),
            predicate_id=obj.pk if change else None,
        )
        obj.pk, obj.created_at = saved.pk, saved.created_at
        if change and "cardinality" in changed and obj.cardinality == Cardinality.MANY:
            still_open = Contradiction.objects.filter(
                status=ContradictionStatus.OPEN, new_fact__predicate=obj
            ).count()
            if still_open:
                self.message_user(
                    request,
                    f"{obj.name} is now 'many'. {still_open} open contradiction(s) on it stay in the review "
                    "queue; resolve them as 'both valid' to make their disputed facts active.",
                    messages.WARNING,
                )


ENTITY_FIELDS: tuple[str, ...] = ("name", "key", "entity_type", "aliases", "created_at", "facts")


@admin.register(Entity)
class EntityAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Entities are created by asserted facts; here they are looked up, with their aliases."""

    list_display = ["name", "entity_type", "alias_list", "key", "created_at"]
    list_filter = ["entity_type"]
    search_fields = ["name", "key", "aliases"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    fields = ENTITY_FIELDS
    readonly_fields = ENTITY_FIELDS

    @admin.display(description="aliases")
    def alias_list(self, obj: Entity) -> str:
        return ", ".join(obj.aliases)

    @admin.display(description="facts")
    def facts(self, obj: Entity) -> SafeString:
        url = reverse("admin:memory_fact_changelist")
        return format_html(
            '<a href="{}?subject__id__exact={}">as subject</a> · <a href="{}?object_entity__id__exact={}">as object</a>',
            url,
            obj.pk,
            url,
            obj.pk,
        )


FACT_PROVENANCE_INLINE_FIELDS: tuple[str, ...] = (
    "asserted_at",
    "agent",
    "session",
    "confidence",
    "source_event_text",
)


class FactProvenanceInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Every assertion of the fact: who, in which session, when, how confident, from which event."""

    model = FactProvenance
    verbose_name = "assertion"
    verbose_name_plural = "history: assertions (provenance)"
    fields = FACT_PROVENANCE_INLINE_FIELDS
    readonly_fields = FACT_PROVENANCE_INLINE_FIELDS
    extra = 0
    can_delete = False

    @admin.display(description="session")
    def session(self, obj: FactProvenance) -> SafeString:
        return session_link(obj.session_id)

    @admin.display(description="source event")
    def source_event_text(self, obj: FactProvenance) -> str | None:
        if obj.source_event is None:
            return None  # shown as the admin's empty value
        return f"#{obj.source_event.seq} ({obj.source_event.kind}): {shown(obj.source_event.content, 300)}"

    def get_queryset(self, request: HttpRequest) -> QuerySet[FactProvenance]:
        return (
            super()
            .get_queryset(request)
            .select_related("agent", "source_event")
            .defer("source_event__search")
        )

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # the history belongs to the fact: whoever may see the fact sees it
        return request.user.has_perm("memory.view_fact") or request.user.has_perm("memory.change_fact")


@admin.register(Fact)
class FactAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Facts are asserted by agents and changed by resolving contradictions (the review queue) or
    by an agent's retraction; here they are read, with their assertions and contradictions."""

    list_display = [
        "id",
        "subject",
        "predicate",
        "object_display",
        "status",
        "confidence",
        "agent",
        "session",
        "valid_from",
        "valid_to",
    ]
    list_display_links = ["id", "subject"]
    list_filter = ["status", "predicate", "agent"]
    list_select_related = ["subject", "predicate", "object_entity", "agent"]
    search_fields = ["subject__name", "subject__key", "object_entity__name", "predicate__name", "session_id"]
    ordering = ["-recorded_at", "-id"]
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    fieldsets = [
        (None, {"fields": ["subject", "predicate", "object_display", "status", "confidence"]}),
        ("Time", {"fields": ["valid_from", "valid_to", "recorded_at"]}),
        ("First asserted by", {"fields": ["agent", "session", "source_event"]}),
        ("History: contradictions", {"fields": ["contradictions"]}),
    ]
    readonly_fields = [
        "subject",
        "predicate",
        "object_display",
        "status",
        "confidence",
        "valid_from",
        "valid_to",
        "recorded_at",
        "agent",
        "session",
        "source_event",
        "contradictions",
    ]
    inlines = [FactProvenanceInline]

    @admin.display(description="session", ordering="session_id")
    def session(self, obj: Fact) -> SafeString:
        return session_link(obj.session_id)

    @admin.display(description="object")
    def object_display(self, obj: Fact) -> str:
        text, kind = admin_views.object_parts(obj)
        return text if kind == "entity" else f"{text} ({kind})"

    @admin.display(description="contradictions")
    def contradictions(self, obj: Fact) -> SafeString:
        rows = (
            Contradiction.objects.filter(Q(existing_fact=obj) | Q(new_fact=obj))
            .select_related("existing_fact__object_entity", "new_fact__object_entity")
            .order_by("created_at", "id")
        )
        items = []
        for contradiction in rows:
            as_existing = contradiction.existing_fact_id == obj.pk
            other = contradiction.new_fact if as_existing else contradiction.existing_fact
            text, kind = admin_views.object_parts(other)
            items.append(
                {
                    "contradiction": contradiction,
                    "role": "existing" if as_existing else "new",
                    "other": other,
                    "other_object": text if kind == "entity" else f"{text} ({kind})",
                }
            )
        return render_to_string("admin/memory/fact/_contradictions.html", {"items": items})

    def get_queryset(self, request: HttpRequest) -> QuerySet[Fact]:
        return super().get_queryset(request).select_related("source_event").defer("source_event__search")


CONTRADICTION_FIELDS: tuple[str, ...] = (
    "existing_fact",
    "new_fact",
    "status",
    "resolution",
    "reviewer",
    "resolved_at",
    "note",
    "created_at",
    "decision_event",
    "in_the_trail",
)


@admin.register(Contradiction)
class ContradictionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Contradictions as a list (with filters) and the review queue where operators resolve them."""

    change_list_template = "admin/memory/contradiction/change_list.html"
    list_display = [
        "id",
        "subject",
        "predicate",
        "existing_object",
        "new_object",
        "status",
        "resolution",
        "reviewer",
        "created_at",
        "resolved_at",
    ]
    list_filter = ["status", "resolution", "existing_fact__predicate"]
    list_select_related = [
        "existing_fact__subject",
        "existing_fact__predicate",
        "existing_fact__object_entity",
        "new_fact__object_entity",
    ]
    search_fields = ["existing_fact__subject__name", "existing_fact__predicate__name", "reviewer", "note"]
    ordering = ["-created_at", "-id"]
    show_full_result_count = False
    fields = CONTRADICTION_FIELDS
    readonly_fields = CONTRADICTION_FIELDS

    @admin.display(description="subject")
    def subject(self, obj: Contradiction) -> str:
        return str(obj.existing_fact.subject)

    @admin.display(description="predicate")
    def predicate(self, obj: Contradiction) -> str:
        return str(obj.existing_fact.predicate)

    @admin.display(description="in the trail")
    def in_the_trail(self, obj: Contradiction) -> SafeString:
        """Links to the session timelines where each fact was asserted and the decision recorded."""
        rows = [
            ("existing fact asserted in", obj.existing_fact.session_id),
            ("new fact asserted in", obj.new_fact.session_id),
        ]
        if obj.decision_event is not None:
            rows.append(("decided in", obj.decision_event.session_id))
        return format_html_join(
            SafeString("<br>"), "{}: {}", ((label, session_link(session)) for label, session in rows)
        )

    @admin.display(description="existing")
    def existing_object(self, obj: Contradiction) -> str:
        return admin_views.object_parts(obj.existing_fact)[0]

    @admin.display(description="new")
    def new_object(self, obj: Contradiction) -> str:
        return admin_views.object_parts(obj.new_fact)[0]

    def get_urls(self) -> list[URLPattern]:
        """The review queue (``admin:memory_contradiction_queue``) and its resolve endpoint
        (``admin:memory_contradiction_resolve``), before the model's own URLs."""
        return [
            path(
                "queue/",
                self.admin_site.admin_view(self.queue_view),
                name="memory_contradiction_queue",
            ),
            path(
                "<int:contradiction_id>/resolve/",
                self.admin_site.admin_view(self.resolve_view),
                name="memory_contradiction_resolve",
            ),
            *super().get_urls(),
        ]

    def queue_view(self, request: HtmxHttpRequest) -> HttpResponse:
        return admin_views.queue_view(self, request)

    def resolve_view(self, request: HtmxHttpRequest, contradiction_id: int) -> HttpResponse:
        return admin_views.resolve_view(self, request, contradiction_id)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        extra_context = {
            **(extra_context or {}),
            "open_count": Contradiction.objects.filter(status=ContradictionStatus.OPEN).count(),
        }
        return super().changelist_view(request, extra_context)
