"""Agents' and keys' changes are recorded in the trail by ``agents.services`` itself, whichever door
the change comes through: the admin, ``api_key_create``, ``api_key_revoke``, ``bootstrap_demo``.
And each model has the one admin its app registers: no admin module unregisters another's."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client
from django_tenants.utils import tenant_context

from agents.models import Agent, ApiKey
from agents.services import agent_create, api_key_revoke
from core import recording
from core.recording import Actor
from memory.episodic.models import Event, EventKind
from memory.episodic.selectors import chain_verify
from tests.factories import BASE_DIR, Caller, admin_client


def decisions(tenant, action: str) -> list[Event]:  # type: ignore[no-untyped-def]
    with tenant_context(tenant):
        return list(
            Event.objects.filter(kind=EventKind.DECISION, payload_index__action=action)
            .select_related("agent")
            .order_by("seq")
        )


def test_the_key_commands_record_the_agent_the_key_and_the_revocation(alice: Caller) -> None:
    out = io.StringIO()
    call_command("api_key_create", tenant="alpha", agent="scout", role="explorer", stdout=out)
    key_id = out.getvalue().strip().split(".")[2]
    (agent_created,) = decisions(alice.tenant, "agent_create")
    assert agent_created.actor == "command:api_key_create"
    assert agent_created.session_id == "command:api_key_create"
    assert agent_created.agent.name == "engram-system"
    assert agent_created.payload["changes"] == {"name": "scout", "role": "explorer", "is_active": True}
    (key_created,) = decisions(alice.tenant, "api_key_create")
    assert key_created.actor == "command:api_key_create"
    assert key_created.payload == {
        "action": "api_key_create",
        "agent": "scout",
        "key_id": key_id,
        "scopes": ["read", "write"],
        "name": "cli",
    }
    assert out.getvalue().strip().split(".")[3] not in key_created.payload_json  # never the secret

    call_command("api_key_revoke", key_id, tenant="alpha", stdout=io.StringIO())
    call_command("api_key_revoke", key_id, tenant="alpha", stdout=io.StringIO())  # again: nothing new
    (revoked,) = decisions(alice.tenant, "api_key_revoke")
    assert revoked.actor == "command:api_key_revoke"
    assert revoked.payload == {"action": "api_key_revoke", "agent": "scout", "key_id": key_id}
    with tenant_context(alice.tenant):
        assert chain_verify().ok


def test_bootstrap_demo_records_its_agent_key_and_admin_user(alice: Caller, tmp_path: Path) -> None:
    call_command(
        "bootstrap_demo", slug="alpha", credentials_file=tmp_path / "credentials", stdout=io.StringIO()
    )
    with tenant_context(alice.tenant):
        key = ApiKey.objects.get(agent__name="demo-agent")
    assert [(e.actor, e.payload["agent"]) for e in decisions(alice.tenant, "agent_create")] == [
        ("command:bootstrap_demo", "demo-agent")
    ]
    (key_created,) = decisions(alice.tenant, "api_key_create")
    assert key_created.actor == "command:bootstrap_demo" and key_created.payload["key_id"] == key.key_id
    (user_created,) = decisions(alice.tenant, "user_create")
    assert user_created.actor == "command:bootstrap_demo" and user_created.payload["object"] == "admin"


def test_a_key_revoked_and_an_agent_changed_in_the_admin_are_recorded(alice: Caller) -> None:
    root: Client = admin_client(alice.tenant, "root", superuser=True)
    with tenant_context(alice.tenant):
        key = alice.agent.api_keys.get()
    root.post("/admin/agents/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    (revoked,) = decisions(alice.tenant, "api_key_revoke")
    assert revoked.actor == "user:root" and revoked.session_id == "admin:root"
    assert revoked.payload["key_id"] == key.key_id
    changed = root.post(
        f"/admin/agents/agent/{alice.agent.pk}/change/",
        {
            "name": "alice",
            "role": "planner",
            "created_at_0": "2026-01-01",
            "created_at_1": "10:00:00",
            "api_keys-TOTAL_FORMS": "0",
            "api_keys-INITIAL_FORMS": "1",
        },
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]
    (updated,) = decisions(alice.tenant, "agent_update")
    assert updated.actor == "user:root" and updated.payload["changes"]["role"] == "planner"


def test_a_change_is_refused_when_no_recorder_is_registered(alice: Caller) -> None:
    saved = list(recording._recorder)
    recording._recorder.clear()
    try:
        with tenant_context(alice.tenant):
            with pytest.raises(RuntimeError, match="no trail recorder"):
                agent_create(name="unrecorded", by=Actor.command("test"))
            with pytest.raises(RuntimeError, match="no trail recorder"):
                api_key_revoke(api_key=alice.agent.api_keys.get(), by=Actor.command("test"))
            assert not Agent.objects.filter(name="unrecorded").exists()  # rolled back with it
            assert alice.agent.api_keys.get().revoked_at is None
    finally:
        recording._recorder[:] = saved


def test_no_admin_module_unregisters_another_apps_admin() -> None:
    project = [Path(c.path) for c in apps.get_app_configs() if Path(c.path).is_relative_to(BASE_DIR)]
    admin_modules = [module for path in project for module in path.rglob("admin.py")]
    assert len(admin_modules) >= 10  # agents, tenants, compliance, memory and its layers
    for module in admin_modules:
        assert not re.search(r"\bunregister\(", module.read_text()), module


def test_each_model_has_the_admin_its_app_registers() -> None:
    registry = admin.site._registry
    assert type(registry[Agent]).__module__ == "agents.admin"
    assert type(registry[ApiKey]).__module__ == "agents.admin"
    assert type(registry[User]).__module__ == "compliance.admin"  # django.contrib.auth's declined
    assert type(registry[Group]).__module__ == "compliance.admin"
