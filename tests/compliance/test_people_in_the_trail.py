"""Every change a person makes in the tenant admin is in the hash chain with that person as actor,
recorded by the service that makes it: key create / revoke / rename, agent changes, users and
groups (password changes too), contradiction resolutions, forgetting a memory, predicate edits,
logins and failed logins. Django's test client against the real PostgreSQL."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django_tenants.utils import tenant_context

from agents.models import ApiKey
from memory.episodic.models import Event, EventKind
from memory.episodic.selectors import chain_verify
from tests.factories import HTMX, PASSWORD, Caller, admin_client, conflict_make, requires_model, resolve_url


def decisions(tenant, action: str) -> list[Event]:  # type: ignore[no-untyped-def]
    with tenant_context(tenant):
        return list(
            Event.objects.filter(kind=EventKind.DECISION, payload_index__action=action)
            .select_related("agent")
            .order_by("seq")
        )


@pytest.fixture
def root(alice: Caller) -> Client:
    return admin_client(alice.tenant, "root", superuser=True)


def test_logins_and_failed_logins_are_in_the_trail(alice: Caller) -> None:
    admin_client(alice.tenant, "officer", group="compliance officer")
    client = Client(HTTP_HOST="alpha.localhost")
    client.post("/admin/login/", {"username": "officer", "password": "wrong"})
    client.post("/admin/login/", {"username": "ghost", "password": "wrong"})
    (login,) = decisions(alice.tenant, "login")
    assert login.actor == "user:officer" and login.session_id == "admin:officer"
    assert login.agent.name == "engram-system"
    failed = decisions(alice.tenant, "login_failed")
    assert [(e.actor, e.payload["username"]) for e in failed] == [
        ("anonymous", "officer"),
        ("anonymous", "ghost"),
    ]
    with tenant_context(alice.tenant):
        assert chain_verify().ok


def test_platform_logins_stay_out_of_the_tenants_trails(alice: Caller) -> None:
    from django_tenants.utils import schema_context

    with schema_context("public"):
        User.objects.create_superuser("platform", "p@example.com", PASSWORD)
    client = Client(HTTP_HOST="localhost")
    assert client.post("/admin/login/", {"username": "platform", "password": PASSWORD}).status_code == 302
    assert decisions(alice.tenant, "login") == []


def test_key_create_rename_and_revoke_name_the_person(alice: Caller, root: Client) -> None:
    page = root.post(
        "/admin/agents/agent/",
        {"action": "mint_read_only_key", "_selected_action": [alice.agent.pk]},
        follow=True,
    ).content.decode()
    raw = page.split("shown again): ")[1].split("<")[0].strip()
    key_id = raw.split(".")[2]
    (created,) = decisions(alice.tenant, "api_key_create")
    assert created.actor == "user:root" and created.payload["key_id"] == key_id
    assert created.payload["scopes"] == ["read"] and raw.split(".")[3] not in created.payload_json
    with tenant_context(alice.tenant):
        key = ApiKey.objects.get(key_id=key_id)
    root.post(f"/admin/agents/apikey/{key.pk}/change/", {"name": "ci runner"})
    (renamed,) = decisions(alice.tenant, "api_key_update")
    assert renamed.payload["changes"] == {"name": ["admin (read-only)", "ci runner"]}
    root.post("/admin/agents/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    root.post(
        "/admin/agents/apikey/", {"action": "revoke", "_selected_action": [key.pk]}
    )  # again: nothing new
    (revoked,) = decisions(alice.tenant, "api_key_revoke")
    assert revoked.actor == "user:root" and revoked.payload == {
        "action": "api_key_revoke",
        "agent": "alice",
        "key_id": key_id,
    }
    # a key added on the add form, too
    root.post("/admin/agents/apikey/add/", {"agent": alice.agent.pk, "name": "by form", "scopes": ["read"]})
    assert [e.payload["name"] for e in decisions(alice.tenant, "api_key_create")] == [
        "admin (read-only)",
        "by form",
    ]


def test_agent_changes_name_the_person(alice: Caller, root: Client) -> None:
    root.post(
        "/admin/agents/agent/add/",
        {
            "name": "critic",
            "role": "reviewer",
            "is_active": "on",
            "created_at_0": "2026-01-01",
            "created_at_1": "10:00:00",
            "api_keys-TOTAL_FORMS": "0",
            "api_keys-INITIAL_FORMS": "0",
        },
    )
    root.post(
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
    created, updated = decisions(alice.tenant, "agent_create"), decisions(alice.tenant, "agent_update")
    assert [e.payload["agent"] for e in created] == ["critic"]
    assert (
        updated and updated[-1].actor == "user:root" and updated[-1].payload["changes"]["role"] == "planner"
    )


def test_user_and_group_changes_name_the_person(alice: Caller, root: Client) -> None:
    response = root.post(
        "/admin/auth/user/add/",
        {
            "username": "newbie",
            "password1": "Newbie-pw-98765",
            "password2": "Newbie-pw-98765",
            "usable_password": "true",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    with tenant_context(alice.tenant):
        newbie = User.objects.get(username="newbie")
        group = Group.objects.get(name="operator")
    root.post(
        f"/admin/auth/user/{newbie.pk}/password/",
        {"password1": "Other-pw-98765", "password2": "Other-pw-98765", "usable_password": "true"},
    )
    root.post(f"/admin/auth/group/{group.pk}/change/", {"name": "operators"})
    root.post(f"/admin/auth/user/{newbie.pk}/delete/", {"post": "yes"})
    assert [e.payload["object"] for e in decisions(alice.tenant, "user_create")] == ["newbie"]
    (password,) = decisions(alice.tenant, "user_update")
    assert password.payload["fields"] == ["password"] and "Other-pw" not in password.payload_json
    (renamed,) = decisions(alice.tenant, "group_update")
    assert renamed.actor == "user:root" and renamed.payload["object"] == "operators"
    (deleted,) = decisions(alice.tenant, "user_delete")
    assert deleted.payload["object"] == "newbie"


def test_a_contradiction_resolution_names_the_person_in_the_facts_session(alice: Caller, bob: Caller) -> None:
    operator = admin_client(alice.tenant, "op", group="operator")
    with tenant_context(alice.tenant):
        dispute = conflict_make(alice.agent, bob.agent)
    operator.post(resolve_url(dispute.contradiction.pk), {"resolution": "keep_existing"}, **HTMX)
    (decision,) = decisions(alice.tenant, "contradiction_resolve")
    assert decision.actor == "user:op" and decision.session_id == "s-review"


@requires_model
def test_forgetting_in_the_admin_names_the_person(alice: Caller, root: Client) -> None:
    with_session = alice.post(
        "/api/v1/memories", {"content": "Alice's badge is 1234.", "session_id": "s-mem"}
    ).json()
    without = alice.post("/api/v1/memories", {"content": "Alice likes cycling."}).json()
    for memory in (with_session, without):
        root.post("/admin/memory/semanticmemory/", {"action": "forget", "_selected_action": [memory["id"]]})
    by_memory = {e.payload["memory_id"]: e for e in decisions(alice.tenant, "memory_forget")}
    assert by_memory[with_session["id"]].session_id == "s-mem"
    assert by_memory[without["id"]].session_id == "admin:root"
    assert {e.actor for e in by_memory.values()} == {"user:root"}


def test_predicate_edits_name_the_person(alice: Caller, root: Client) -> None:
    root.post("/admin/memory/predicate/add/", {"name": "born_in", "cardinality": "one", "description": ""})
    (created,) = decisions(alice.tenant, "predicate_create")
    assert created.actor == "user:root" and created.session_id == "admin:root"


def test_another_tenant_never_sees_the_trail_of_this_one(alice: Caller, mallory: Caller) -> None:
    admin_client(alice.tenant, "alpha-officer", group="compliance officer")
    beta = admin_client(mallory.tenant, "beta-officer", group="compliance officer")
    page = beta.get("/admin/memory/event/").content.decode()
    assert "beta-officer logged in" in page
    assert "alpha-officer" not in page
    timeline = beta.get("/admin/sessions/?session=admin:alpha-officer").content.decode()
    assert "No events in this session." in timeline and "logged in" not in timeline
