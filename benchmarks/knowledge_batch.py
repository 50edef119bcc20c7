"""Facts asserted in batches, and bounded graph reads, at 100k facts, before and after in one run.

Not a test: it prints figures. Steps:

1. **Load** the tenant ``bench_kgb`` (skipped once loaded) with the synthetic graph of
   ``knowledge_graph.py`` (``--facts``, default 100,000: hub-heavy degrees, ~3% conflicts, ~1%
   repeats, four agents) through ``facts_assert_batch`` in batches of ``--batch`` (500), timed.
2. **Assert throughput, interleaved**: ``--rounds`` (default 6) rounds, each asserting ``--batch``
   new facts of a second plan (same shape, other names and some shared ones) through
   ``facts_assert_batch`` (one transaction) and ``--batch`` more through ``fact_assert`` one
   transaction each (what ``POST /api/v1/facts`` arrays ran before), alternating which goes first.
3. **Project** the outbox into Neo4j (``outbox_drain``, the Celery task's body).
4. **Recall at depth 2**, ``--samples`` (default 200) random entities with live entity-to-entity
   facts, each read four ways in turn: ``selectors.entity_recall`` (what ``GET
   /api/v1/entities/{name}/facts?depth=2`` reads, JSON aside) with the bounded page (``limit``
   100) of ``PostgresGraph`` and of ``Neo4jGraph``, and with the unbounded neighbourhood that
   ``memory/knowledge/graph.py`` computed before pages (its queries are copied below).

Every figure is printed with the load average (``uptime``): on a shared two-core machine other work
moves absolute times, the ratios of one run much less.

Needs PostgreSQL, Redis and Neo4j (``DATABASE_URL``, ``REDIS_URL``, ``NEO4J_URI``)::

    ENGRAM_NEO4J=1 ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks knowledge_batch [--facts 100000] [--rounds 6] [--samples 200]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any

from _common import bench_key, django_setup, percentiles
from knowledge_graph import AGENTS, make_plan, set_cardinalities

TENANT = "bench_kgb"
_LIVE = "('active', 'disputed')"


def uptime() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def load(tenant: Any, agents: list[Any], items: list[tuple[int, Any]], batch: int) -> None:
    from django.db import connection
    from django_tenants.utils import tenant_context

    from core.tenancy import maintenance
    from memory.knowledge.models import FactProvenance
    from memory.knowledge.services import facts_assert_batch

    with tenant_context(tenant):
        have = FactProvenance.objects.count()
        if have >= len(items):
            print(f"  {tenant.schema_name} holds {have:,} asserts: not reloading", flush=True)
            return
        if have:
            raise SystemExit(f"{tenant.schema_name} is half loaded ({have:,}): drop it or use --tenant")
        set_cardinalities()
        t0 = time.perf_counter()
        for start in range(0, len(items), batch):
            chunk = items[start : start + batch]
            # one agent per batch (a batch is one caller's request)
            facts_assert_batch(agent=agents[chunk[0][0]], facts=[data for _, data in chunk])
            if (start // batch) % 40 == 39:
                done = start + len(chunk)
                print(
                    f"    {done:,} ({done / (time.perf_counter() - t0):,.0f} facts/s; {uptime()})", flush=True
                )
        wall = time.perf_counter() - t0
        print(f"  loaded {len(items):,} facts in {wall:,.1f} s = {len(items) / wall:,.0f} facts/s "
              f"(batches of {batch}; {uptime()})", flush=True)  # fmt: skip
        with maintenance(), connection.cursor() as cursor:  # ANALYZE is the tables' owner's
            for table in ("memory_entity", "memory_fact", "memory_factprovenance", "memory_graphoutbox",
                          "memory_contradiction", "memory_predicate"):  # fmt: skip
                cursor.execute(f"ANALYZE {table}")


def throughput(tenant: Any, agents: list[Any], items: list[tuple[int, Any]], batch: int, rounds: int) -> None:
    from django.db import transaction
    from django_tenants.utils import tenant_context

    from memory.knowledge.services import fact_assert, facts_assert_batch

    rates: dict[str, list[float]] = {"facts_assert_batch": [], "fact_assert, one transaction each": []}
    with tenant_context(tenant):
        for r in range(rounds):
            first, second = (
                items[2 * r * batch : (2 * r + 1) * batch],
                items[(2 * r + 1) * batch : (2 * r + 2) * batch],
            )
            runs = [("facts_assert_batch", first), ("fact_assert, one transaction each", second)]
            for name, chunk in runs if r % 2 == 0 else runs[::-1]:
                agent = agents[chunk[0][0]]
                t0 = time.perf_counter()
                if name == "facts_assert_batch":
                    facts_assert_batch(agent=agent, facts=[d for _, d in chunk])
                else:
                    for _, data in chunk:
                        with transaction.atomic():
                            fact_assert(agent=agent, data=data)
                rates[name].append(len(chunk) / (time.perf_counter() - t0))
    print(f"\nFacts asserted, {rounds} interleaved rounds of {batch} ({uptime()})")
    for name, values in rates.items():
        values.sort()
        print(
            f"  {name:<36} median {values[len(values) // 2]:>7,.0f} facts/s  (min {values[0]:,.0f}, max {values[-1]:,.0f})"
        )
    batch_rate = sorted(rates["facts_assert_batch"])[rounds // 2]
    loop_rate = sorted(rates["fact_assert, one transaction each"])[rounds // 2]
    print(f"  ratio                                {batch_rate / loop_rate:,.1f}x")


class Unbounded:
    """The neighbourhood as ``graph.py`` computed it before pages (every entity within ``depth``),
    for the comparison; ``neighbourhood`` has the paged signature and ignores the page."""

    def __init__(self, backend: str, driver: Any = None, tenant: str = "") -> None:
        self.name, self.driver, self.tenant = backend, driver, tenant

    def neighbourhood(self, root: int, depth: int, limit: int = 100, after: int | None = None) -> Any:
        from memory.knowledge.graph import Neighbourhood, _edges_within

        distances, edges = self._pg(root, depth) if self.name == "postgresql" else self._neo4j(root, depth)
        return Neighbourhood(root, depth, distances, _edges_within(distances, depth, edges), limit=10**9)

    def _pg(self, root: int, depth: int) -> tuple[dict[int, int], list[tuple[int, int, int]]]:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                WITH RECURSIVE walk(node, depth) AS (
                    SELECT %s::bigint, 0
                    UNION
                    SELECT nb.node, w.depth + 1
                    FROM walk w CROSS JOIN LATERAL (
                        SELECT f.object_entity_id AS node FROM memory_fact f
                        WHERE f.subject_id = w.node AND f.object_entity_id IS NOT NULL AND f.status IN {_LIVE}
                        UNION ALL
                        SELECT f.subject_id FROM memory_fact f
                        WHERE f.object_entity_id = w.node AND f.status IN {_LIVE}
                    ) nb
                    WHERE w.depth < %s
                )
                SELECT node, min(depth) FROM walk GROUP BY node
                """,
                [root, depth],
            )
            distances = {int(n): int(d) for n, d in cursor.fetchall()}
            inner = [n for n, d in distances.items() if d < depth]
            cursor.execute(
                f"SELECT id, subject_id, object_entity_id FROM memory_fact WHERE status IN {_LIVE} "
                "AND object_entity_id IS NOT NULL AND (subject_id = ANY(%s) OR object_entity_id = ANY(%s))",
                [inner, inner],
            )
            return distances, [(int(f), int(a), int(b)) for f, a, b in cursor.fetchall()]

    def _neo4j(self, root: int, depth: int) -> tuple[dict[int, int], list[tuple[int, int, int]]]:
        rows, _, _ = self.driver.execute_query(
            f"""
            MATCH (root:Entity {{tenant: $tenant, id: $root}})
            MATCH p = (root)-[:FACT*0..{depth}]-(n:Entity)
            WHERE n.tenant = $tenant AND all(r IN relationships(p) WHERE r.tenant = $tenant)
            WITH n.id AS id, min(length(p)) AS hops
            RETURN collect([id, hops]) AS found
            """,
            tenant=self.tenant,
            root=root,
        )
        distances = {int(n): int(h) for n, h in rows[0]["found"]} or {root: 0}
        edges, _, _ = self.driver.execute_query(
            """
            MATCH (a:Entity {tenant: $tenant})-[r:FACT {tenant: $tenant}]-(b:Entity {tenant: $tenant})
            WHERE a.id IN $inner
            RETURN collect([r.fact_id, a.id, b.id]) AS edges
            """,
            tenant=self.tenant,
            inner=[n for n, h in distances.items() if h < depth],
        )
        return distances, [(int(f), int(a), int(b)) for f, a, b in edges[0]["edges"]]


