"""Every admin action and view requires the permission its effect needs.

A walker discovers the admins from the registries of both admin sites (the tenant admin
``django.contrib.admin.site`` on ``alpha.localhost`` and the platform admin
``tenants.admin.public_admin_site`` on ``localhost``), so an admin added later is walked too. As a
view-only user it asks for every action, add, change and delete page and every custom admin URL and
checks that nothing that changes data is offered or done, by comparing a fingerprint of every table
before and after each POST. The users who hold the permissions still can act (the positive tests
below); ``test_admin_checks`` keeps actions without ``allowed_permissions`` out.
Django's test client against the real PostgreSQL; the users live in the schema they log in to.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib import admin
from django.contrib.admin import AdminSite
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.test import Client, RequestFactory
from django.urls import URLPattern, get_resolver, reverse
from django_tenants.utils import schema_context, tenant_context

from agents.models import Agent, ApiKey
from compliance import services as compliance_services
from compliance.models import RetentionRule
from memory.consolidation.services.schedule import consolidate
from memory.knowledge.models import Contradiction, ContradictionStatus
from memory.models import SemanticMemory, Skill, SkillVersion, Tool
from tenants.admin import public_admin_site
from tenants.models import Tenant
from tests.factories import (
    PASSWORD,
    PASSWORD_RESET_STEPS,
    Caller,
    conflict_make,
    requires_model,
    skill_publish,
    skill_seed,
)
from tests.memory.checkpoints.test_checkpoints import body as checkpoint_body

HTMX = {"HTTP_HX_REQUEST": "true"}
# what a form that changes data might be sent: a resolution, a new password, a confirmation
PAYLOAD = {
    "resolution": "accept_new",
    "note": "sent by the permission walker",
    "password1": "Walker-pw-98765",
    "password2": "Walker-pw-98765",
    "usable_password": "true",
    "post": "yes",
}
# the suffixes of the URL names every ModelAdmin has (``<app>_<model>_<suffix>``)
STANDARD_VIEWS = ("changelist", "add", "history", "delete", "change")
# logging in writes the session table; it holds no domain data
UNTRACKED_TABLES = {"django_session"}


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


PUBLIC_DOOR = Door(public_admin_site, "localhost", "config.urls_public", "public", ("public",))


def fingerprint(schemas: tuple[str, ...]) -> dict[str, tuple[int, str]]:
    """``{"schema.table": (row count, md5 of all rows as text)}`` for every table in ``schemas``."""
    quote_name = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema = ANY(%s) AND table_type = 'BASE TABLE' ORDER BY 1, 2",
            [list(schemas)],
        )
        tables = [(schema, table) for schema, table in cursor.fetchall() if table not in UNTRACKED_TABLES]
        query = " UNION ALL ".join(
            "SELECT %s, count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
            f"FROM {quote_name(schema)}.{quote_name(table)} AS t"
            for schema, table in tables
        )
        cursor.execute(query, [f"{schema}.{table}" for schema, table in tables])
        return {label: (count, digest) for label, count, digest in cursor.fetchall()}


def changed_tables(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> list[str]:
    return sorted(label for label in before.keys() | after.keys() if before.get(label) != after.get(label))


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


def view_only_user(schema: str, username: str) -> User:
    """A staff user holding every ``view_*`` permission of ``schema`` and nothing else."""
    with schema_context(schema):
        return staff_user(schema, username, perms=Permission.objects.filter(codename__startswith="view_"))


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


# --- seeds: one object at least in every registered model -----------------------------------------------------


@pytest.fixture
def tenant_seeded(alice: Caller, bob: Caller) -> Tenant:
    """Tenant alpha with a row in each model its admin registers: agents and keys (the callers),
    a semantic memory, a store item, a checkpoint, events, predicate, entities, facts and an open contradiction,
    tools, a published skill with a reported run and an agent's proposed draft, a chain check, an
    anchor, an export, a retention rule and run, a legal hold, an erasure request, an admin log entry
    and a consolidation pass (its runs, a promotion, summary nodes); users and the review groups
    exist already."""
    created = alice.post("/api/v1/memories", {"content": "Alice prefers tea to coffee."})
    assert created.status_code == 201, created.content
    saved = alice.post("/api/v1/sessions/s-seed/checkpoints", checkpoint_body(1))
    assert saved.status_code == 201, saved.content
    item = {"namespace": ["users", "alice"], "key": "prefs", "value": {"drink": "tea"}}
    stored = alice.post("/api/v1/store/items", item)
    assert stored.status_code == 201, stored.content
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    ran = alice.post("/api/v1/skills/reset-password/runs", {"version": 1, "success": True})
    assert ran.status_code == 201, ran.content
    proposed = bob.post(
        "/api/v1/skills/reset-password/versions",
        {"steps": PASSWORD_RESET_STEPS[:4], "change_note": "no follow-up question"},
    )
    assert proposed.status_code == 201, proposed.content
    hinted = {"content": "Bob lives in Porto.", "confidence": 0.95}
    hinted["fact"] = {"subject": "Bob", "predicate": "lives_in", "object": {"entity": "Porto"}}
    for _ in range(4):
        assert alice.post("/api/v1/memories", hinted).status_code in (200, 201)
    with tenant_context(alice.tenant):
        conflict_make(alice.agent, bob.agent)
        consolidate(force=True)
        bystander = get_user_model().objects.create_user("bystander", "bystander@example.com", PASSWORD)
        compliance_services.anchor_head()
        check = compliance_services.chain_check_request(requested_by="user:seed")
        compliance_services.chain_check_run(check_id=check.pk)
        export = compliance_services.export_request(username="seed", scope="session", session_id="s-seed")
        compliance_services.export_run(export_id=str(export.pk))
        # the data lifecycle: a rule, a run, a hold and an erasure request (someone else's)
        compliance_services.retention_rule_save(
            rule=RetentionRule(layer="semantic", memory_type="", keep_days=120), username="seed"
        )
        run = compliance_services.retention_run_start(requested_by="job:seed")
        compliance_services.retention_run(run_id=run.pk)
        compliance_services.hold_place(kind="session", value="s-held", reason="seeded", username="seed")
        compliance_services.erasure_request(
            kind="subject", value="seed-subject", legal_basis="seeded", note="", username="seed"
        )
        LogEntry.objects.create(
            user=bystander,
            content_type=ContentType.objects.get_for_model(Agent),
            object_id=str(alice.agent.pk),
            object_repr=str(alice.agent),
            action_flag=CHANGE,
            change_message="seeded",
        )
    return alice.tenant


@pytest.fixture
def public_seeded(tenant_a: Tenant) -> None:
    """The public schema with a user and a group beside the tenants public, alpha and beta."""
    with schema_context("public"):
        get_user_model().objects.create_user("bystander", "bystander@example.com", PASSWORD)
        Group.objects.create(name="platform seed")


# --- the walker -------------------------------------------------------------------------------------------------


def request_as(door: Door, user: User) -> HttpRequest:
    request = RequestFactory().get("/admin/", HTTP_HOST=door.host)
    request.user = user
    return request


def is_read_only(action: object) -> bool:
    """An action that needs only the view permission (an export, say) changes no data."""
    allowed = getattr(action, "allowed_permissions", None) or ()
    return bool(allowed) and set(allowed) <= {"view"}


def target(model: type[Model], user: User) -> Model:
    """The object the change and delete pages act on: any row but the acting user."""
    rows = model._default_manager.order_by("pk")
    if model is get_user_model():
        rows = rows.exclude(pk=user.pk)
    found = rows.first()
    assert found is not None, f"seed a {model._meta.label} so its admin pages have something to act on"
    return found


def custom_patterns(patterns: list[URLPattern], standard: set[str]) -> list[URLPattern]:
    return [p for p in patterns if isinstance(p, URLPattern) and p.name and p.name not in standard]


def site_level_urls(door: Door) -> list[str]:
    """URLs of the admin views a site adds beyond Django's stock ones, and the views mounted beside
    the admin in the host's URL configuration (``admin/metrics/``)."""
    stock = {p.name for p in AdminSite.get_urls(door.site) if isinstance(p, URLPattern)}
    urls = []
    for pattern in custom_patterns(door.site.get_urls(), stock):
        assert not pattern.pattern.converters, f"give the walker arguments for {pattern.name}"
        urls.append(door.url(pattern.name))
    for pattern in get_resolver(door.urlconf).url_patterns:
        if isinstance(pattern, URLPattern) and str(pattern.pattern).startswith("admin/"):
            assert not pattern.pattern.converters, f"give the walker arguments for {pattern.name}"
            urls.append(reverse(pattern.name, urlconf=door.urlconf))
    return urls


