"""Move a tenant's schema to another PostgreSQL server and switch it there (decisions 0071, 0090,
0103).

The copy is made by logical replication while the tenant keeps working
(``compliance.services.replication``); the tenant is paused only to let the target catch up, set
its sequences, verify its trail and switch: a pause that does not grow with the tenant's rows.
What makes the switch safe is the tenant's unit lock (``core.locks.unit_lock_sql``): every unit of
work of the tenant (a request, a task, a command) holds it shared on the tenant's server from its
first statement to its end (``core.db.base``), and the move holds it exclusively from the pause
to after the old schema is dropped. So no write reaches the old server after the target caught up:
units in flight finish first (the move waits for them, up to ``wait_seconds``, then gives up,
never the work), and units that start later are refused (503 with ``Retry-After``; tasks are
tried again) until the tenant's row names the new server.

``locked_copy`` asks for the copy without replication (a source without ``wal_level = logical``):
a ``pg_dump`` of the schema restored on the target inside the pause, which then lasts as long as
the copy (minutes for 100k memories).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from django.conf import settings
from django.db import connection
from django_tenants.utils import schema_exists, tenant_context

from compliance.verification import trail_verify
from core.errors import TENANT_CACHE_SECONDS, Conflict, InvalidInput
from core.locks import unit_lock_exclusive_sql
from core.tenancy import logins_enabled, on_server, server_settings, tenant_server_note
from tenants.models import Tenant
from tenants.roles import tenant_role_ensure
from tenants.services import tenant_move_mark

from .backup import OPERATIONS_SESSION, SCHEMA_DUMP, schema_drop, schema_dump, schema_load, shared_login
from .records import job_record
from .replication import (
    Link,
    caught_up_wait,
    indexes_build,
    indexes_defer,
    link_for,
    publish,
    replication_check,
    sequences_copy,
    subscribe,
    synced_wait,
    unlink,
)

#: seconds a move waits for the tenant's units in flight before it gives up (the default)
WAIT_SECONDS = 60.0
#: seconds a move waits for the target to copy the tenant's rows (the default)
SYNC_SECONDS = 6 * 3600.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MoveResult:
    """What ``tenant_move`` did: the servers (aliases); the seconds the tenant was paused (from
    its row marked moving to its switch), of which it waited for units in flight; the seconds
    of the copy (before the pause by replication, inside it with ``locked_copy``); the events
    verified on the target; the seconds of the whole move (until the old schema was dropped);
    whether the copy was ``"replication"`` or ``"locked-copy"``."""

    source: str
    target: str
    pause_seconds: float
    wait_seconds: float
    copy_seconds: float
    events_checked: int
    total_seconds: float = 0.0
    method: str = "replication"


def _cluster(server: str) -> tuple[object, object]:
    """(host, port) of ``server``: roles belong to a cluster, shared by its databases."""
    db = connection.settings_dict if server == "default" else server_settings(server)
    return db["HOST"], db["PORT"]


@contextmanager
def unit_lock_exclusive(*, server: str, schema: str, wait_seconds: float) -> Iterator[None]:
    """Hold the unit lock of ``schema`` exclusively on ``server`` for the block, on a session of
    the shared login of its own (released when the block ends, or by PostgreSQL if this process
    dies). Waits for the units holding it (``lock_timeout``); raises ``Conflict`` when they have
    not all ended within ``wait_seconds``."""
    conninfo, password = shared_login(server)
    with psycopg.connect(conninfo, password=password, autocommit=True) as session:
        session.execute(f"SET lock_timeout = {max(1, int(wait_seconds * 1000))}")
        try:
            session.execute(unit_lock_exclusive_sql(schema))
        except psycopg.errors.LockNotAvailable:
            raise Conflict(
                f"work of tenant {schema!r} still in flight after {wait_seconds:g} s: the move is "
                "abandoned and the tenant stays where it is",
                field="wait",
            ) from None
        yield


def _check(tenant: Tenant, to: str) -> None:
    if not logins_enabled():
        raise InvalidInput(
            "moving a tenant needs tenant logins (ENGRAM_TENANT_LOGINS)", field="ENGRAM_TENANT_LOGINS"
        )
    if to == tenant.database:
        raise InvalidInput(f"tenant {tenant.schema_name!r} is on {to!r} already", field="to")
    if to != "default" and to not in settings.ENGRAM.get("DB_SERVERS", {}):
        raise InvalidInput(f"no PostgreSQL server {to!r} in ENGRAM_DB_SERVERS", field="to")
    with on_server(to):
        if schema_exists(tenant.schema_name):
            raise Conflict(f"schema {tenant.schema_name!r} exists on {to!r} already")


def _target_schema(tenant: Tenant, *, source: str, to: str, schema_only: bool) -> float:
    """Load ``tenant``'s schema from ``source`` onto ``to`` (its objects, and its rows unless
    ``schema_only``) and make its role there; returns the seconds it took."""
    schema, started = tenant.schema_name, time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="engram-move-") as work:
        dump = Path(work) / SCHEMA_DUMP
        schema_dump(schema, dump, server=source, schema_only=schema_only)
        schema_load(dump, server=to)
    with on_server(to):
        tenant_role_ensure(schema)
    return time.perf_counter() - started


def _copy_live(tenant: Tenant, link: Link, *, sync_seconds: float) -> float:
    """Make the schema on the target and copy its rows there by replication while the tenant
    works (the indexes that need not exist meanwhile are built after the rows are in); returns
    the seconds until the target had caught up once (from then on changes stream)."""
    started = time.perf_counter()
    _target_schema(tenant, source=link.source, to=link.target, schema_only=True)
    deferred = indexes_defer(link)
    tables = publish(link)
    subscribe(link)
    synced_wait(link, tables=len(tables), timeout=sync_seconds)
    indexes_build(link, deferred)
    caught_up_wait(link, timeout=sync_seconds)  # what the tenant wrote meanwhile: not in the pause
    return time.perf_counter() - started


def _verified(tenant: Tenant, *, source: str, to: str) -> int:
    """Verify the trail of the copy on ``to``; the events checked. Raises ``Conflict`` when it
    does not verify."""
    tenant.database = to  # this process's units of the tenant now reach the copy
    with tenant_context(tenant):
        report = trail_verify()
    if not report.ok:
        raise Conflict(
            f"the copy of {tenant.schema_name!r} on {to!r} does not verify; the tenant stays on {source!r}"
        )
    return report.chain.checked


def _abandon(tenant: Tenant, link: Link | None, *, source: str, to: str) -> None:
    """Leave the tenant where it was: unpaused on ``source``, the move's replication and copy
    removed (a failure to remove them is logged: the cause of the abandon is what is raised)."""
    _unpause(tenant, source)
    try:
        if link is not None:
            unlink(link)
        with on_server(to):
            if schema_exists(tenant.schema_name):  # the role too, unless the servers share it
                schema_drop(tenant.schema_name, role=_cluster(source) != _cluster(to))
    except Exception:
        logger.exception("the abandoned move of %s left objects on %s or %s", tenant.schema_name, source, to)


def tenant_move(
    *,
    tenant: Tenant,
    to: str,
    wait_seconds: float = WAIT_SECONDS,
    tail_seconds: float | None = None,
    locked_copy: bool = False,
    sync_seconds: float = SYNC_SECONDS,
) -> MoveResult:
    """Move ``tenant``'s schema to the server ``to`` (an alias of ``ENGRAM["DB_SERVERS"]``, or
    ``"default"``) and switch its row there. Every process must run with tenant logins (the unit
    lock is taken on a tenant's login connections); this one must too.

    1. Copy while the tenant works (``_copy_live``: its schema, a publication and a subscription;
       up to ``sync_seconds``). Skipped with ``locked_copy``.
    2. Pause: ``Tenant.moving`` makes the tenant's requests answer 503 (``core.errors.TenantMoving``)
       and its tasks wait; take the unit lock exclusively on its server: wait for its units in
       flight (up to ``wait_seconds``, then ``Conflict``), from then on a unit's first statement
       there is refused, whatever the process read.
    3. Catch up: wait (up to ``wait_seconds``) until the target applied all the source committed,
       copy the sequences, remove the replication (with ``locked_copy``: the dump and restore);
       verify the copy's trail on ``to``.
    4. Switch: ``database`` = ``to``, ``moving`` off, in one update (the pause ends).
    5. Keep the lock ``tail_seconds`` (default: the processes' tenant cache, plus one) so that a
       process still routing the tenant to the old server is refused, not served from it; then
       drop the schema (and the role, on another cluster) there; record the move in the trail.

    A failure before the switch leaves the tenant where it was, unpaused, with the copy and the
    replication removed. Other tenants are not touched. Redis and Neo4j are shared by the servers
    (keys and nodes name the tenant): nothing to copy. Raises ``InvalidInput`` for the tenant's own
    server, an unknown alias, tenant logins off, or servers not set up for replication (naming the
    setting); ``Conflict`` when the schema exists on ``to`` already, a table has no replica
    identity, work in flight outlasts the wait or the copy does not verify; ``RuntimeError`` when
    the copy fails or the target does not catch up."""
    source, schema, started = tenant.database, tenant.schema_name, time.perf_counter()
    _check(tenant, to)
    link = None if locked_copy else link_for(schema=schema, source=source, target=to)
    if link is not None:
        replication_check(link)
        unlink(link)  # what a move that died left
    with ExitStack() as held:
        try:
            copy_seconds = _copy_live(tenant, link, sync_seconds=sync_seconds) if link else 0.0
            tenant_move_mark(tenant=tenant, moving=True)
            paused = time.perf_counter()
            held.enter_context(unit_lock_exclusive(server=source, schema=schema, wait_seconds=wait_seconds))
            waited = time.perf_counter() - paused
            if link is not None:
                caught_up_wait(link, timeout=wait_seconds)
                sequences_copy(link)
                unlink(link)
            else:
                copy_seconds = _target_schema(tenant, source=source, to=to, schema_only=False)
            checked = _verified(tenant, source=source, to=to)
            tenant_move_mark(tenant=tenant, moving=False, database=to)
        except BaseException:
            _abandon(tenant, link, source=source, to=to)
            raise
        pause = time.perf_counter() - paused
        time.sleep(TENANT_CACHE_SECONDS + 1.0 if tail_seconds is None else tail_seconds)
        with on_server(source):
            schema_drop(schema, role=_cluster(source) != _cluster(to))
    method = "locked-copy" if locked_copy else "replication"
    _record(tenant, source=source, to=to, pause=pause, waited=waited, method=method)
    total = time.perf_counter() - started
    return MoveResult(source, to, pause, waited, copy_seconds, checked, total, method)


def _record(tenant: Tenant, *, source: str, to: str, pause: float, waited: float, method: str) -> None:
    with tenant_context(tenant):
        job_record(
            job="tenant_move",
            action="tenant.moved",
            content=f"tenant moved from the database server {source!r} to {to!r}",
            payload={
                "from": source,
                "to": to,
                "method": method,
                "pause_seconds": round(pause, 3),
                "waited_seconds": round(waited, 3),
            },
            session_id=OPERATIONS_SESSION,
        )


def _unpause(tenant: Tenant, source: str) -> None:
    tenant_move_mark(tenant=tenant, moving=False, database=source)
    tenant_server_note(tenant.schema_name, source)
