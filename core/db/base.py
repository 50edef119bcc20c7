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

``fetch_prepared`` runs one statement as a server-side prepared statement of the connection (a hot
path's fixed statement: parsed and planned once per connection, not on every call), under the same
role and search path as a cursor.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import NO_DB_ALIAS
from django_tenants.postgresql_backend.base import DatabaseWrapper as TenantsDatabaseWrapper
from django_tenants.utils import get_limit_set_calls, get_public_schema_name, quote_schema_name

from core.tenancy import RoleOverride, maintenance_role, quote_ident, roles_enabled, tenant_role

RESET_SQL = "RESET ROLE; RESET search_path"
# psycopg's prepare_threshold for connections fetch_prepared uses: prepare what it asks for
# (prepare=True), never anything else automatically (Django leaves it None, which refuses even that)
PREPARE_ONLY_WHEN_ASKED = 2**31


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
        self._unit_roles: dict[tuple[RoleOverride | None, str, str], str | None] = {}
        super().__init__(*args, **kwargs)
        self.tenant_roles = roles_enabled() and self.alias != NO_DB_ALIAS
        pool = self.settings_dict["OPTIONS"].get("pool")
        if pool and self.tenant_roles:
            options = {} if pool is True else dict(pool)
            options.setdefault("reset", reset_pooled_connection)
            self.settings_dict["OPTIONS"]["pool"] = options

    def set_tenant(self, tenant: Any, include_public: bool = True) -> None:
        """django-tenants' ``set_tenant``, keeping what the connection was last sent: the next
        cursor compares it with the (role, path) it needs and sends a ``SET`` only when they differ
        (django-tenants forgets it here because its own check does not compare). A request that
        proves its key in the tenant's schema and then activates that tenant sends one ``SET``, not
        two. Closing the connection and rollbacks still forget it."""
        sent = self.search_path_set_schemas
        super().set_tenant(tenant, include_public)
        if getattr(self, "tenant_roles", False):  # set_tenant runs inside __init__ too
            self.search_path_set_schemas = sent

    def unit_role(self) -> str | None:
        """The role the connection's next statement runs as (``None``: the login role)."""
        key = (self.role_override, self.schema_name, self.settings_dict["NAME"])
        try:
            return self._unit_roles[key]
        except KeyError:
            pass
        role: str | None
        if self.role_override == "login":
            role = None
        elif self.role_override == "maintenance" or self.schema_name == get_public_schema_name():
            role = maintenance_role()
        else:
            role = tenant_role(self.schema_name, database=self.settings_dict["NAME"])
        # the names follow from settings: looked up once, not ~5 µs of settings reads per cursor (the
        # database's name is in the key because the test runner renames it after connecting)
        self._unit_roles[key] = role
        return role

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
        if get_limit_set_calls() and self.search_path_set_schemas == wanted:
            return
        if self.connection.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            # the next statement is a rollback (or fails); the SET follows it on the next cursor
            self.search_path_set_schemas = None
            return
        set_role = f"SET ROLE {quote_ident(role)}" if role else "RESET ROLE"
        paths = ",".join(quote_schema_name(s) for s in search_paths)
        self._setting_search_path = True
        target = self.connection.cursor() if cursor is None else cursor
        self.search_path_set_schemas = None
        try:
            with self.wrap_database_errors:
                target.execute(f"{set_role}; SET search_path = {paths}")
            self.search_path_set_schemas = wanted
        finally:
            self._setting_search_path = False
            if cursor is None:
                target.close()


def fetch_prepared(
    sql: str, params: Sequence[Any] | Mapping[str, Any], *, using: str = DEFAULT_DB_ALIAS
) -> tuple[Any, ...] | None:
    """Run ``sql`` (psycopg placeholders, ``%s`` or ``%(name)s``) as a prepared statement of the
    connection ``using`` and return its first row (``None``: no row).

    Django's cursors bind parameters on the client (the statement text holds the values), so
    PostgreSQL parses and plans each call anew: ~0.1-0.3 ms for a checkpoint restore's one-row
    read, more than executing it. Here the parameters go separately (server-side binding, psycopg's
    ``prepare=True``): the statement is parsed and planned on its first use on the connection,
    later calls send only the values. PostgreSQL re-parses a prepared statement whose
    ``search_path`` changed since it was planned (``PREPARE``, "the statement will be re-parsed
    using the new search_path"), so it always reads the current tenant's tables; privileges are
    checked at each execution, under the role the cursor would have (``_handle_search_path``).

    Django opens connections with psycopg's ``prepare_threshold`` ``None`` (no prepared statement
    at all, for transaction-mode poolers such as PgBouncer before 1.21, which Engram does not sit
    behind); the first call sets it to ``PREPARE_ONLY_WHEN_ASKED`` on the connection, so only these
    statements are prepared: Django's own cursors bind on the client and never prepare. psycopg
    forgets (and deallocates) a connection's prepared statements after a rollback; they are
    prepared again on their next use.

    Like a Django cursor: the connection is opened (or borrowed from the pool) if needed, refused in
    a broken atomic block, its errors raised as Django's ``DatabaseError`` family, and the statement
    recorded in ``connection.queries`` when queries are logged (tests' ``CaptureQueriesContext``).
    In autocommit mode the statement commits on its own; in an atomic block it joins the
    transaction. Bind a value with a stable PostgreSQL type (``psycopg.types.numeric.Int8`` for a
    bigint): psycopg prepares one statement per (text, parameter types). Raises ``DatabaseError``.
    """
    wrapper = cast(DatabaseWrapper, connections[using])
    wrapper.close_if_health_check_failed()
    wrapper.ensure_connection()
    wrapper.validate_thread_sharing()
    wrapper.validate_no_broken_transaction()
    start = time.monotonic() if wrapper.queries_logged else None
    try:
        with wrapper.wrap_database_errors:
            wrapper._handle_search_path()  # the unit's role and search path, when not set already
            raw: psycopg.Connection[Any] = wrapper.connection
            if raw.prepare_threshold is None:
                raw.prepare_threshold = PREPARE_ONLY_WHEN_ASKED
            with psycopg.Cursor(raw) as cursor:
                cursor.execute(sql, params, prepare=True)
                return cursor.fetchone()
    finally:
        if start is not None:
            wrapper.queries_log.append(
                {"sql": f"{sql} -- prepared, {params!r}", "time": f"{time.monotonic() - start:.3f}"}
            )