# What a person's audit work may write: a check or an export of their own, and its record in the trail
# (through the tenant's system agent, made on first use).
AUDIT_TABLES = {
    "compliance_chaincheck",
    "compliance_export",
    # the data lifecycle a compliance officer runs: rules, holds, erasure requests and approvals
    "compliance_retentionrule",
    "compliance_legalhold",
    "compliance_erasurerequest",
    "django_admin_log",  # Django's own record of those admin changes
    "memory_event",
    "memory_chainhead",
    "agents_agent",
}


class Walk:
    """Requests as one user through one door, collecting every way they went wrong. ``audit_urls``:
    the URLs whose POST may start audit work (``AUDIT_TABLES``) instead of being refused."""

    def __init__(self, door: Door, client: Client, audit_urls: frozenset[str] = frozenset()) -> None:
        self.door = door
        self.client = client
        self.problems: list[str] = []
        self.audit_urls = audit_urls

    def get(self, url: str) -> None:
        response = self.client.get(url)
        if response.status_code >= 500:
            self.problems.append(f"GET {url}: {response.status_code}")

    def post(self, what: str, url: str, data: dict[str, object], *, refused: bool, **headers: str) -> None:
        """POST ``data`` to ``url``: it must change nothing, and with ``refused`` be answered 403/405."""
        before = fingerprint(self.door.schemas)
        response = self.client.post(url, data, **headers)
        changed = changed_tables(before, fingerprint(self.door.schemas))
        if url in self.audit_urls or any(url.startswith(p) and p.endswith("/") for p in self.audit_urls):
            changed = [t for t in changed if t.split(".", 1)[1] not in AUDIT_TABLES]
            refused = False
        if changed:
            self.problems.append(f"{what} POST {url} changed {', '.join(changed)}")
        if response.status_code >= 500 or (refused and response.status_code not in (403, 405)):
            self.problems.append(f"{what} POST {url}: {response.status_code}, expected a refusal")


