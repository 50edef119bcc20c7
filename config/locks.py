"""Transaction-scoped PostgreSQL advisory locks, named per tenant."""

from __future__ import annotations

from django.db import connection


def advisory_xact_lock(kind: str, *parts: object) -> None:
    """Wait for, then hold until the transaction ends, the lock named ``kind:<schema>:<parts...>``.

    The name is hashed to 64 bits (``hashtextextended``); the tenant's schema is part of it, so two
    tenants never wait on each other. Call inside ``transaction.atomic()``.
    """
    name = ":".join([kind, connection.schema_name, *(str(p) for p in parts)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [name])
