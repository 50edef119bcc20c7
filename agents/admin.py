"""Tenant admin for agents and API keys: every save and action goes through ``agents.services``,
which records the person in the trail. New keys are shown once, in a message, and never again."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from core.admin import ServiceSaveAdmin
from core.errors import InvalidInput
from core.recording import Actor

from .models import Agent, ApiKey, Scope
from .services import agent_save, api_key_create, api_key_rename, api_key_revoke


def _person(request: HttpRequest) -> Actor:
    return Actor.person(request.user.get_username())


def _announce_key(request: HttpRequest, agent: Agent, raw_key: str) -> None:
    messages.warning(
        request, f"New API key for {agent.name} (copy it now, it will not be shown again): {raw_key}"
    )


API_KEY_INLINE_FIELDS: tuple[str, ...] = (
    "key_id",
    "name",
    "scopes",
    "data_subject",
    "created_at",
    "last_used_at",
    "revoked_at",
)


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    fields = API_KEY_INLINE_FIELDS
    readonly_fields = API_KEY_INLINE_FIELDS
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(ServiceSaveAdmin):
    """Agents: saves and key minting go through services that record the person."""

    list_display = ["name", "role", "is_active", "created_at"]
    list_filter = ["is_active", "role"]
    search_fields = ["name", "role"]
    inlines = [ApiKeyInline]
    actions = ["mint_read_write_key", "mint_read_only_key"]

    def has_mint_key_permission(self, request: HttpRequest) -> bool:
        """Minting a key adds an ``ApiKey``: it needs ``agents.add_apikey``, not a permission on
        the agent (a key is a credential for the API, more than a change of the agent)."""
        opts = ApiKey._meta
        return request.user.has_perm(f"{opts.app_label}.{get_permission_codename('add', opts)}")

    def service_save(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        agent_save(agent=obj, changed=form.changed_data, created=not change, by=_person(request))

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # events, facts and memories refer to agents: deactivate instead

    def _mint(self, request: HttpRequest, queryset: QuerySet[Agent], scopes: list[str], name: str) -> None:
        for agent in queryset:
            try:
                _, raw = api_key_create(agent=agent, scopes=scopes, name=name, by=_person(request))
            except InvalidInput as exc:  # a deactivated agent: no key, and say so
                self.message_user(request, exc.message, messages.ERROR)
                continue
            _announce_key(request, agent, raw)

    @admin.action(description="Create a read + write API key", permissions=["mint_key"])
    def mint_read_write_key(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        self._mint(request, queryset, [Scope.READ, Scope.WRITE], "admin")

    @admin.action(description="Create a read-only API key", permissions=["mint_key"])
    def mint_read_only_key(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        self._mint(request, queryset, [Scope.READ], "admin (read-only)")


class ApiKeyForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[Scope.READ],
        help_text="read: GET endpoints and search; write: everything that stores or changes its own "
        "memory; curate: also forget other agents' memories and retract other agents' facts.",
    )

    class Meta:
        model = ApiKey
        fields = ["agent", "name", "scopes", "data_subject"]

    def clean_agent(self) -> Agent:
        agent: Agent = self.cleaned_data["agent"]
        if agent is not None and not agent.is_active:
            raise forms.ValidationError(f"{agent.name} is deactivated: it cannot be given a key.")
        return agent


@admin.register(ApiKey)
class ApiKeyAdmin(ServiceSaveAdmin):
    form = ApiKeyForm
    list_display = ["key_id", "agent", *API_KEY_INLINE_FIELDS[1:]]
    list_filter = ["agent", "revoked_at"]
    list_select_related = ["agent"]
    search_fields = ["key_id", "name", "agent__name", "data_subject"]
    fields = ["agent", "name", "scopes", "data_subject", "key_id", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["key_id", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        return self.readonly_fields + (["agent", "scopes", "data_subject"] if obj else [])

    def service_save(self, request: HttpRequest, obj: ApiKey, form: object, change: bool) -> None:
        if change:
            api_key_rename(api_key=obj, name=obj.name, by=_person(request))
            return
        key, raw = api_key_create(
            agent=obj.agent,
            scopes=obj.scopes or [Scope.READ],
            name=obj.name,
            data_subject=obj.data_subject.strip(),
            by=_person(request),
        )
        obj.pk, obj.key_id = key.pk, key.key_id
        _announce_key(request, obj.agent, raw)

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # revoke instead: the key id stays for the audit trail

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        count = 0
        for key in queryset.filter(revoked_at__isnull=True).select_related("agent"):
            api_key_revoke(api_key=key, by=_person(request))
            count += 1
        self.message_user(request, f"Revoked {count} key(s) at {timezone.now():%Y-%m-%d %H:%M} UTC.")
