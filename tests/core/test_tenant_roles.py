"""Isolation by the database (issue 12): each unit of work runs as its tenant's PostgreSQL role, so
raw SQL naming another tenant's schema fails with ``insufficient_privilege`` (SQLSTATE 42501) from a
request, an admin view, a task and a command; and no pooled connection carries a tenant's role into
the next unit, however the last one ended.

The probes (``tests/core/role_probe.py``) report the role and search path a unit runs with and the
SQLSTATE of ``SELECT count(*) FROM "<other>".memory_semanticmemory``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest
from django.db import DatabaseError, connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django_tenants.utils import schema_context, tenant_context

from core.db.base import fetch_prepared, reset_pooled_connection
from core.tenancy import login_role, maintenance, maintenance_role, tenant_role
from memory.procedural.models import Skill
from tenants.models import Tenant
from tests.core.role_probe import probe_sql
from tests.core.role_probe_tasks import cross_schema_probe
from tests.factories import (
    Caller,
    admin_client,
    asgi_server,
    requires_model,
    skill_publish,
    skill_seed,
)

INSUFFICIENT_PRIVILEGE = "42501"
PROBE_URLS = "tests.core.role_probe"


@pytest.fixture
def probe_urls(settings) -> None:  # type: ignore[no-untyped-def]
    """Route the probes, on tenant hosts (the admin) and on the public one (the API)."""
    settings.ROOT_URLCONF = PROBE_URLS
    settings.PUBLIC_SCHEMA_URLCONF = PROBE_URLS


def login() -> str:
    """The login role of this test run's connection (``DATABASE_URL``'s user)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_user")
        return str(cursor.fetchone()[0])


@pytest.mark.usefixtures("probe_urls")
def test_a_request_cannot_read_another_tenants_schema(alice: Caller, mallory: Caller) -> None:
    seen = alice.get("/probe/sql", {"other": "beta"})
    assert seen.status_code == 200, seen.content
    assert seen.json()["role"] == tenant_role("alpha")
    assert seen.json()["search_path"] == "alpha, public"
    assert seen.json()["other_schema"] == INSUFFICIENT_PRIVILEGE
    assert seen.json()["own_memories"] == 0  # its own tables it reads

    seen = mallory.get("/probe/sql", {"other": "alpha"})
    assert (seen.json()["role"], seen.json()["other_schema"]) == (tenant_role("beta"), INSUFFICIENT_PRIVILEGE)


@pytest.mark.usefixtures("probe_urls")
def test_an_admin_view_cannot_read_another_tenants_schema(tenant_a: Tenant) -> None:
    client = admin_client(tenant_a, "officer")  # the host name picks the tenant
    seen = client.get("/probe/admin/", {"other": "beta"})
    assert seen.status_code == 200, seen.content
    assert seen.json()["role"] == tenant_role("alpha")
    assert seen.json()["other_schema"] == INSUFFICIENT_PRIVILEGE


def test_a_task_cannot_read_another_tenants_schema(celery_worker, tenant_a: Tenant) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(tenant_a):  # the task takes its tenant from the message headers
        seen = cross_schema_probe.delay("beta").get(timeout=90)
    assert seen["role"] == tenant_role("alpha")
    assert seen["other_schema"] == INSUFFICIENT_PRIVILEGE


def test_a_command_in_a_tenant_cannot_read_another_tenants_schema(tenant_a: Tenant) -> None:
    with tenant_context(tenant_a):  # how commands enter a tenant
        seen = probe_sql("beta")
    assert (seen["role"], seen["other_schema"]) == (tenant_role("alpha"), INSUFFICIENT_PRIVILEGE)
    with schema_context("beta"):  # by schema name alone, too
        seen = probe_sql("alpha")
    assert (seen["role"], seen["other_schema"]) == (tenant_role("beta"), INSUFFICIENT_PRIVILEGE)


# the statement the backend sends before a cursor's first query (core/db/base.py)
SET_ROLE = re.compile(r'^(?:SET ROLE "((?:[^"]|"")+)"|RESET ROLE); SET search_path = ')
LOGIN = "<the login role>"


def statements_by_role(queries: list[dict[str, str]], start: str) -> list[tuple[str, str]]:
    """(role, sql) of each statement in ``queries`` (``CaptureQueriesContext``), the role being the
    one the last ``SET ROLE`` before it chose (``start`` before any)."""
    role, seen = start, []
    for query in queries:
        switch = SET_ROLE.match(query["sql"])
        if switch:
            role = switch.group(1).replace('""', '"') if switch.group(1) else LOGIN
        else:
            seen.append((role, query["sql"]))
    return seen


