"""PostgreSQL advisory locks, named per tenant: transaction-scoped, and one held for a block
(``advisory_lock``) by work longer than a transaction."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.db import connection

from core.tenancy import current_schema


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
