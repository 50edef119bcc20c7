"""PostgreSQL advisory locks, named per tenant: transaction-scoped, and one held for a block
(``advisory_lock``) by work longer than a transaction."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.db import connection

from core.tenancy import current_schema, quote_ident


def lock_name(kind: str, *parts: object) -> str:
    """``kind:<schema>:<parts...>``: the tenant's schema is part of every name, so two tenants never
    wait on each other."""
    return ":".join([kind, current_schema(), *(str(p) for p in parts)])


def advisory_xact_lock(kind: str, *parts: object, shared: bool = False) -> None:
    """Wait for, then hold until the transaction ends, the lock named ``kind:<schema>:<parts...>``.

    The name is hashed to 64 bits (``hashtextextended``). ``shared``: many holders at once, none
    while someone holds it exclusively. Call inside ``transaction.atomic()``.
    """
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(hashtextextended(%s, 0))", [lock_name(kind, *parts)])


def advisory_xact_try_lock(kind: str, *parts: object, shared: bool = False) -> bool:
    """Like :func:`advisory_xact_lock` without waiting: True if the lock is now held, False if it is
    taken (exclusively, or at all for an exclusive request)."""
    function = "pg_try_advisory_xact_lock_shared" if shared else "pg_try_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(hashtextextended(%s, 0))", [lock_name(kind, *parts)])
        return bool(cursor.fetchone()[0])


def advisory_xact_locks(kind: str, keys: Iterable[object]) -> None:
    """Wait for, then hold until the transaction ends, the locks ``kind:<schema>:<key>`` for every key.

    One statement takes them all in the order of their 64-bit hashes: every caller locks any two
    keys in the same order, so callers that each take their whole set this way never deadlock.
    """
    prefix = lock_name(kind) + ":"
    names = sorted({f"{prefix}{key}" for key in keys})
    if not names:
        return
    with connection.cursor() as cursor:
        # ARRAY(... ORDER BY) keeps the order, and unnest hands the hashes out in it
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(k)) FROM unnest(ARRAY("
            "  SELECT DISTINCT hashtextextended(name, 0) FROM unnest(%s::text[]) AS name ORDER BY 1"
            ")) AS k",
            [names],
        )


@contextmanager
def advisory_lock(kind: str, *parts: object, wait: bool = True) -> Iterator[bool]:
    """Hold the session-level lock ``kind:<schema>:<parts...>`` for the block, across the
    transactions in it: yields True once held (``wait``: waiting for it), False at once when another
    session holds it (``wait=False``; the block then runs without it). Released at the end of the
    block, or by PostgreSQL when the session ends (a process that dies frees it)."""
    name = lock_name(kind, *parts)
    function = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(hashtextextended(%s, 0))", [name])
        row = cursor.fetchone()
    held = wait or bool(row[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [name])


#: the lock every unit of work of a tenant holds shared on the tenant's server, and a move
#: exclusively while it copies the tenant's schema (decision 0090)
UNIT_LOCK = "tenant-unit"


def _unit_lock_key(schema: str) -> str:
    """``hashtextextended('tenant-unit:<schema>', 0)`` as SQL (a literal: the statement is sent
    beside ``SET`` commands, where parameters cannot go)."""
    name = f"{UNIT_LOCK}:{schema}".replace("'", "''")
    return f"hashtextextended('{name}', 0)"


def unit_lock_sql(schema: str) -> str:
    """One ``SELECT`` of one value that tries to take the unit lock of ``schema`` shared, without
    waiting: ``true`` (held now, until released or the session ends), ``false`` (a move holds or
    waits for it exclusively: refuse the unit), ``NULL`` (the schema is not on this server any
    more, moved away: not held)."""
    quoted = quote_ident(schema).replace("'", "''")
    return (
        f"SELECT CASE WHEN to_regnamespace('{quoted}') IS NULL THEN NULL "
        f"ELSE pg_try_advisory_lock_shared({_unit_lock_key(schema)}) END"
    )


def unit_lock_release_sql(schema: str) -> str:
    """The statement that releases the unit lock of ``schema`` held shared by the session."""
    return f"SELECT pg_advisory_unlock_shared({_unit_lock_key(schema)})"


def unit_lock_exclusive_sql(schema: str) -> str:
    """The statement that waits for (within the session's ``lock_timeout``) and takes the unit
    lock of ``schema`` exclusively: every unit holding it shared has ended, and none starts until
    it is released (``pg_advisory_unlock_all`` or the session's end)."""
    return f"SELECT pg_advisory_lock({_unit_lock_key(schema)})"
