"""The PostgreSQL roles behind tenant isolation (issue 12): one per tenant, and the maintenance role.

- A **tenant role** (``core.tenancy.tenant_role``: ``<database>_t_<schema>``) may use its
  own schema and read and write the rows of its tables and sequences, including tables that later
  migrations add there (default privileges of the maintenance role, whatever app they belong to).
  Nothing else: no other tenant's schema, no table of the public schema (a tenant's unit of work
  reads its tenant row in the public phase, before it switches: the key's or the host's lookup,
  the task's header), no DDL, no ``TRUNCATE``. PostgreSQL's defaults for ``PUBLIC`` still apply:
  ``USAGE`` on the public schema (the ``vector`` type and its functions live there), ``CONNECT``,
  ``TEMPORARY``, and reading the system catalogs (which list schema and table names, not rows).
  It is also a login, with the password ``core.tenancy.tenant_password`` derives from a secret
  the application holds: with tenant logins on, a tenant's unit of work connects as it, and from
  there no ``SET ROLE`` reaches another role (docs/decisions/0001-tenant-logins.md).
- The **maintenance role** (``core.tenancy.maintenance_role``, NOLOGIN CREATEROLE) owns the schemas
  and tables, runs migrations, creates and drops tenants and their roles, and does the public
  schema's work (routing a request to its tenant, the platform admin).
- The **login role** (``DATABASE_URL``'s user) holds both with ``SET`` and without ``INHERIT``: by
  itself it can read nothing of Engram's; it can only become one of them. It is granted each tenant
  role when the tenant is created (or by the next ``migrate_schemas``), for the ``SET ROLE`` mode
  (tenant logins off, and the test process); taking that away would contain nothing more, since it
  must become the maintenance role, which owns every tenant's tables.

Functions here run SQL on the default connection; those that change roles do so as the maintenance
role (``core.tenancy.maintenance()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection
from django.db.backends.utils import CursorWrapper
from django_tenants.utils import get_public_schema_name, schema_exists

from core.tenancy import login_role, maintenance, maintenance_role, quote_ident, tenant_password, tenant_role

TABLE_PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE"
SEQUENCE_PRIVILEGES = "USAGE, SELECT"

# Objects of Engram's schemas (public and the tenants') not owned by the maintenance role yet, with
# whether the current (login) role may hand them over. Members of extensions (pgvector's type and
# functions) stay with the extension's owner; sequences owned by a column move with their table.
_NOT_YET_OWNED = r"""
WITH objects AS (
    SELECT 'SCHEMA' AS kind, quote_ident(n.nspname) AS name, n.nspowner AS owner,
           'pg_namespace'::regclass AS catalog, n.oid AS oid
    FROM pg_namespace n
    WHERE n.nspname = ANY(%(schemas)s) AND n.nspname <> 'public'
    UNION ALL
    SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                          WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
           c.oid::regclass::text, c.relowner, 'pg_class'::regclass, c.oid
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = ANY(%(schemas)s) AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
      AND NOT EXISTS (
          SELECT 1 FROM pg_depend d
          WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
            AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i'))
    UNION ALL
    SELECT 'ROUTINE', p.oid::regprocedure::text, p.proowner, 'pg_proc'::regclass, p.oid
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = ANY(%(schemas)s)
)
SELECT o.kind, o.name, o.owner::regrole::text, pg_has_role(o.owner, 'USAGE')
FROM objects o
WHERE o.owner <> (SELECT oid FROM pg_roles WHERE rolname = %(maintenance)s)
  AND NOT EXISTS (
      SELECT 1 FROM pg_depend d WHERE d.classid = o.catalog AND d.objid = o.oid AND d.deptype = 'e')
ORDER BY o.kind = 'SCHEMA' DESC, o.name
"""


def _fetch_one(cursor: CursorWrapper, sql: str, params: Sequence[Any] | None = None) -> tuple[object, ...]:
    cursor.execute(sql, params)
    row = cursor.fetchone()
    assert row is not None  # every query passed here returns one row
    return tuple(row)


def _grant_or_explain(cursor: CursorWrapper, sql: str, why: str) -> None:
    try:
        cursor.execute(sql)
    except DatabaseError as exc:
        raise ImproperlyConfigured(f"{why}; as a superuser or the database's owner run: {sql}") from exc


def database_prepare() -> list[str]:
    """Make the database ready for migrations run by the maintenance role; run before them
    (``migrate_schemas`` does). Idempotent, and a handful of catalog queries when all is in place.

    As the login role: create the maintenance role if missing (when the login may create roles);
    let it create schemas in the database and tables in ``public``; take ``CREATE`` on ``public``
    from ``PUBLIC`` (PostgreSQL 15+ does already); install pgvector when the login is a superuser
    (it is not a trusted extension); hand over to the maintenance role the objects of the public
    and tenant schemas that the login may transfer (a database migrated before issue 12).

    Returns what was done or left to do, one line each. Raises ``ImproperlyConfigured`` naming the
    statement a superuser must run when the login cannot do it itself (docs/guides/operators/postgresql.md).
    """
    maint = maintenance_role()
    notes: list[str] = []
    with login_role(), connection.cursor() as cursor:
        login, superuser, createrole, database = _fetch_one(
            cursor,
            "SELECT rolname, rolsuper, rolcreaterole, current_database() FROM pg_roles "
            "WHERE rolname = session_user",
        )
        q_maint, q_db = quote_ident(maint), quote_ident(str(database))
        cursor.execute("SELECT rolcreaterole FROM pg_roles WHERE rolname = %s", [maint])
        row = cursor.fetchone()
        if row is None:
            if not (superuser or createrole):
                raise ImproperlyConfigured(
                    f"the maintenance role {maint} does not exist and {login} may not create it; as a "
                    f"superuser run: CREATE ROLE {q_maint} NOLOGIN CREATEROLE; "
                    f"GRANT {q_maint} TO {quote_ident(str(login))} WITH INHERIT FALSE, SET TRUE"
                )
            cursor.execute(f"CREATE ROLE {q_maint} NOLOGIN CREATEROLE")
            if not superuser:
                cursor.execute(f"GRANT {q_maint} TO SESSION_USER WITH INHERIT FALSE, SET TRUE")
            notes.append(f"created the maintenance role {maint}")
        elif not row[0]:
            _grant_or_explain(
                cursor, f"ALTER ROLE {q_maint} CREATEROLE", f"{maint} must create the tenants' roles"
            )
        if (
            not superuser
            and not _fetch_one(cursor, "SELECT pg_has_role(session_user, %s, 'SET')", [maint])[0]
        ):
            raise ImproperlyConfigured(
                f"{login} cannot SET ROLE {maint}; as a superuser run: "
                f"GRANT {q_maint} TO {quote_ident(str(login))} WITH INHERIT FALSE, SET TRUE"
            )
        can_create_schemas, can_create_tables, public_creates = _fetch_one(
            cursor,
            "SELECT has_database_privilege(%s, current_database(), 'CREATE'), "
            "has_schema_privilege(%s, 'public', 'CREATE'), has_schema_privilege('public', 'public', 'CREATE')",
            [maint, maint],
        )
        if not can_create_schemas:
            _grant_or_explain(
                cursor, f"GRANT CREATE ON DATABASE {q_db} TO {q_maint}", f"{maint} must create tenant schemas"
            )
        if not can_create_tables:
            _grant_or_explain(
                cursor,
                f"GRANT CREATE ON SCHEMA public TO {q_maint}",
                f"{maint} must create the shared tables",
            )
        if public_creates:
            # before PostgreSQL 15 every role could create objects in public: a tenant role too
            _grant_or_explain(
                cursor, "REVOKE CREATE ON SCHEMA public FROM PUBLIC", "tenant roles must not create in public"
            )
        if not _fetch_one(cursor, "SELECT count(*) FROM pg_extension WHERE extname = 'vector'")[0]:
            _grant_or_explain(
                cursor,
                "CREATE EXTENSION IF NOT EXISTS vector SCHEMA public",
                "pgvector is not installed in this database, and only a superuser may install it",
            )
        notes += _adopt(cursor, maint)
    return notes


def _adopt(cursor: CursorWrapper, maint: str) -> list[str]:
    """Hand over to ``maint`` what the login may transfer in the public and tenant schemas."""
    schemas = [get_public_schema_name()]
    if _fetch_one(
        cursor,
        "SELECT to_regclass('public.tenants_tenant') IS NOT NULL "
        "AND has_table_privilege('public.tenants_tenant', 'SELECT')",
    )[0]:
        cursor.execute("SELECT schema_name FROM public.tenants_tenant WHERE schema_name <> %s", [schemas[0]])
        schemas += [name for (name,) in cursor.fetchall()]
    cursor.execute(_NOT_YET_OWNED, {"schemas": schemas, "maintenance": maint})
    notes = []
    adopted = 0
    for kind, name, owner, transferable in cursor.fetchall():
        if transferable:
            cursor.execute(f"ALTER {kind} {name} OWNER TO {quote_ident(maint)}")
            adopted += 1
        else:
            notes.append(
                f"{kind.lower()} {name} is owned by {owner}: its owner must run ALTER {kind} {name} "
                f"OWNER TO {quote_ident(maint)}"
            )
    if adopted:
        notes.insert(0, f"{maint} now owns {adopted} more objects of the public and tenant schemas")
    return notes


def _login_is_superuser(cursor: CursorWrapper) -> bool:
    return bool(_fetch_one(cursor, "SELECT rolsuper FROM pg_roles WHERE rolname = session_user")[0])


def tenant_role_ensure(schema_name: str) -> str:
    """Create the role of the tenant whose schema is ``schema_name`` if it is missing, make it a
    login with its derived password (``tenant_password``: so a new secret takes effect here), grant
    it what a unit of work of that tenant needs (see the module docstring) and let the login role
    switch to it. Idempotent (also under concurrent calls). Returns the role's name.

    Raises ``ValueError`` for the public schema (it has no tenant role: its work runs as the
    maintenance role) and ``DatabaseError`` when the schema does not exist.
    """
    if schema_name == get_public_schema_name():
        raise ValueError("the public schema has no tenant role")
    role = tenant_role(schema_name)
    r, s = quote_ident(role), quote_ident(schema_name)
    with maintenance(), connection.cursor() as cursor:
        cursor.execute(
            f"DO $$ BEGIN CREATE ROLE {r} NOLOGIN NOINHERIT; "
            "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )
        # the SCRAM verifier, computed here (libpq): the password itself never reaches the server
        raw = connection.connection.pgconn
        verifier = raw.encrypt_password(tenant_password(role).encode(), role.encode(), b"scram-sha-256")
        cursor.execute(f"ALTER ROLE {r} LOGIN PASSWORD %s", [verifier.decode()])
        for statement in (
            f"GRANT USAGE ON SCHEMA {s} TO {r}",
            f"GRANT {TABLE_PRIVILEGES} ON ALL TABLES IN SCHEMA {s} TO {r}",
            f"GRANT {SEQUENCE_PRIVILEGES} ON ALL SEQUENCES IN SCHEMA {s} TO {r}",
            # tables and sequences the maintenance role creates there later (any app's migrations)
            f"ALTER DEFAULT PRIVILEGES IN SCHEMA {s} GRANT {TABLE_PRIVILEGES} ON TABLES TO {r}",
            f"ALTER DEFAULT PRIVILEGES IN SCHEMA {s} GRANT {SEQUENCE_PRIVILEGES} ON SEQUENCES TO {r}",
        ):
            cursor.execute(statement)
        if not _login_is_superuser(cursor):  # a superuser may SET ROLE to any role already
            cursor.execute(
                "SELECT 1 FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid "
                "JOIN pg_roles u ON u.oid = m.member "
                "WHERE r.rolname = %s AND u.rolname = session_user AND m.set_option AND NOT m.inherit_option",
                [role],
            )
            if cursor.fetchone() is None:
                cursor.execute(f"GRANT {r} TO SESSION_USER WITH INHERIT FALSE, SET TRUE")
    return role


def tenant_role_drop(schema_name: str) -> None:
    """Revoke what ``tenant_role_ensure`` granted and drop the tenant's role; nothing if it does not
    exist. Raises ``DatabaseError`` if someone granted the role more (PostgreSQL lists it)."""
    role = tenant_role(schema_name)
    r, s = quote_ident(role), quote_ident(schema_name)
    with maintenance(), connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
        if cursor.fetchone() is None:
            return
        if schema_exists(schema_name):
            for statement in (
                f"REVOKE ALL ON ALL TABLES IN SCHEMA {s} FROM {r}",
                f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {s} FROM {r}",
                f"REVOKE ALL ON SCHEMA {s} FROM {r}",
                f"ALTER DEFAULT PRIVILEGES IN SCHEMA {s} REVOKE ALL ON TABLES FROM {r}",
                f"ALTER DEFAULT PRIVILEGES IN SCHEMA {s} REVOKE ALL ON SEQUENCES FROM {r}",
            ):
                cursor.execute(statement)
        cursor.execute(f"DROP ROLE {r}")


def tenant_roles_sync(*, schema_names: list[str]) -> int:
    """``tenant_role_ensure`` for each of ``schema_names`` whose schema exists (the public schema
    skipped): after migrations, so tables created outside the maintenance role's default privileges
    are granted too and the login running them may switch to every tenant. Returns how many."""
    public = get_public_schema_name()
    done = 0
    for schema_name in schema_names:
        if schema_name != public and schema_exists(schema_name):
            tenant_role_ensure(schema_name)
            done += 1
    return done