def changelist_in(changelist: str, audit_urls: frozenset[str]) -> bool:
    """Whether a whole admin (its changelist URL and every page under it) is audit work."""
    return changelist in audit_urls


def walk_as_view_only(door: Door, user: User, audit_urls: frozenset[str] = frozenset()) -> list[str]:
    """Everything the admins of ``door`` let ``user`` do that changes data (empty: nothing), but the
    audit work ``audit_urls`` start."""
    walk = Walk(door, logged_in(door, user.get_username()), audit_urls)
    request = request_as(door, user)
    registry = door.site._registry  # the site's ModelAdmins: no public way to list them all
    assert registry, f"nothing registered on {door.site.name}"
    for model, model_admin in registry.items():
        opts = model._meta
        prefix = f"{opts.app_label}_{opts.model_name}"
        with schema_context(door.schema):
            obj = target(model, user)
            offered = model_admin.get_actions(request)
            # every action registered for this admin, before the permission filter (as Django's
            # own admin checks list them)
            registered = [name for _, name, _ in model_admin._get_base_actions()]
        lifecycle_work = changelist_in(door.url(f"{prefix}_changelist"), audit_urls)
        for name, (func, _, _) in offered.items():
            if not is_read_only(func) and not lifecycle_work:
                walk.problems.append(f"{opts.label}: action {name} offered to a view-only user")
        pk = quote(obj.pk)
        changelist = door.url(f"{prefix}_changelist")
        for url in [changelist, door.url(f"{prefix}_add")] + [
            door.url(f"{prefix}_{view}", object_id=pk) for view in ("change", "history", "delete")
        ]:
            walk.get(url)
        for name in registered:
            action = {"action": name, "_selected_action": [str(obj.pk)], "index": "0", "post": "yes"}
            walk.post(f"{opts.label} action {name}:", changelist, action, refused=False)
        walk.post(f"{opts.label} add:", door.url(f"{prefix}_add"), {}, refused=True)
        walk.post(f"{opts.label} change:", door.url(f"{prefix}_change", object_id=pk), {}, refused=True)
        walk.post(
            f"{opts.label} delete:", door.url(f"{prefix}_delete", object_id=pk), {"post": "yes"}, refused=True
        )
        for pattern in custom_patterns(
            model_admin.get_urls(), {f"{prefix}_{view}" for view in STANDARD_VIEWS}
        ):
            url = door.url(pattern.name, **{arg: str(obj.pk) for arg in pattern.pattern.converters})
            walk.get(url)
            walk.post(f"{opts.label} {pattern.name}:", url, PAYLOAD, refused=True)
            walk.post(f"{opts.label} {pattern.name} (htmx):", url, PAYLOAD, refused=True, **HTMX)
    for url in site_level_urls(door):
        walk.get(url)
        walk.post("site:", url, PAYLOAD, refused=True)
    return walk.problems


