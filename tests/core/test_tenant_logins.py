"""Tenant logins (issue 28, item 7; docs/decisions/0001-tenant-logins.md): with
``ENGRAM["TENANT_LOGINS"]`` on, a tenant's unit of work runs on a connection authenticated as the
tenant's own login, so SQL the application did not mean to send there (injected, or deliberate raw
SQL) cannot become another tenant or the maintenance role: ``SET ROLE`` needs a membership the
tenant's login does not have, ``RESET ROLE`` returns to the tenant itself, and the login needs a
password only the application can derive.

This process switches tenants with ``SET ROLE`` (config/settings/test.py: a test switches tenants
inside its one transaction); these tests make a connection of their own with logins on, and run a
real server as production does, on committed tenants.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, connections, transaction
from django.db.transaction import TransactionManagementError

from core.tenancy import maintenance_role, quote_ident, tenant_password, tenant_role
from tests.factories import INVALID_PASSWORD, Caller, asgi_server, connect_as

INSUFFICIENT_PRIVILEGE = "42501"
ALIAS = "tenant_logins_probe"


@pytest.fixture(params=[True, False], ids=["pool", "no-pool"])
def logins_connection(request, settings, django_db_blocker) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    """A connection of this run's database with tenant logins on, with and without the pool,
    registered as ``ALIAS`` (so ``transaction.atomic(using=ALIAS)`` works)."""
    settings.ENGRAM = {**settings.ENGRAM, "TENANT_LOGINS": True}
    default = connections["default"]
    options = {name: value for name, value in default.settings_dict["OPTIONS"].items() if name != "pool"}
    if request.param:
        options["pool"] = {"min_size": 0, "max_size": 2, "timeout": 10}
    wrapper = type(default)({**default.settings_dict, "OPTIONS": options}, alias=ALIAS)
    connections[ALIAS] = wrapper
    with django_db_blocker.unblock():
        try:
            yield wrapper
        finally:
            wrapper.close()
            wrapper.close_pool()
            del connections[ALIAS]


def sqlstate(wrapper: Any, *statements: str) -> str:
    """Run ``statements`` on ``wrapper`` in a transaction rolled back at the end: ``"ok"``, or the
    SQLSTATE of the first that failed."""
    try:
        with transaction.atomic(using=wrapper.alias), wrapper.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
            transaction.set_rollback(True, using=wrapper.alias)
    except DatabaseError as exc:
        return getattr(exc.__cause__, "sqlstate", None) or repr(exc)
    return "ok"


def fetch(wrapper: Any, sql: str) -> tuple[Any, ...]:
    with wrapper.cursor() as cursor:
        cursor.execute(sql)
        return tuple(cursor.fetchone())


def shared_login() -> str:
    """The login of ``DATABASE_URL`` (this process's connection)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_user")
        return str(cursor.fetchone()[0])


def test_raw_sql_in_a_tenants_unit_cannot_become_another_tenant(  # type: ignore[no-untyped-def]
    two_tenants: tuple[Caller, Caller], logins_connection
) -> None:
    """Inside tenant A's unit: ``SET ROLE`` to B's role or to the maintenance role, ``SET SESSION
    AUTHORIZATION``, ``RESET ROLE`` and reading B's table, reading a table of the public schema all
    fail with insufficient_privilege. With the ``SET ROLE`` mode (main before this), the first read
    B's memories: the login could switch to any tenant."""
    a, b = two_tenants
    wrapper = logins_connection
    role_a, role_b = tenant_role(a.tenant.schema_name), tenant_role(b.tenant.schema_name)
    read_b = f"SELECT count(*) FROM {quote_ident(b.tenant.schema_name)}.memory_semanticmemory"

    wrapper.set_tenant(a.tenant)
    probes = {
        "read B": sqlstate(wrapper, read_b),
        "SET ROLE B": sqlstate(wrapper, f"SET LOCAL ROLE {quote_ident(role_b)}", read_b),
        "SET ROLE maintenance": sqlstate(
            wrapper, f"SET LOCAL ROLE {quote_ident(maintenance_role())}", read_b
        ),
        "SET SESSION AUTHORIZATION B": sqlstate(wrapper, f"SET SESSION AUTHORIZATION {quote_ident(role_b)}"),
        "RESET ROLE, read B": sqlstate(wrapper, "RESET ROLE", read_b),
        "read public": sqlstate(wrapper, "SELECT count(*) FROM public.tenants_tenant"),
    }
    assert probes == dict.fromkeys(probes, INSUFFICIENT_PRIVILEGE)
    assert fetch(wrapper, "SELECT current_user, session_user, count(*) FROM memory_semanticmemory") == (
        role_a,
        role_a,  # the connection is A's login: nothing to RESET back to
        0,
    )
    with transaction.atomic(using=ALIAS), wrapper.cursor() as cursor:
        cursor.execute("RESET ROLE")
        cursor.execute("SELECT current_user")
        assert cursor.fetchone()[0] == role_a


def test_a_connection_changes_login_between_units_never_inside_a_transaction(  # type: ignore[no-untyped-def]
    two_tenants: tuple[Caller, Caller], logins_connection
) -> None:
    """Tenant A, tenant B, the public schema, A again: each unit on a connection of its own login
    (the public schema's on the shared login, as the maintenance role); inside a transaction of
    A, a statement for B is refused before it reaches the database."""
    a, b = two_tenants
    wrapper = logins_connection
    role_a, role_b = tenant_role(a.tenant.schema_name), tenant_role(b.tenant.schema_name)
    probe = "SELECT current_user, session_user, pg_backend_pid()"

    wrapper.set_tenant(a.tenant)
    first = fetch(wrapper, probe)
    assert first[:2] == (role_a, role_a)
    wrapper.set_tenant(b.tenant)
    assert fetch(wrapper, probe)[:2] == (role_b, role_b)
    wrapper.set_schema_to_public()
    assert fetch(wrapper, probe)[:2] == (maintenance_role(), shared_login())
    wrapper.set_tenant(a.tenant)
    again = fetch(wrapper, probe)
    assert again[:2] == (role_a, role_a)
    if wrapper.pool is not None:
        assert again[2] == first[2]  # A's pool lent its connection again

    with pytest.raises(TransactionManagementError, match="inside a transaction"):
        with transaction.atomic(using=ALIAS):
            fetch(wrapper, probe)
            wrapper.set_tenant(b.tenant)
            fetch(wrapper, probe)
    wrapper.set_tenant(a.tenant)
    assert fetch(wrapper, probe)[:2] == (role_a, role_a)


def test_a_tenants_login_needs_the_password_the_application_derives(  # type: ignore[no-untyped-def]
    two_tenants: tuple[Caller, Caller], django_db_blocker
) -> None:
    _, b = two_tenants
    role_b = tenant_role(b.tenant.schema_name)
    with django_db_blocker.unblock():
        assert connect_as(role_b, "not-the-password") == INVALID_PASSWORD
        assert connect_as(role_b, tenant_password(role_b)) == "ok"


def test_tenant_logins_sync_gives_every_login_the_new_secrets_password(  # type: ignore[no-untyped-def]
    two_tenants: tuple[Caller, Caller], settings, django_db_blocker
) -> None:
    """After the secret changes, ``manage.py tenant_logins_sync`` re-derives every tenant's
    password: the old one no longer connects, the new one does."""
    a, b = two_tenants
    roles = [tenant_role(a.tenant.schema_name), tenant_role(b.tenant.schema_name)]
    before = dict(settings.ENGRAM)
    old = {role: tenant_password(role) for role in roles}
    settings.ENGRAM = {**before, "DB_TENANT_SECRET": f"rotated-{uuid.uuid4().hex}"}
    new = {role: tenant_password(role) for role in roles}
    assert new != old
    with django_db_blocker.unblock():
        try:
            out = io.StringIO()
            call_command("tenant_logins_sync", stdout=out)
            assert "tenant logins updated" in out.getvalue()
            for role in roles:
                assert (connect_as(role, old[role]), connect_as(role, new[role])) == (INVALID_PASSWORD, "ok")
        finally:
            settings.ENGRAM = before
            call_command("tenant_logins_sync", stdout=io.StringIO())
        assert connect_as(roles[0], old[roles[0]]) == "ok"


def test_a_server_with_tenant_logins_serves_each_tenant_on_its_own_login(  # type: ignore[no-untyped-def]
    two_tenants: tuple[Caller, Caller], django_db_blocker
) -> None:
    """A real uvicorn as in production (tenant logins on, the pool on, one connection per tenant's
    pool and one for the shared login): a request of A runs on A's login and cannot reach B's rows
    even with ``SET ROLE``; a request of A that fails half-way through a transaction leaves nothing
    behind for the next; the public schema's work (the probe that borrows a connection outside any
    tenant) runs on the shared login; each tenant holds at most its pool's one connection."""
    a, b = two_tenants
    schema_a, schema_b = a.tenant.schema_name, b.tenant.schema_name
    env = {"DJANGO_SETTINGS_MODULE": "tests.core.role_probe_settings", "ENGRAM_TENANT_LOGINS": "1"}
    env |= {
        "DATABASE_POOL_MIN_SIZE": "1",
        "DATABASE_POOL_MAX_SIZE": "1",
        "DATABASE_TENANT_POOL_MAX_SIZE": "1",
    }
    with django_db_blocker.unblock():
        login = shared_login()
    with asgi_server(app="tests.core.role_probe_asgi:application", **env) as port:
        base = f"http://127.0.0.1:{port}"

        def probe(caller: Caller | None, path: str, **params: str) -> httpx.Response:
            headers = {"Authorization": f"Bearer {caller.key}"} if caller else {}
            return httpx.get(base + path, params=params, headers=headers, timeout=30)

        first = probe(a, "/probe/sql", other=schema_b).json()
        assert (first["other_schema"], first["set_role_other"]) == (INSUFFICIENT_PRIVILEGE,) * 2
        assert (first["role"], first["login"]) == (tenant_role(schema_a), tenant_role(schema_a))
        handed = probe(None, "/probe/handover").json()
        assert handed["login"] == handed["role"] == login
        assert handed["pid"] != first["pid"]

        assert probe(a, "/probe/fail").status_code == 500
        again = probe(a, "/probe/sql", other=schema_b).json()
        assert (again["login"], again["search_path"]) == (tenant_role(schema_a), f"{schema_a}, public")

        second = probe(b, "/probe/sql", other=schema_a).json()
        assert (second["role"], second["login"]) == (tenant_role(schema_b), tenant_role(schema_b))
        assert (second["other_schema"], second["set_role_other"]) == (INSUFFICIENT_PRIVILEGE,) * 2
        me = probe(b, "/api/v1/me")
        assert me.status_code == 200 and me.json()["tenant"] == schema_b

        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT usename, count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND usename = ANY(%s) GROUP BY usename",
                [[tenant_role(schema_a), tenant_role(schema_b)]],
            )
            held = dict(cursor.fetchall())
        assert held == {tenant_role(schema_a): 1, tenant_role(schema_b): 1}
