"""What running each unit of work as its tenant's role costs: per statement, and per request.

The backend (``core/db/base.py``) sends ``SET ROLE <tenant role>; SET search_path = <tenant>, public``
before the first query of every cursor, in one round trip, where django-tenants alone sends
``SET search_path = <tenant>, public``. In one process, on one connection, in alternating blocks
(roles on, off, on, off...; the wrapper's ``tenant_roles`` switch, as ``ENGRAM_TENANT_ROLES=0``
would set it), this script measures:

- the bare round trip of each form of the ``SET`` (``--statements`` of each, Django's cursor
  wrapper, no query after it);
- a small ORM read in the tenant (``ApiKey.objects.filter(key_id=...).first()``, the first query of
  every API request), which pays one ``SET`` per query, and the query runs as a role that is not a
  superuser (privilege checks);
- a read in the public schema then one in the tenant, as every request does (the domain or key
  lookup as the maintenance role, then the tenant's work): the role changes at each cursor;
- the ``SET`` statements one request makes: ``GET /api/v1/me``, ``POST /api/v1/memories/search``
  (k=10, over a handful of memories) and ``GET /api/v1/sessions/{id}/checkpoints/latest`` with the
  Redis copy gone (served from PostgreSQL), through Django's test client in this process, so the
  per-request overhead is about (added cost per ORM read) x (``SET`` per request).

Then what tenant logins cost (``ENGRAM["TENANT_LOGINS"]``, docs/decisions/0001-tenant-logins.md:
a tenant's unit runs on a connection authenticated as the tenant's login instead of ``SET ROLE``
on the shared login's), the modes alternating block by block as above (the sections before run in
the ``SET ROLE`` mode):

- a unit of work as a request runs it: borrow a connection, one ORM read in the tenant, give it
  back (the pool's, ``DATABASE_POOL``: the shared login's pool, or the tenant login's);
- a read in the public schema then one in the tenant in one unit (an admin request: the domain
  lookup, then the tenant's work): with logins, a give-back and a borrow in between;
- a new connection (what each switch costs without the pool): the shared login (``trust`` on the
  embedded server) against a tenant's login (SCRAM), raw psycopg;
- through HTTP, two uvicorn servers (one worker each) on the same database side by side, logins on
  and off, taking turns request by request over ``--tenants`` tenants (``GET /api/v1/me``, ``POST
  /api/v1/memories/search`` over an empty tenant); then the connections each tenant's login holds.

End to end, run ``search_latency.py`` and ``checkpoint_restore.py`` twice on the same services, with
``ENGRAM_TENANT_ROLES=0`` (search path only, as before issue 12) and without (see README,
Operations). Needs PostgreSQL and Redis (``DATABASE_URL``, ``REDIS_URL``) and the embedding model;
the roles-off blocks read as the login itself, so the login must be the superuser (the bench
profile's, without ``ENGRAM_PG_APP_USER``)::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks tenant_roles [--statements 20000] [--blocks 10] [--requests 1000] [--tenants 4]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

from _common import bench_key, django_setup, percentiles, scratch_tenant, web_server

TENANT = "bench_roles"
AGENT = "bench-roles"


def switch(enabled: bool) -> None:
    """Turn the role switch of this thread's connection on or off (off: back to the login role)."""
    from django.db import connection

    connection.tenant_roles = enabled  # type: ignore[attr-defined]
    connection.search_path_set_schemas = None  # type: ignore[attr-defined]
    if not enabled:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")


def logins(enabled: bool) -> None:
    """Turn tenant logins of this thread's connection on or off (off: the ``SET ROLE`` mode); the
    next statement takes a connection of the login its unit needs."""
    from django.db import connection

    connection.close()
    connection.tenant_logins = enabled  # type: ignore[attr-defined]
    connection.login = None  # type: ignore[attr-defined]
    connection.search_path_set_schemas = None  # type: ignore[attr-defined]


