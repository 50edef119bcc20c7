"""Move a tenant's schema to another PostgreSQL server and switch it there (decisions 0071, 0090).

The copy is a ``pg_dump`` of the schema restored on the target (``compliance.services.backup``).
What makes it safe is the tenant's unit lock (``core.locks.unit_lock_sql``): every unit of work of
the tenant (a request, a task, a command) holds it shared on the tenant's server from its first
statement to its end (``core.db.base``), and the move holds it exclusively from before the dump
to after the old schema is dropped. So no write reaches the old server after the dump begins:
units in flight finish first (the move waits for them, up to ``wait_seconds``, then gives up,
never the work), and units that start later are refused (503 with ``Retry-After``; tasks are
tried again) until the tenant's row names the new server.
"""

from __future__ import annotations

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

#: seconds a move waits for the tenant's units in flight before it gives up (the default)
WAIT_SECONDS = 60.0


@dataclass(frozen=True)
class MoveResult:
    """What ``tenant_move`` did: the servers (aliases); the seconds the tenant was paused (from
    its row marked moving to its switch), of which it waited for units in flight and copied; the
    events verified on the target."""

    source: str
    target: str
    pause_seconds: float
    wait_seconds: float
    copy_seconds: float
    events_checked: int


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


def _copy(tenant: Tenant, *, source: str, to: str) -> tuple[float, int]:
    """Copy ``tenant``'s schema from ``source`` to ``to``, make its role there and verify its trail
    on ``to`` (the copy is dropped and ``Conflict`` raised when it does not verify). Returns the
    seconds the copy took and the events verified."""
    schema, started = tenant.schema_name, time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="engram-move-") as work:
        dump = Path(work) / SCHEMA_DUMP
        schema_dump(schema, dump, server=source)
        schema_load(dump, server=to)
    with on_server(to):
        tenant_role_ensure(schema)
    copy_seconds = time.perf_counter() - started
    tenant.database = to  # this process's units of the tenant now reach the copy
    with tenant_context(tenant):
        report = trail_verify()
    if not report.ok:
        with on_server(to):
            schema_drop(schema)
        raise Conflict(f"the copy of {schema!r} on {to!r} does not verify; the tenant stays on {source!r}")
    return copy_seconds, report.chain.checked


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


def tenant_move(
    *, tenant: Tenant, to: str, wait_seconds: float = WAIT_SECONDS, tail_seconds: float | None = None
) -> MoveResult:
    """Move ``tenant``'s schema to the server ``to`` (an alias of ``ENGRAM["DB_SERVERS"]``, or
    ``"default"``) and switch its row there. Every process must run with tenant logins (the unit
    lock is taken on a tenant's login connections); this one must too.

    1. Pause: ``Tenant.moving`` makes the tenant's requests answer 503 (``core.errors.TenantMoving``)
       and its tasks wait, in processes that read the row.
    2. Take the tenant's unit lock exclusively on its server (``unit_lock_exclusive``): wait for
       its units in flight (up to ``wait_seconds``, then ``Conflict``: the tenant is unpaused
       where it was, the work goes on); from then on a unit's first statement there is refused,
       whatever the process read.
    3. Copy the schema and make the role on ``to``; verify the copy's trail there (on failure the
       copy is dropped, the tenant unpaused where it was, ``Conflict`` raised).
    4. Switch: ``database`` = ``to``, ``moving`` off, in one update (the pause ends).
    5. Keep the lock ``tail_seconds`` (default: the processes' tenant cache, plus one) so that a
       process still routing the tenant to the old server is refused, not served from it; then
       drop the schema (and the role, on another cluster) there; record the move in the trail.

    Other tenants are not touched. Redis and Neo4j are shared by the servers (keys and nodes name
    the tenant): nothing to copy. Raises ``InvalidInput`` for the tenant's own server, an unknown
    alias or tenant logins off, ``Conflict`` when the schema exists on ``to`` already."""
    source, schema = tenant.database, tenant.schema_name
    _check(tenant, to)
    tenant_move_mark(tenant=tenant, moving=True)
    paused = time.perf_counter()
    with ExitStack() as held:
        try:
            held.enter_context(unit_lock_exclusive(server=source, schema=schema, wait_seconds=wait_seconds))
        except BaseException:
            _unpause(tenant, source)
            raise
        waited = time.perf_counter() - paused
        try:
            copy_seconds, checked = _copy(tenant, source=source, to=to)
            tenant_move_mark(tenant=tenant, moving=False, database=to)
        except BaseException:
            _unpause(tenant, source)
            raise
        pause = time.perf_counter() - paused
        time.sleep(TENANT_CACHE_SECONDS + 1.0 if tail_seconds is None else tail_seconds)
        with on_server(source):
            schema_drop(schema, role=_cluster(source) != _cluster(to))
    with tenant_context(tenant):
        job_record(
            job="tenant_move",
            action="tenant.moved",
            content=f"tenant moved from the database server {source!r} to {to!r}",
            payload={
                "from": source,
                "to": to,
                "pause_seconds": round(pause, 3),
                "waited_seconds": round(waited, 3),
            },
            session_id=OPERATIONS_SESSION,
        )
    return MoveResult(source, to, pause, waited, copy_seconds, checked)


def _unpause(tenant: Tenant, source: str) -> None:
    tenant_move_mark(tenant=tenant, moving=False, database=source)
    tenant_server_note(tenant.schema_name, source)
