"""The tenant of the current unit of work, as django-tenants keeps it on the database connection.

django-tenants adds ``schema_name``, ``tenant`` and ``set_tenant`` to Django's connection wrapper;
these functions are the one typed way to reach them.
"""

from __future__ import annotations

from typing import Any, cast

from django.db import connection


def current_schema() -> str:
    """The schema the connection's queries run in (``public`` outside a tenant)."""
    return cast(str, connection.schema_name)  # type: ignore[attr-defined]


def current_tenant() -> Any:
    """The tenant whose schema is active (django-tenants' ``FakeTenant`` for ``public`` alone)."""
    return connection.tenant  # type: ignore[attr-defined]


def activate_tenant(tenant: Any) -> None:
    """Make ``tenant``'s schema the connection's until another is activated."""
    connection.set_tenant(tenant)  # type: ignore[attr-defined]


def activate_public() -> None:
    """Make the public schema the connection's (after work for a tenant on a shared thread)."""
    connection.set_schema_to_public()  # type: ignore[attr-defined]