def alternate(
    blocks: int, per_block: int, call: Callable[[], object], mode: Callable[[bool], None] = switch
) -> dict[bool, list[float]]:
    """Time ``call`` ``per_block`` times per block, ``blocks`` blocks of each mode (``mode(True)``:
    on), alternating; returns the latencies (ms) by mode (True: on)."""
    out: dict[bool, list[float]] = {True: [], False: []}
    for block in range(2 * blocks):
        enabled = block % 2 == 0
        mode(enabled)
        for _ in range(per_block // 10):  # warm the mode's path
            call()
        for _ in range(per_block):
            t0 = time.perf_counter()
            call()
            out[enabled].append((time.perf_counter() - t0) * 1000)
    mode(True)
    return out


def sets_per_request(client: Any, method: str, path: str, body: dict[str, Any] | None = None) -> int:
    """How many ``SET`` statements the backend sent for one request through the test client."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        response = (
            getattr(client, method)(path, body, format="json") if body else getattr(client, method)(path)
        )
    assert response.status_code < 300, (path, response.status_code, response.content[:300])
    return sum(
        1 for q in ctx.captured_queries if q["sql"].startswith(("SET ROLE", "RESET ROLE", "SET search_path"))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=20_000, help="timed SETs per mode")
    parser.add_argument("--blocks", type=int, default=10, help="alternating blocks per mode")
    parser.add_argument("--requests", type=int, default=1000, help="HTTP requests per mode and path")
    parser.add_argument("--tenants", type=int, default=4, help="tenants the HTTP requests go to")
    args = parser.parse_args()
    django_setup()
    from django.db import connection

    logins(False)  # the sections before the logins' measure the SET ROLE mode
    from django_tenants.utils import get_public_schema_name, schema_context, tenant_context
    from rest_framework.test import APIClient

    from agents.models import ApiKey
    from core.redis import get_redis
    from core.tenancy import quote_ident, tenant_role
    from memory.checkpoints.services import cache_key, checkpoint_save
    from memory.semantic.models import SemanticMemory
    from memory.semantic.services.writes import MemoryData, memory_create
    from tenants.models import Domain

    tenant, agents, keys = bench_key(TENANT, [AGENT])
    agent, key = agents[AGENT], keys[AGENT]
    key_id = key.split(".")[2]
    schema = tenant.schema_name
    per_block = max(1, args.statements // args.blocks)
    results: dict[str, dict[bool, list[float]]] = {}
    with tenant_context(tenant):
        role = quote_ident(tenant_role(schema))
        paths = f'"{schema}","public"'

        def bare(sql: str) -> Callable[[], None]:
            def run() -> None:
                with connection.cursor() as cursor:
                    cursor.execute(sql)

            return run

        with connection.cursor():  # connect, and leave the backend's own SET behind
            pass
        connection.tenant_roles = False  # type: ignore[attr-defined]  # the SETs below are the script's
        results["SET search_path (before)"] = {False: [], True: []}
        results["SET ROLE; SET search_path (after)"] = {False: [], True: []}
        for _ in range(args.blocks):
            for label, sql, mode in (
                ("SET search_path (before)", f"SET search_path = {paths}", False),
                ("SET ROLE; SET search_path (after)", f"SET ROLE {role}; SET search_path = {paths}", True),
            ):
                run = bare(sql)
                for _ in range(per_block // 10):
                    run()
                for _ in range(per_block):
                    t0 = time.perf_counter()
                    run()
                    results[label][mode].append((time.perf_counter() - t0) * 1000)
        switch(True)

        results["ORM read in the tenant"] = alternate(
            args.blocks, per_block, lambda: ApiKey.objects.filter(key_id=key_id).first()
        )

        def public_then_tenant() -> None:
            with schema_context(get_public_schema_name()):
                Domain.objects.filter(domain="bench.invalid").first()
            ApiKey.objects.filter(key_id=key_id).first()

        results["read in public, then in the tenant"] = alternate(
            args.blocks, per_block // 2, public_then_tenant
        )
        if not SemanticMemory.objects.filter(agent=agent).exists():
            for text in ("Alice lives in Lisbon", "Bob prefers tea", "The report is due in March"):
                memory_create(
                    agent=agent,
                    data=MemoryData(content=text, scope="shared"),
                    policy=tenant.retrieval_policy,
                )
        checkpoint_save(
            agent=agent,
            session_id="bench-roles",
            step_index=int(time.time()),
            idempotency_key=f"k{time.time_ns()}",
            state={"step": 1},
            plan=[],
            schema_version=1,
            policy=tenant.working_memory_policy,
        )
        redis_key = cache_key("bench-roles", agent.pk)
    connection.set_schema_to_public()  # type: ignore[attr-defined]

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    counts = {
        "GET /api/v1/me": sets_per_request(client, "get", "/api/v1/me"),
        "POST /api/v1/memories/search": sets_per_request(
            client, "post", "/api/v1/memories/search", {"query": "Where does Alice live?", "k": 10}
        ),
    }
    get_redis().delete(redis_key)
    counts["GET .../checkpoints/latest (from PostgreSQL)"] = sets_per_request(
        client, "get", "/api/v1/sessions/bench-roles/checkpoints/latest"
    )

    login_results = measure_logins(tenant, key_id, args.blocks, per_block)
    http, held = measure_http(args.requests, args.tenants)

    n = per_block * args.blocks
    print(
        f"\nTenant roles: cost per statement, {n:,} timed per mode in {args.blocks} alternating blocks (ms)"
    )
    print(f"{'what':<38}{'mode':>6}{'p50':>9}{'p95':>9}{'p99':>9}{'mean':>9}")
    for what, by_mode in results.items():
        for mode in (False, True):
            if not by_mode[mode]:
                continue
            stats = percentiles(by_mode[mode])
            label = "on" if mode else "off"
            print(
                f"{what:<38}{label:>6}{stats['p50']:>9.4f}{stats['p95']:>9.4f}"
                f"{stats['p99']:>9.4f}{stats['mean']:>9.4f}"
            )

    def added(what: str) -> float:
        """p50 on minus p50 off, in µs."""
        return 1000 * (percentiles(results[what][True])["p50"] - percentiles(results[what][False])["p50"])

    bare_set = 1000 * (
        percentiles(results["SET ROLE; SET search_path (after)"][True])["p50"]
        - percentiles(results["SET search_path (before)"][False])["p50"]
    )
    read, pair = added("ORM read in the tenant"), added("read in public, then in the tenant")
    print(
        f"\nadded (p50): {bare_set:.1f} µs per bare SET, {read:.1f} µs per ORM read, {pair:.1f} µs per public+tenant pair"
    )
    print("SET statements per request, and the estimated overhead (added per ORM read x SETs):")
    for path, count in counts.items():
        print(f"  {path:<46}{count:>3}  ~{count * read:,.0f} µs")
    print(f"\nTenant logins against the SET ROLE mode (ms; in process: {n:,} per mode, alternating blocks)")
    print(f"{'what':<52}{'mode':>8}{'p50':>9}{'p95':>9}{'p99':>9}{'mean':>9}")
    for what, by_mode in {**login_results, **http}.items():
        for mode, label in ((False, "SET ROLE"), (True, "logins")):
            stats = percentiles(by_mode[mode])
            print(
                f"{what:<52}{label:>8}{stats['p50']:>9.3f}{stats['p95']:>9.3f}"
                f"{stats['p99']:>9.3f}{stats['mean']:>9.3f}"
            )
    print(f"connections each tenant login held after the HTTP run (one server process): {held}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the end: {load} on {os.cpu_count()} CPUs")


def measure_logins(
    tenant: Any, key_id: str, blocks: int, per_block: int
) -> dict[str, dict[bool, list[float]]]:
    """In this process, logins on and off in alternating blocks: a unit of work in the tenant (one
    ORM read between a borrow and a give-back), a public read then a tenant read in one unit, and a
    new connection of each kind of login. Returns the latencies (ms) by what and mode (True: logins)."""
    import psycopg
    from django.db import connection
    from django_tenants.utils import get_public_schema_name, schema_context, tenant_context

    from agents.models import ApiKey
    from core.tenancy import tenant_password, tenant_role
    from tenants.models import Domain

    def unit() -> None:
        with tenant_context(tenant):
            ApiKey.objects.filter(key_id=key_id).first()
        connection.close()  # the unit ends: its connection goes back to its pool

    def public_then_tenant() -> None:
        with schema_context(get_public_schema_name()):
            Domain.objects.filter(domain="bench.invalid").first()
        unit()

    out = {
        "unit: borrow, ORM read in the tenant, give back": alternate(blocks, per_block, unit, logins),
        "unit: read in public, then in the tenant": alternate(
            blocks, per_block // 2, public_then_tenant, logins
        ),
    }
    logins(False)
    params = connection.get_connection_params()
    params = {name: params[name] for name in ("dbname", "host", "port", "user") if params.get(name)}
    role = tenant_role(tenant.schema_name)
    as_tenant = {**params, "user": role, "password": tenant_password(role)}
    connects: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(max(1, blocks)):
        for mode, kwargs in ((False, params), (True, as_tenant)):
            for _ in range(20):
                t0 = time.perf_counter()
                psycopg.connect(**kwargs).close()
                connects[mode].append((time.perf_counter() - t0) * 1000)
    out["new connection (no pool), shared vs tenant login"] = connects
    return out


def measure_http(requests: int, tenants: int) -> tuple[dict[str, dict[bool, list[float]]], dict[str, int]]:
    """Two uvicorn servers (one worker each), tenant logins on and off, on the same database,
    taking turns request by request (which goes first alternates) over ``tenants`` scratch tenants.
    Returns the latencies (ms) by path and mode (True: logins), and the connections each tenant's
    login holds at the end (``pg_stat_activity``)."""
    import httpx
    from django.db import connection

    from core.tenancy import tenant_role

    connection.set_schema_to_public()  # type: ignore[attr-defined]  # the in-process requests left a tenant's
    out: dict[str, dict[bool, list[float]]] = {}
    with contextlib.ExitStack() as stack:
        made = [stack.enter_context(scratch_tenant("bench_logins", [AGENT])) for _ in range(tenants)]
        keys = [keys[AGENT] for _, _, keys in made]
        servers = {
            mode: stack.enter_context(
                web_server("uvicorn", workers=1, env={"ENGRAM_TENANT_LOGINS": "1" if mode else "0"})
            )
            for mode in (True, False)
        }
        clients = {
            mode: stack.enter_context(httpx.Client(base_url=servers[mode].url, timeout=30))
            for mode in servers
        }
        paths = {
            "HTTP GET /api/v1/me": ("GET", "/api/v1/me", None, requests),
            "HTTP POST /api/v1/memories/search (k=10)": (
                "POST",
                "/api/v1/memories/search",
                {"query": "Where does Alice live?", "k": 10},
                max(1, requests // 5),
            ),
        }
        for label, (method, path, body, count) in paths.items():
            times: dict[bool, list[float]] = {True: [], False: []}
            for i in range(-2 * tenants, count):  # the first round of each tenant warms both servers
                headers = {"Authorization": f"Bearer {keys[i % tenants]}"}
                for mode in (True, False) if i % 2 else (False, True):
                    t0 = time.perf_counter()
                    response = clients[mode].request(method, path, json=body, headers=headers)
                    took = (time.perf_counter() - t0) * 1000
                    assert response.status_code == 200, (
                        mode,
                        path,
                        response.status_code,
                        response.text[:300],
                    )
                    if i >= 0:
                        times[mode].append(took)
            out[label] = times
        roles = [tenant_role(tenant.schema_name) for tenant, _, _ in made]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT usename, count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND usename = ANY(%s) GROUP BY usename",
                [roles],
            )
            counts = dict(cursor.fetchall())
        held = {role.rsplit("_t_", 1)[-1]: int(counts.get(role, 0)) for role in roles}
    return out, held


if __name__ == "__main__":
    main()