@requires_model
def test_procedural_memory_runs_as_the_tenants_role(alice: Caller) -> None:
    """The procedural layer's API (the skill match's raw SQL too) and its admin pages (the editor,
    the diff, the proposals queue, from the host name) read and write their tables as the tenant's
    role; only the routing (domain and tenant lookups) runs as the maintenance role, before it."""
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    operator = admin_client(alice.tenant, "op-roles", group="operator")
    with tenant_context(alice.tenant):
        pk = Skill.objects.get(name="reset-password").pk
    units: dict[str, Callable[[], object]] = {
        "match": lambda: alice.get("/api/v1/skills", {"intent": "I forgot my password"}),
        "skill": lambda: alice.get("/api/v1/skills/reset-password"),
        "tools": lambda: alice.get("/api/v1/tools"),
        "run": lambda: alice.post("/api/v1/skills/reset-password/runs", {"version": 1, "success": True}),
        "admin list": lambda: operator.get("/admin/memory/skill/"),
        "admin editor": lambda: operator.get(f"/admin/memory/skill/{pk}/versions/1/"),
        "admin diff": lambda: operator.get(f"/admin/memory/skill/{pk}/diff/"),
        "admin proposals": lambda: operator.get("/admin/memory/skill/proposals/"),
    }
    for name, unit in units.items():
        connection.set_schema_to_public()  # where every request starts (TenantMainMiddleware)
        assert current_role()[0] == maintenance_role()
        with CaptureQueriesContext(connection) as ctx:
            response = unit()
        assert response.status_code in (200, 201), (name, response.content[:300])  # type: ignore[attr-defined]
        statements = statements_by_role(ctx.captured_queries, maintenance_role())
        procedural = [(role, sql) for role, sql in statements if re.search(r"\bmemory_(skill|tool)", sql)]
        assert procedural, name  # the unit did read its tables
        assert {role for role, _ in procedural} == {tenant_role("alpha")}, name
        routing = {sql for role, sql in statements if role != tenant_role("alpha")}
        assert all("tenants_" in sql for sql in routing), (name, routing)


def test_the_suite_runs_with_the_connection_pool_resetting_roles(db) -> None:  # type: ignore[no-untyped-def]
    """The acceptance asks for the whole suite with the pool on: the test settings keep
    ``DATABASE_POOL`` on, this process's connection is lent by the pool, and the pool resets it."""
    pool = connection.settings_dict["OPTIONS"].get("pool")
    assert pool, "DATABASE_POOL is off: the suite must run with the connection pool"
    assert pool["reset"] is reset_pooled_connection
    connection.ensure_connection()
    assert getattr(connection.connection, "_pool", None) is connection.pool is not None


def current_role() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_setting('search_path')")
        role, path = cursor.fetchone()
    return str(role), str(path)


def test_the_public_schema_runs_as_the_maintenance_role_and_blocks_nest(tenant_a: Tenant) -> None:
    assert current_role() == (maintenance_role(), "public")
    with tenant_context(tenant_a):
        assert current_role() == (tenant_role("alpha"), "alpha, public")
        with maintenance():  # migrations and ANALYZE inside a tenant's schema
            assert current_role() == (maintenance_role(), "alpha, public")
            with login_role():
                assert current_role() == (login(), "alpha, public")
            assert current_role()[0] == maintenance_role()
        assert current_role()[0] == tenant_role("alpha")
    assert current_role() == (maintenance_role(), "public")


def test_a_prepared_statement_runs_as_the_units_role_in_its_schema(
    tenant_a: Tenant, tenant_b: Tenant
) -> None:
    """``fetch_prepared`` (the checkpoints' hot statements) switches role and search path like a
    cursor, and its one prepared statement, reused on the same connection across tenants, reads
    the current tenant's table (PostgreSQL re-parses it when the search path changed), under a
    role that may not read another tenant's."""
    probe = (
        "SELECT current_user::text, current_setting('search_path'), pg_backend_pid(), "
        "(SELECT count(*) FROM memory_checkpoint)"
    )
    seen = []
    for tenant in (tenant_a, tenant_b, tenant_a):
        with tenant_context(tenant):
            seen.append(fetch_prepared(probe, []))
    assert fetch_prepared(probe.replace("memory_checkpoint", "tenants_tenant"), [])[0] == maintenance_role()
    assert [row[:2] for row in seen] == [
        (tenant_role("alpha"), "alpha, public"),
        (tenant_role("beta"), "beta, public"),
        (tenant_role("alpha"), "alpha, public"),
    ]
    assert len({row[2] for row in seen}) == 1  # one connection: the statement really was reused
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%memory_checkpoint)%"]
        )
        assert cursor.fetchone()[0] == 1
    privilege = "SELECT has_schema_privilege(%s, 'USAGE')"
    with tenant_context(tenant_a):
        assert fetch_prepared(privilege, ["alpha"]) == (True,)
        assert fetch_prepared(privilege, ["beta"]) == (False,)


