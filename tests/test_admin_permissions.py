"""Every admin action and view requires the permission its effect needs: who may only look at the
admin changes nothing, who holds the permission still acts. Django's test client on the tenant host
``alpha.localhost`` against the real PostgreSQL; the users live in the schema they log in to.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin
from django.contrib.admin import AdminSite
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission, User
from django.db.models import QuerySet
from django.test import Client
from django.urls import reverse
from django_tenants.utils import schema_context, tenant_context

from agents.models import Agent, ApiKey
from memory.knowledge.models import Contradiction, ContradictionStatus
from memory.models import SemanticMemory
from tenants.models import Tenant

from .conftest import Caller, requires_model
from .test_review_queue import PASSWORD, conflict_make

HTMX = {"HTTP_HX_REQUEST": "true"}


# --- the doors: an admin site as served, with the schemas its data lives in ---------------------------------


@dataclass(frozen=True)
class Door:
    """An admin site on its host: ``urlconf`` serves it, ``schema`` holds its users and registered
    models, ``schemas`` are the schemas whose tables a request through it could change."""

    site: AdminSite
    host: str
    urlconf: str
    schema: str
    schemas: tuple[str, ...]

    def url(self, name: str, **kwargs: str) -> str:
        return reverse(f"{self.site.name}:{name}", kwargs=kwargs, urlconf=self.urlconf)


def tenant_door(tenant: Tenant) -> Door:
    return Door(
        admin.site,
        f"{tenant.schema_name}.localhost",
        "config.urls",
        tenant.schema_name,
        (tenant.schema_name, "public"),
    )


# --- users ------------------------------------------------------------------------------------------------------


def staff_user(
    schema: str, username: str, *, perms: QuerySet[Permission] | None = None, group: str = ""
) -> User:
    """A staff user (not a superuser) in ``schema`` with ``perms`` and/or membership of ``group``."""
    with schema_context(schema):
        user = get_user_model().objects.create_user(
            username, f"{username}@example.com", PASSWORD, is_staff=True
        )
        if perms is not None:
            user.user_permissions.add(*perms)
        if group:
            user.groups.add(Group.objects.get(name=group))
        return user


def with_perms(schema: str, username: str, *perms: str) -> User:
    """A staff user holding exactly ``perms`` (``"app_label.codename"``)."""
    with schema_context(schema):
        found = Permission.objects.none()
        for perm in perms:
            app_label, codename = perm.split(".")
            found |= Permission.objects.filter(content_type__app_label=app_label, codename=codename)
        assert found.count() == len(perms), f"unknown permission among {perms}"
        return staff_user(schema, username, perms=found)


def logged_in(door: Door, username: str) -> Client:
    client = Client(HTTP_HOST=door.host)
    response = client.post("/admin/login/", {"username": username, "password": PASSWORD})
    assert response.status_code == 302, f"login of {username} on {door.host} failed"
    return client


# --- the issue: a compliance officer minted a write key -----------------------------------------------------------


def test_a_compliance_officer_cannot_mint_an_api_key(alice: Caller) -> None:
    door = tenant_door(alice.tenant)
    staff_user(door.schema, "officer", group="compliance officer")
    client = logged_in(door, "officer")
    with tenant_context(alice.tenant):
        keys = ApiKey.objects.count()
    for action in ("mint_read_write_key", "mint_read_only_key"):
        response = client.post(
            "/admin/agents/agent/", {"action": action, "_selected_action": [alice.agent.pk]}, follow=True
        )
        assert response.status_code == 200
        assert "will not be shown again" not in response.content.decode()
    with tenant_context(alice.tenant):
        assert ApiKey.objects.count() == keys


# --- the positive: who holds the permission still acts ----------------------------------------------------------


def mint(client: Client, agent: Agent, action: str = "mint_read_write_key") -> str | None:
    """POST the mint ``action`` for ``agent``; the raw key announced, or ``None``."""
    page = client.post(
        "/admin/agents/agent/", {"action": action, "_selected_action": [agent.pk]}, follow=True
    ).content.decode()
    if "shown again): " not in page:
        return None
    return page.split("shown again): ")[1].split("<")[0].strip()


def test_minting_needs_add_apikey_not_the_agent_permissions(alice: Caller) -> None:
    door = tenant_door(alice.tenant)
    with_perms(door.schema, "agent_admin", "agents.view_agent", "agents.add_agent", "agents.change_agent")
    assert mint(logged_in(door, "agent_admin"), alice.agent) is None
    with_perms(door.schema, "key_maker", "agents.view_agent", "agents.add_apikey")
    raw = mint(logged_in(door, "key_maker"), alice.agent)
    assert raw is not None
    alice.client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert alice.get("/api/v1/me").json()["scopes"] == ["read", "write"]


def test_a_superuser_mints_and_revokes_keys(alice: Caller) -> None:
    door = tenant_door(alice.tenant)
    with tenant_context(alice.tenant):
        get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    client = logged_in(door, "root")
    raw = mint(client, alice.agent, "mint_read_only_key")
    assert raw is not None
    alice.client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert alice.get("/api/v1/me").json()["scopes"] == ["read"]
    with tenant_context(alice.tenant):
        key = ApiKey.objects.get(key_id=raw.split(".")[2])
    client.post("/admin/agents/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    assert alice.get("/api/v1/me").status_code == 401


def test_revoking_needs_change_apikey(alice: Caller) -> None:
    door = tenant_door(alice.tenant)
    with tenant_context(alice.tenant):
        key = ApiKey.objects.get(agent=alice.agent)
    with_perms(door.schema, "key_viewer", "agents.view_apikey")
    logged_in(door, "key_viewer").post(
        "/admin/agents/apikey/", {"action": "revoke", "_selected_action": [key.pk]}
    )
    assert alice.get("/api/v1/me").status_code == 200
    with_perms(door.schema, "key_keeper", "agents.view_apikey", "agents.change_apikey")
    logged_in(door, "key_keeper").post(
        "/admin/agents/apikey/", {"action": "revoke", "_selected_action": [key.pk]}
    )
    assert alice.get("/api/v1/me").status_code == 401


@requires_model
def test_forgetting_needs_change_semanticmemory(alice: Caller) -> None:
    door = tenant_door(alice.tenant)
    memory_id = alice.post("/api/v1/memories", {"content": "Alice's locker code is 4711."}).json()["id"]
    forget = {"action": "forget", "_selected_action": [memory_id]}
    with_perms(door.schema, "memory_viewer", "memory.view_semanticmemory")
    logged_in(door, "memory_viewer").post("/admin/memory/semanticmemory/", forget)
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.get(pk=memory_id).forgotten_at is None
    with_perms(door.schema, "memory_keeper", "memory.view_semanticmemory", "memory.change_semanticmemory")
    logged_in(door, "memory_keeper").post("/admin/memory/semanticmemory/", forget)
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.get(pk=memory_id).forgotten_at is not None


def test_an_operator_still_resolves_contradictions(alice: Caller, bob: Caller) -> None:
    door = tenant_door(alice.tenant)
    with tenant_context(alice.tenant):
        dispute = conflict_make(alice.agent, bob.agent)
    staff_user(door.schema, "op", group="operator")
    operator = logged_in(door, "op")
    response = operator.post(
        door.url("memory_contradiction_resolve", contradiction_id=str(dispute.contradiction.pk)),
        {"resolution": "keep_existing"},
        **HTMX,
    )
    assert response.status_code == 200
    with tenant_context(alice.tenant):
        assert Contradiction.objects.get(pk=dispute.contradiction.pk).status != ContradictionStatus.OPEN
    # the queue is a page to look at: decisions are posted to resolve only
    assert operator.post(door.url("memory_contradiction_queue")).status_code == 405


def test_resolving_without_any_permission_shows_nothing_of_the_contradiction(
    alice: Caller, bob: Caller
) -> None:
    door = tenant_door(alice.tenant)
    with tenant_context(alice.tenant):
        dispute = conflict_make(alice.agent, bob.agent, subject="Mallory", new="Umbrella")
    staff_user(door.schema, "nobody")
    response = logged_in(door, "nobody").post(
        door.url("memory_contradiction_resolve", contradiction_id=str(dispute.contradiction.pk)),
        {"resolution": "keep_existing"},
        **HTMX,
    )
    assert response.status_code == 403
    assert "Mallory" not in response.content.decode() and "Umbrella" not in response.content.decode()


def test_the_metrics_page_needs_the_view_agent_permission(alice: Caller) -> None:
    door = tenant_door(alice.tenant)
    staff_user(door.schema, "nobody")
    nobody = logged_in(door, "nobody")
    assert nobody.get("/admin/metrics/").status_code == 403
    assert "/admin/metrics/" not in nobody.get("/admin/").content.decode()
    staff_user(door.schema, "officer", group="compliance officer")
    officer = logged_in(door, "officer")
    assert officer.get("/admin/metrics/").status_code == 200
    assert "/admin/metrics/" in officer.get("/admin/").content.decode()
    assert officer.post("/admin/metrics/").status_code == 405
