"""django-tenants' PostgreSQL backend, with every unit of work under its tenant's role (issue 12).

django-tenants runs ``SET search_path = <schema>, public`` on each cursor before its first query.
This backend puts ``SET ROLE <role>`` in the same statement (one round trip, as before), with the
role chosen by ``unit_role``: the tenant's role in a tenant's schema, the maintenance role in the
public schema or inside ``core.tenancy.maintenance()``, the login role inside ``login_role()``.

A ``SET`` that fails is raised, never passed over: django-tenants ignores a failed ``SET search_path``
(the transaction is already aborted, the next statement is a rollback), which would leave the
previous role and schema in force if the role were missing. Here a connection in an aborted
transaction gets no ``SET`` at all (its next statement can only be a rollback, after which the
``SET`` is issued again); any other failure is an error for the caller.

With the connection pool on, a connection returned to the pool is reset to the login role and the
default search path (``RESET ROLE; RESET search_path``, by the pool, before anyone borrows it
again), so no tenant's role survives its request or task, whether it ended well or not. Without
the pool (persistent connections), the next unit's first cursor sets its own role before its first
query all the same.

With tenant logins (``core.tenancy.logins_enabled``), a tenant's unit of work does not ``SET ROLE``
on the shared login's connection: the connection itself is authenticated as the tenant's role (a
login with a password derived by ``tenant_password``), so no statement sent on it can switch to
another tenant's role or to the maintenance role (it is a member of neither). ``unit_login`` names
the login a unit needs (the tenant's, or ``None``: the shared login of ``DATABASE_URL`` for the
public schema, ``maintenance()`` and ``login_role()``); ``ensure_connection`` gives back a
connection of another login before the unit's first statement (to its pool, or closed without the
pool) and takes one of the right login. A switch of login inside a transaction is refused
(``TransactionManagementError``): one transaction cannot span two connections. With the pool on,
each login has a pool of its own per process (``pool``: the shared login's as Django builds it; a
tenant's from ``ENGRAM["TENANT_POOL"]``, opening connections on demand and closing idle ones).

The same switch routes a tenant to its PostgreSQL server (decision 0071): ``unit_server`` names
the server a unit needs (the tenant's, ``core.tenancy.tenant_server``, in a tenant's schema; the
one ``core.tenancy.on_server()`` asks for; else ``"default"``, ``DATABASE_URL``'s), a connection
to another server is given back like one of another login, and the pools are per (server, login).
The public schema's work stays on ``"default"``. Without tenant logins a tenant on another server
is refused (``ImproperlyConfigured``): the shared connection cannot follow it.

A tenant's unit holds its tenant's unit lock (``core.locks.unit_lock_sql``, a PostgreSQL advisory
lock on the tenant's server) shared from the first statement of a connection of the tenant's login
to the connection's return (to its pool, whose reset releases every advisory lock) or close, and,
for a connection kept open between units without the pool, to the end of the unit
(``close_if_unusable_or_obsolete``, run when each request and task ends). A move to another server
takes it exclusively before it copies the schema (``compliance.services.move``, decision 0090): it
waits for the units in flight, and while it waits or copies a unit's first statement is refused
with ``core.errors.TenantMoving`` (503, ``Retry-After``) instead of writing to the copy's source;
so is a unit whose process still routes the tenant to the server it left. The lock is taken in
the same round trip as the connection's first ``SET``.

New connections fail fast while PostgreSQL cannot be reached, with the pool or without
(``core.db.availability``).

``fetch_prepared`` runs one statement as a server-side prepared statement of the connection (a hot
path's fixed statement: parsed and planned once per connection, not on every call), under the same
role and search path as a cursor.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

import psycopg
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.transaction import TransactionManagementError
from django_tenants.postgresql_backend.base import DatabaseWrapper as TenantsDatabaseWrapper
from django_tenants.utils import get_limit_set_calls, get_public_schema_name, quote_schema_name

from core.db import availability
from core.db.prepared import execute_prepared
from core.errors import TenantMoving
from core.locks import unit_lock_release_sql, unit_lock_sql
from core.tenancy import (
    RoleOverride,
    logins_enabled,
    maintenance_role,
    quote_ident,
    roles_enabled,
    server_settings,
    tenant_password,
    tenant_role,
    tenant_server,
    tenant_server_note,
)

RESET_SQL = "RESET ROLE; RESET search_path; SELECT pg_advisory_unlock_all()"


def reset_pooled_connection(conn: psycopg.Connection[Any]) -> None:
    """The pool's ``reset``: run on every connection given back, before it is lent again (the pool
    has rolled back what the borrower left open). Raising makes the pool discard the connection."""
    conn.execute(RESET_SQL)
    if not conn.autocommit:
        conn.commit()


class DatabaseWrapper(TenantsDatabaseWrapper):
    """See the module docstring."""

    # django-tenants' state, set in its __init__
    _setting_search_path: bool
    search_path_set_schemas: object

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: None, or the role that ``core.tenancy.maintenance()`` / ``login_role()`` asked for
        self.role_override: RoleOverride | None = None
        self._unit_roles: dict[tuple[bool, RoleOverride | None, str, str], tuple[str | None, str | None]] = {}
        #: the tenant login the connection is (or will be) authenticated as; None: the shared login
        self.login: str | None = None
        #: the server the connection is (or will be) to: "default" (DATABASE_URL's) or an alias of
        #: ENGRAM["DB_SERVERS"]; and the one ``core.tenancy.on_server()`` asked for
        self.server = "default"
        self.server_override: str | None = None
        #: the schema whose unit lock this connection holds shared (None: none)
        self.unit_lock: str | None = None
        super().__init__(*args, **kwargs)
        self.tenant_roles = roles_enabled() and self.alias != NO_DB_ALIAS
        self.tenant_logins = self.tenant_roles and logins_enabled()
        pool = self.settings_dict["OPTIONS"].get("pool")
        if pool:
            options = availability.pool_options({} if pool is True else dict(pool))
            if self.tenant_roles:
                options.setdefault("reset", reset_pooled_connection)
            self.settings_dict["OPTIONS"]["pool"] = options

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        """Django's, failing fast while PostgreSQL cannot be reached (``core.db.availability``)."""
        if self.pool is not None:
            return super().get_new_connection(conn_params)  # the pool's attempts report themselves
        return availability.connect_direct(
            lambda: super(DatabaseWrapper, self).get_new_connection(conn_params), conn_params
        )

    def set_tenant(self, tenant: Any, include_public: bool = True) -> None:
        """django-tenants' ``set_tenant``, keeping what the connection was last sent: the next
        cursor compares it with the (role, path) it needs and sends a ``SET`` only when they differ
        (django-tenants forgets it here because its own check does not compare). A request that
        proves its key in the tenant's schema and then activates that tenant sends one ``SET``, not
        two. Closing the connection and rollbacks still forget it."""
        sent = self.search_path_set_schemas
        super().set_tenant(tenant, include_public)
        database = getattr(tenant, "database", None)
        if database is not None:  # a tenant's row (django-tenants' FakeTenant has none)
            tenant_server_note(tenant.schema_name, database)
        if getattr(self, "tenant_roles", False):  # set_tenant runs inside __init__ too
            self.search_path_set_schemas = sent

    def _unit(self) -> tuple[str | None, str | None]:
        """(``unit_role``, ``unit_login``) of the current schema and override."""
        key = (self.tenant_logins, self.role_override, self.schema_name, self.settings_dict["NAME"])
        try:
            return self._unit_roles[key]
        except KeyError:
            pass
        role: str | None
        login: str | None = None
        if self.role_override == "login":
            role = None
        elif self.role_override == "maintenance" or self.schema_name == get_public_schema_name():
            role = maintenance_role()
        else:
            role = tenant_role(self.schema_name, database=self.settings_dict["NAME"])
            if self.tenant_logins:  # the connection is the tenant's: its own role, no SET ROLE
                role, login = None, role
        # the names follow from settings: looked up once, not ~5 µs of settings reads per cursor (the
        # database's name is in the key because the test runner renames it after connecting)
        self._unit_roles[key] = (role, login)
        return role, login

    def unit_role(self) -> str | None:
        """The role the connection's next statement switches to (``None``: the role it logged in as)."""
        return self._unit()[0]

    def unit_login(self) -> str | None:
        """The tenant login the unit's connection must be authenticated as (``None``: the shared
        login of ``DATABASE_URL``); always ``None`` without tenant logins."""
        return self._unit()[1]

    def unit_server(self) -> str:
        """The server the unit's connection must reach: ``on_server()``'s, else the tenant's
        (``core.tenancy.tenant_server``) in a tenant's schema, else ``"default"``."""
        if self.server_override is not None:
            return self.server_override
        if self.schema_name and self.schema_name != get_public_schema_name():
            return tenant_server(self.schema_name)
        return "default"

    def ensure_connection(self) -> None:
        """Django's, after giving back a connection of another login or server than the unit's
        (see the module docstring). Raises ``TransactionManagementError`` when that connection is
        inside a transaction, ``ImproperlyConfigured`` for a tenant on another server without
        tenant logins (the shared connection cannot follow it)."""
        if self.tenant_logins:
            login, server = self.unit_login(), self.unit_server()
            if login != self.login or server != self.server:
                if self.connection is not None:
                    if self.in_atomic_block or not self.autocommit:
                        raise TransactionManagementError(
                            f"cannot run as {login or 'the shared login'} inside a transaction of "
                            f"{self.login or 'the shared login'}: with tenant logins a transaction "
                            "belongs to one tenant (or to the public schema's work) on one server"
                        )
                    self.close()
                self.login, self.server = login, server
        elif self.unit_server() != "default":
            raise ImproperlyConfigured(
                f"tenant {self.schema_name} is on the server {self.unit_server()!r}: that needs tenant logins "
                "(ENGRAM_TENANT_LOGINS)"
            )
        super().ensure_connection()

    def close_if_unusable_or_obsolete(self) -> None:
        """Django's (run at the start and end of each request and task), but a connection of another
        login than the unit's is given back without a round trip: Django's check of its autocommit
        would otherwise connect as the unit's login first, only to close that. A connection kept
        open gives its unit lock back (the next unit takes it again)."""
        if self.tenant_logins and self.connection is not None and not self.in_atomic_block:
            if self.unit_login() != self.login or self.unit_server() != self.server:
                self.close()
                return
        super().close_if_unusable_or_obsolete()
        if self.unit_lock is not None and self.connection is not None and not self.in_atomic_block:
            held, self.unit_lock = self.unit_lock, None
            try:
                with self.connection.cursor() as cursor:
                    cursor.execute(unit_lock_release_sql(held))
            except psycopg.Error:
                self.close()  # the session ends: PostgreSQL releases the lock

    def close(self) -> None:
        """Django's; the connection's unit lock goes with it (the pool's reset or the session's end
        releases it)."""
        try:
            super().close()
        finally:
            self.unit_lock = None

    def get_connection_params(self) -> dict[str, Any]:
        """Django's, as the tenant's login (user and derived password) when the unit needs one."""
        params: dict[str, Any] = super().get_connection_params()
        if self.server != "default":
            server = server_settings(self.server)
            params.update(dbname=server["NAME"], host=server["HOST"], user=server["USER"])
            params.update(password=server["PASSWORD"] or None, port=server["PORT"] or None)
            params = {key: value for key, value in params.items() if value is not None}
        if self.login is not None:
            params["user"] = self.login
            params["password"] = tenant_password(self.login)
        return params

    @property
    def pool(self) -> Any:
        """The pool lending this connection: Django's (the shared login's), or the current tenant
        login's (one per alias, database and login in this process, made on first use); either is a
        ``core.db.availability.GuardedPool``, failing fast while PostgreSQL cannot be reached."""
        if self.login is None and self.server == "default":
            pool = super().pool
            return None if pool is None else availability.guard(pool)
        shared = self.settings_dict["OPTIONS"].get("pool")
        if not shared:
            return None
        key = (self.alias, self.settings_dict["NAME"], self.server, self.login)
        pools = self._connection_pools
        if key not in pools:
            shared = {} if shared is True else shared
            inherited = ("timeout", "max_lifetime", "connection_class", "reconnect_timeout")
            options = {name: shared[name] for name in inherited if name in shared}
            options |= settings.ENGRAM.get("TENANT_POOL") or {}
            kwargs = {**self.get_connection_params(), "autocommit": True}
            pool = availability.GuardedPool(
                kwargs=kwargs,
                open=False,
                configure=self._configure_connection,
                check=availability.GuardedPool.check_connection
                if self.settings_dict["CONN_HEALTH_CHECKS"]
                else None,
                reset=reset_pooled_connection,
                min_size=0,  # a tenant idle for max_idle seconds holds no connection
                num_workers=1,
                name=f"{self.alias}:{self.server}:{self.login}",
                **options,
            )
            pools.setdefault(key, pool)  # as Django's: the first thread to set it wins
        return pools[key]

    def close_pool(self) -> None:
        """Close the pools of this alias: the shared login's and every tenant login's."""
        for key in [k for k in self._connection_pools if isinstance(k, tuple) and k[0] == self.alias]:
            self._connection_pools.pop(key).close()
        login, self.login = self.login, None
        server, self.server = self.server, "default"
        try:
            super().close_pool()
        finally:
            self.login, self.server = login, server

    def _handle_search_path(self, cursor: Any = None) -> None:
        if not self.tenant_roles:
            super()._handle_search_path(cursor)
            return
        if self._setting_search_path:
            return
        if not self.schema_name:
            super()._handle_search_path(cursor)  # raises ImproperlyConfigured
            return
        role = self.unit_role()
        search_paths = self._get_cursor_search_paths()
        wanted = (role, tuple(search_paths))
        # a connection of a tenant's login holds the tenant's unit lock before its first statement
        lock = self.schema_name if self.login is not None and self.unit_lock != self.schema_name else None
        set_due = not (get_limit_set_calls() and self.search_path_set_schemas == wanted)
        if not set_due and lock is None:
            return
        if self.connection.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            # the next statement is a rollback (or fails); the SET follows it on the next cursor
            self.search_path_set_schemas = None
            return
        set_role = f"SET ROLE {quote_ident(role)}" if role else "RESET ROLE"
        paths = ",".join(quote_schema_name(s) for s in search_paths)
        statements = [unit_lock_sql(lock)] if lock is not None else []
        if set_due:
            statements.append(f"{set_role}; SET search_path = {paths}")
        self._setting_search_path = True
        target = self.connection.cursor() if cursor is None else cursor
        if set_due:
            self.search_path_set_schemas = None
        try:
            with self.wrap_database_errors:
                target.execute("; ".join(statements))  # the lock's SELECT is the first result
                held = target.fetchone()[0] if lock is not None else None
            if set_due:
                self.search_path_set_schemas = wanted
        finally:
            self._setting_search_path = False
            if cursor is None:
                target.close()
        if lock is not None:
            if held is not True:
                raise TenantMoving(lock)  # moving (False) or moved away (None): no statement runs here
            self.unit_lock = lock


def fetch_prepared(
    sql: str, params: Sequence[Any] | Mapping[str, Any], *, using: str = DEFAULT_DB_ALIAS
) -> tuple[Any, ...] | None:
    """Run ``sql`` (one statement, ``%s`` or ``%(name)s`` placeholders) as a prepared statement of
    the connection ``using`` (``core.db.prepared.execute_prepared``: parsed once per connection,
    planned once its plan cache settles on the generic plan) and return its first row (``None``:
    no row). It runs on an ordinary cursor of ``using``: the unit's role and search path, Django's
    error wrapping (``DatabaseError``) and query log, autocommit outside an atomic block. PostgreSQL
    re-parses a prepared statement whose search path changed since its last use, so it always
    reads the current tenant's tables; privileges are checked at each execution."""
    if isinstance(params, Mapping):
        values = params
        params = [values[name] for name in _NAMED.findall(sql)]
        sql = _NAMED.sub("%s", sql)
    with connections[using].cursor() as cursor:
        execute_prepared(cursor, sql, params)
        return cast(tuple[Any, ...] | None, cursor.fetchone())


_NAMED = re.compile(r"%\((\w+)\)s")