def test_a_schema_without_a_role_fails_instead_of_running_as_the_last_one(tenant_a: Tenant) -> None:
    with maintenance(), connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA not_a_tenant")  # rolled back with the test
    with tenant_context(tenant_a):
        assert current_role()[0] == tenant_role("alpha")
        with pytest.raises(DatabaseError, match="does not exist"), transaction.atomic():
            with schema_context("not_a_tenant"):
                current_role()
        assert current_role()[0] == tenant_role("alpha")


def test_a_pooled_connection_goes_back_as_the_login_role(django_db_blocker, tenant_a: Tenant) -> None:  # type: ignore[no-untyped-def]
    """A pool of one connection lent three times: after a unit of alpha, after one that failed in
    the middle of a transaction, then to a unit of beta. Each borrower finds the login role and the
    default search path before anything of the backend runs."""
    default = connections["default"]
    options = {**default.settings_dict["OPTIONS"], "pool": {"min_size": 1, "max_size": 1, "timeout": 10}}
    wrapper = type(default)({**default.settings_dict, "OPTIONS": options}, alias="role_pool_probe")

    def raw_state() -> tuple[str, str, int]:
        wrapper.ensure_connection()
        row = wrapper.connection.execute(
            "SELECT current_user, current_setting('search_path'), pg_backend_pid()"
        ).fetchone()
        return str(row[0]), str(row[1]), int(row[2])

    def unit_role() -> str:
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT current_user")
            return str(cursor.fetchone()[0])

    beta = Tenant.objects.get(schema_name="beta")
    with django_db_blocker.unblock():
        try:
            # the first connection of an alias runs Django's version check (a statement of its own)
            wrapper.ensure_connection()
            wrapper.close()
            login_role_name, default_path, pid = raw_state()
            assert login_role_name == login()
            wrapper.set_tenant(tenant_a)
            assert unit_role() == tenant_role("alpha")
            wrapper.close()  # the unit ends: the connection goes back to the pool

            assert raw_state() == (login_role_name, default_path, pid)  # the same connection
            wrapper.set_tenant(tenant_a)
            wrapper.set_autocommit(False)
            with pytest.raises(DatabaseError), wrapper.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM memory_semanticmemory")
                cursor.execute("SELECT 1 / 0")
            wrapper.close()  # given back in a failed transaction

            assert raw_state()[:2] == (login_role_name, default_path)
            wrapper.set_autocommit(True)
            wrapper.set_tenant(beta)
            assert unit_role() == tenant_role("beta")
        finally:
            wrapper.close()
            wrapper.close_pool()


def test_a_server_with_one_pooled_connection_never_lends_a_tenants_role(two_tenants) -> None:  # type: ignore[no-untyped-def]
    """A real uvicorn with a pool of one connection: a request of tenant A, a request of A that fails
    half-way through a transaction (a 500), then a request of tenant B. Between them a probe
    borrows the pool's connection and reads its state with the raw driver. In the SET ROLE mode
    (tenant logins off), where one connection serves every tenant; with logins, see
    test_tenant_logins.py."""
    a, b = two_tenants
    schema_a, schema_b = a.tenant.schema_name, b.tenant.schema_name
    env = {"DJANGO_SETTINGS_MODULE": "tests.core.role_probe_settings", "ENGRAM_TENANT_LOGINS": "0"}
    env |= {"DATABASE_POOL_MIN_SIZE": "1", "DATABASE_POOL_MAX_SIZE": "1"}
    with asgi_server(app="tests.core.role_probe_asgi:application", **env) as port:
        base = f"http://127.0.0.1:{port}"

        def probe(caller: Caller | None, path: str, **params: str) -> httpx.Response:
            headers = {"Authorization": f"Bearer {caller.key}"} if caller else {}
            return httpx.get(base + path, params=params, headers=headers, timeout=30)

        first = probe(a, "/probe/sql", other=schema_b).json()
        assert first["role"] == tenant_role(schema_a)
        assert first["other_schema"] == INSUFFICIENT_PRIVILEGE
        handed = probe(None, "/probe/handover").json()
        assert handed["pid"] == first["pid"]  # the one connection of the pool, next borrower
        assert handed["role"] == handed["login"] == first["login"]
        assert handed["search_path"] == '"$user", public'

        assert probe(a, "/probe/fail").status_code == 500
        handed = probe(None, "/probe/handover").json()
        assert (handed["role"], handed["search_path"]) == (first["login"], '"$user", public')

        second = probe(b, "/probe/sql", other=schema_a).json()
        assert second["role"] == tenant_role(schema_b)
        assert second["other_schema"] == INSUFFICIENT_PRIVILEGE
        me = probe(b, "/api/v1/me")
        assert me.status_code == 200 and me.json()["tenant"] == schema_b
        assert probe(None, "/probe/handover").json()["role"] == first["login"]
