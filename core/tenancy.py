"""The tenant of the current unit of work, and the PostgreSQL role it runs as.

django-tenants adds ``schema_name``, ``tenant`` and ``set_tenant`` to Django's connection wrapper;
these functions are the one typed way to reach them.

Isolation is enforced by the database, not only by the search path (issue 12): every tenant has a
role of its own (``tenant_role``: NOLOGIN, privileges on its own schema and nothing else) and the
database backend (``core.db``) puts ``SET ROLE`` in the same statement as django-tenants'
``SET search_path``, before the first query of every cursor. So activating a tenant
(``activate_tenant``, django-tenants' ``set_tenant`` / ``tenant_context`` / ``schema_context``) also
switches the role, and a query that names another tenant's schema fails with ``insufficient_privilege``
whatever the application code does. Outside a tenant (the public schema: routing a request to its
tenant, the platform admin, migrations, provisioning) the connection runs as the maintenance role,
which owns the schemas and tables. ``maintenance()`` asks for that role inside a tenant's schema
(migrations, ``ANALYZE``); ``login_role()`` for the login role itself (preparing the database before
migrations).

With ``logins_enabled()`` (the default outside the test process) a tenant's unit of work does not
switch role on the shared connection: it runs on a connection authenticated as the tenant's role,
a login of its own (``tenant_password``), so no SQL sent there can become another tenant or the
maintenance role (docs/decisions/0001-tenant-logins.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, cast

from django.conf import settings
from django.db import connection
from django.utils.crypto import salted_hmac

#: PostgreSQL truncates identifiers to 63 bytes (NAMEDATALEN - 1)
MAX_IDENTIFIER_BYTES = 63

RoleOverride = Literal["maintenance", "login"]


def current_schema() -> str:
    """The schema the connection's queries run in (``public`` outside a tenant)."""
    return cast(str, connection.schema_name)  # type: ignore[attr-defined]


def current_tenant() -> Any:
    """The tenant whose schema is active (django-tenants' ``FakeTenant`` for ``public`` alone)."""
    return connection.tenant  # type: ignore[attr-defined]


def activate_tenant(tenant: Any) -> None:
    """Make ``tenant``'s schema the connection's until another is activated; from the next
    statement on, the connection also runs as the tenant's role (``tenant_role``)."""
    connection.set_tenant(tenant)  # type: ignore[attr-defined]


def roles_enabled() -> bool:
    """Whether units of work switch to their tenant's role (``ENGRAM["TENANT_ROLES"]``, env
    ``ENGRAM_TENANT_ROLES``; on unless turned off)."""
    return bool(settings.ENGRAM.get("TENANT_ROLES", True))


def logins_enabled() -> bool:
    """Whether a tenant's unit of work connects as the tenant's own login instead of switching the
    shared login with ``SET ROLE`` (``ENGRAM["TENANT_LOGINS"]``, env ``ENGRAM_TENANT_LOGINS``; on
    unless turned off, off in the test process). Needs ``roles_enabled()``."""
    return roles_enabled() and bool(settings.ENGRAM.get("TENANT_LOGINS", True))


def tenant_password(role: str) -> str:
    """The password of the tenant login ``role`` (``tenant_role``): 64 hex digits of an HMAC-SHA256
    of the role's name keyed by ``ENGRAM["DB_TENANT_SECRET"]`` (``SECRET_KEY`` when empty). Only
    the application, which holds the secret, can connect as a tenant."""
    secret = settings.ENGRAM.get("DB_TENANT_SECRET") or settings.SECRET_KEY
    return salted_hmac("engram.tenant-login", role, secret=secret, algorithm="sha256").hexdigest()


def quote_ident(name: str) -> str:
    """``name`` as a PostgreSQL identifier in double quotes (embedded quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def maintenance_role() -> str:
    """The role that owns the schemas and tables and runs migrations, provisioning and the public
    schema's work (``ENGRAM["DB_MAINTENANCE_ROLE"]``, default ``engram_maint``)."""
    return str(settings.ENGRAM.get("DB_MAINTENANCE_ROLE") or "engram_maint")