def assert_walk_is_clean(door: Door, user: User, audit_urls: frozenset[str] = frozenset()) -> None:
    problems = walk_as_view_only(door, user, audit_urls)
    assert not problems, "\n".join(problems)


@requires_model
def test_a_view_only_tenant_user_can_change_nothing_through_the_tenant_admin(tenant_seeded: Tenant) -> None:
    door = tenant_door(tenant_seeded)
    assert_walk_is_clean(door, view_only_user(door.schema, "viewer"))


@requires_model
def test_a_compliance_officer_can_change_nothing_through_the_tenant_admin(tenant_seeded: Tenant) -> None:
    """The officer reads every layer and changes nothing of it; the one thing their POSTs may write
    is audit work of their own: a verification or an export, and the data lifecycle's records
    (retention rules, legal holds, erasure requests and approvals: every page under those admins),
    each with its record in the trail. An erasure's own effect is the worker's, after approval."""
    door = tenant_door(tenant_seeded)
    lifecycle = {
        door.url(f"compliance_{model}_changelist")
        for model in ("retentionrule", "legalhold", "erasurerequest")
    }
    audit = frozenset({door.url("compliance_chaincheck_run"), door.url("compliance_export_new"), *lifecycle})
    assert_walk_is_clean(door, staff_user(door.schema, "officer", group="compliance officer"), audit)


@requires_model
def test_a_staff_user_without_permissions_is_refused_and_never_gets_a_500(tenant_seeded: Tenant) -> None:
    door = tenant_door(tenant_seeded)
    assert_walk_is_clean(door, staff_user(door.schema, "nobody"))


def test_a_view_only_platform_user_can_change_nothing_through_the_platform_admin(public_seeded: None) -> None:
    assert_walk_is_clean(PUBLIC_DOOR, view_only_user("public", "viewer"))


def test_a_platform_staff_user_without_permissions_never_gets_a_500(public_seeded: None) -> None:
    assert_walk_is_clean(PUBLIC_DOOR, staff_user("public", "nobody"))


def test_the_walker_covers_both_sites_and_every_custom_url() -> None:
    """The walker's discovery finds what is there today (so it is not walking an empty list)."""
    tenant = Door(admin.site, "alpha.localhost", "config.urls", "alpha", ("alpha", "public"))
    assert {Agent, ApiKey, SemanticMemory, Contradiction, Skill, SkillVersion, Tool} <= set(
        tenant.site._registry
    )
    assert Tenant in PUBLIC_DOOR.site._registry
    contradiction_admin = tenant.site._registry[Contradiction]
    names = {p.name for p in custom_patterns(contradiction_admin.get_urls(), set())}
    assert {"memory_contradiction_queue", "memory_contradiction_resolve"} <= names
    skill_urls = {p.name for p in custom_patterns(tenant.site._registry[Skill].get_urls(), set())}
    assert {
        "memory_skill_version",
        "memory_skill_publish",
        "memory_skill_diff",
        "memory_skill_proposals",
    } <= skill_urls
    user_admin = tenant.site._registry[get_user_model()]
    assert "auth_user_password_change" in {p.name for p in custom_patterns(user_admin.get_urls(), set())}
    assert site_level_urls(tenant) == ["/admin/metrics/", "/admin/sessions/"]
    assert site_level_urls(PUBLIC_DOOR) == []


def test_the_fingerprint_sees_a_changed_row(alice: Caller) -> None:
    door = tenant_door(alice.tenant)
    before = fingerprint(door.schemas)
    with tenant_context(alice.tenant):
        Agent.objects.filter(pk=alice.agent.pk).update(role="changed")
    assert changed_tables(before, fingerprint(door.schemas)) == ["alpha.agents_agent"]


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