def reads(tenant: Any, samples: int, seed: int) -> None:
    from django.db import connection
    from django_tenants.utils import tenant_context

    from core.neo4j import get_driver
    from memory.knowledge import selectors
    from memory.knowledge.graph import Neo4jGraph, PostgresGraph
    from memory.knowledge.models import GraphOutbox
    from memory.knowledge.projection import outbox_drain

    driver = get_driver()
    if driver is None:
        raise SystemExit("NEO4J_URI is not set: start the services with ENGRAM_NEO4J=1")
    with tenant_context(tenant):
        pending = GraphOutbox.objects.filter(processed_at__isnull=True).count()
        if pending:
            t0 = time.perf_counter()
            while outbox_drain():
                pass
            print(
                f"\n  projected {pending:,} outbox rows into Neo4j in {time.perf_counter() - t0:,.1f} s ({uptime()})"
            )
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT DISTINCT e.name FROM memory_entity e JOIN memory_fact f ON f.subject_id = e.id "
                f"WHERE f.object_entity_id IS NOT NULL AND f.status IN {_LIVE} ORDER BY e.name"
            )
            names = [n for (n,) in cursor.fetchall()]
        sample = random.Random(seed).sample(names, min(samples, len(names)))
        schema = tenant.schema_name
        ways: dict[str, Any] = {
            "postgresql, page (limit 100)": PostgresGraph(),
            "postgresql, unbounded (before)": Unbounded("postgresql"),
            "neo4j, page (limit 100)": Neo4jGraph(driver, schema),
            "neo4j, unbounded (before)": Unbounded("neo4j", driver, schema),
        }
        times: dict[str, list[float]] = {k: [] for k in ways}
        sizes: dict[str, list[int]] = {k: [] for k in ways}
        order = list(ways)
        for i, name in enumerate(sample):
            for way in order[i % 4 :] + order[: i % 4]:  # rotate who goes first
                t0 = time.perf_counter()
                recall = selectors.entity_recall(name=name, reader=ways[way], depth=2)
                times[way].append((time.perf_counter() - t0) * 1000)
                assert recall.graph is not None
                sizes[way].append(len(recall.graph.entities))
    print(f"\nEntity recall at depth 2, {len(sample)} random entities, interleaved ({uptime()})")
    print(f"  {'reader':<34}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}   entities p50 / max")
    for way in order:
        st = percentiles(times[way])
        ent = sorted(sizes[way])
        print(f"  {way:<34}{st['p50']:>9.1f}{st['p95']:>9.1f}{st['p99']:>9.1f}{st['max']:>9.1f}   "
              f"{ent[len(ent) // 2]:,} / {ent[-1]:,}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--tenant", default=TENANT)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--steps", default="load,assert,read", help="comma-separated subset of load,assert,read"
    )
    args = parser.parse_args()
    steps = set(args.steps.split(","))
    django_setup()
    import logging

    logging.getLogger("neo4j").setLevel(logging.ERROR)
    print(f"Knowledge batches and bounded reads: {args.facts:,} facts, tenant {args.tenant} ({uptime()})")
    tenant, agent_map, _ = bench_key(args.tenant, AGENTS)
    agents = [agent_map[name] for name in AGENTS]
    if "load" in steps:
        load(tenant, agents, make_plan(args.facts, args.seed).items, args.batch)
    if "assert" in steps:
        extra = make_plan(max(2 * args.rounds * args.batch, 1_000), args.seed + 1).items
        throughput(tenant, agents, extra, args.batch, args.rounds)
    if "read" in steps:
        reads(tenant, args.samples, args.seed)
    from config.celery import app as celery_app

    celery_app.control.purge()  # the on-commit tasks no worker consumed (the benchmark's own Redis)


if __name__ == "__main__":
    main()