def tenant_role(schema_name: str, *, database: str | None = None) -> str:
    """The role of the tenant whose schema is ``schema_name``: ``<prefix><schema_name>``.

    The prefix is ``ENGRAM["DB_TENANT_ROLE_PREFIX"]``, by default ``<database>_t_`` (``database``:
    the connection's database name unless given): roles belong to the whole PostgreSQL cluster, so
    two databases on one server (a test run beside another) never share a tenant's role. A name
    longer than PostgreSQL's 63 bytes keeps its first bytes and ends in 10 hex digits of its SHA-256,
    so two long names never collide by truncation.
    """
    prefix = settings.ENGRAM.get("DB_TENANT_ROLE_PREFIX") or (
        f"{database or connection.settings_dict['NAME']}_t_"
    )
    name = f"{prefix}{schema_name}"
    if len(name.encode()) <= MAX_IDENTIFIER_BYTES:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    head = name.encode()[: MAX_IDENTIFIER_BYTES - len(digest) - 1].decode(errors="ignore")
    return f"{head}_{digest}"


@contextmanager
def _override(attribute: str, value: str) -> Iterator[None]:
    """Set the connection's ``attribute`` (``role_override``, ``server_override``: read by the
    backend before each unit's statement) for the block; the previous value comes back after."""
    previous = getattr(connection, attribute)
    setattr(connection, attribute, value)
    try:
        yield
    finally:
        setattr(connection, attribute, previous)


@contextmanager
def maintenance() -> Iterator[None]:
    """Run the block as the maintenance role, in whichever schema is active: migrations, creating
    and dropping tenants and their roles, ``ANALYZE``. Nests; the previous role comes back after."""
    with _override("role_override", "maintenance"):
        yield


@contextmanager
def login_role() -> Iterator[None]:
    """Run the block as the login role itself (no ``SET ROLE``): only to prepare the database for
    the maintenance role before migrating (``tenants.roles.database_prepare``)."""
    with _override("role_override", "login"):
        yield


def activate_public() -> None:
    """Make the public schema the connection's (after work for a tenant on a shared thread)."""
    connection.set_schema_to_public()  # type: ignore[attr-defined]


#: schema -> the alias of the server holding it, for tenants not on "default" (decision 0071): set
#: whenever a tenant's row is activated (``activate_tenant``, ``tenant_context``, django-tenants'
#: middleware and Celery's tenant), so ``schema_context(name)`` after that reaches the same server
_servers: dict[str, str] = {}


def tenant_server(schema_name: str) -> str:
    """The alias of the server holding ``schema_name`` as this process last saw the tenant's row
    (``"default"``: the server of ``DATABASE_URL``)."""
    return _servers.get(schema_name, "default")


def tenant_server_note(schema_name: str, server: str) -> None:
    """Remember that ``schema_name`` lives on ``server`` (the backend calls it on ``set_tenant``)."""
    if server == "default":
        _servers.pop(schema_name, None)
    else:
        _servers[schema_name] = server


def server_settings(server: str) -> dict[str, Any]:
    """NAME, USER, PASSWORD, HOST, PORT of the server ``server`` (``ENGRAM["DB_SERVERS"]``).
    Raises ``ImproperlyConfigured`` for an alias that is not configured."""
    from django.core.exceptions import ImproperlyConfigured

    try:
        return dict(settings.ENGRAM.get("DB_SERVERS", {})[server])
    except KeyError:
        raise ImproperlyConfigured(f"no PostgreSQL server {server!r} in ENGRAM_DB_SERVERS") from None


@contextmanager
def on_server(server: str) -> Iterator[None]:
    """Run the block's public-schema and maintenance work on the server ``server`` (an alias of
    ``ENGRAM["DB_SERVERS"]``) instead of ``DATABASE_URL``'s: provisioning a moved tenant's schema
    and role there. Needs tenant logins (the connection is switched like a login's)."""
    with _override("server_override", server):
        yield
