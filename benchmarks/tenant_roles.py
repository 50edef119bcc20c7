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

End to end, run ``search_latency.py`` and ``checkpoint_restore.py`` twice on the same services, with
``ENGRAM_TENANT_ROLES=0`` (search path only, as before issue 12) and without (see README,
Operations). Needs PostgreSQL and Redis (``DATABASE_URL``, ``REDIS_URL``) and the embedding model::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    .venv/bin/python benchmarks/tenant_roles.py [--statements 20000] [--blocks 10]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from _common import bench_key, django_setup, percentiles

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


def alternate(blocks: int, per_block: int, call: Callable[[], object]) -> dict[bool, list[float]]:
    """Time ``call`` ``per_block`` times per block, ``blocks`` blocks of each mode, alternating;
    returns the latencies (ms) by mode (True: roles on)."""
    out: dict[bool, list[float]] = {True: [], False: []}
    for block in range(2 * blocks):
        enabled = block % 2 == 0
        switch(enabled)
        for _ in range(per_block // 10):  # warm the mode's path
            call()
        for _ in range(per_block):
            t0 = time.perf_counter()
            call()
            out[enabled].append((time.perf_counter() - t0) * 1000)
    switch(True)
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
    args = parser.parse_args()
    django_setup()
    from django.db import connection
    from django_tenants.utils import get_public_schema_name, schema_context, tenant_context
    from rest_framework.test import APIClient

    from agents.models import ApiKey
    from core.redis import get_redis
    from core.tenancy import quote_ident, tenant_role
    from memory.checkpoints.services import cache_key, checkpoint_save
    from memory.semantic.models import SemanticMemory
    from memory.semantic.services import MemoryData, memory_create
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
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the end: {load} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
