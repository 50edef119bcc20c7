"""The memory-context triggers on bulk writes: a bulk insert and a bulk erase of one session's memories
at several sizes, with the context functions of migration 0020 and of 0022, in one run.

Not a test: it prints figures. For each ``--sizes`` N and each function (the order alternates per
round), in one transaction that is rolled back, as the tables' owner (``maintenance()``): 2N
memories of one session (one agent, scope and audience; no vectors) are inserted by one statement
(its trigger builds 2N contexts), then every other one, N memories, is erased by
``memories_erase`` (one statement; its trigger rebuilds the N survivors' contexts). The times of both statements are printed with the load average: a function
whose cost grows with N^2 shows it as a ratio far above the sizes' ratio, whatever the load.

Needs ``DATABASE_URL`` and ``REDIS_URL`` as the other benchmarks::

    python -m benchmarks context_refresh [--sizes 500,2000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _common import bench_key, django_setup

TENANT = "bench_ctx"


INSERT = (
    "INSERT INTO memory_semanticmemory (id, agent_id, scope, memory_type, session_id, data_subject, tags, "
    "visible_to_agents, visible_to_roles, content, content_hash, metadata, importance, confidence, "
    "embedding_model, embedding_dimensions, created_at) "
    "SELECT gen_random_uuid(), %s, 'shared', 'fact', {session}, '', '{{}}', '{{}}', '{{}}', "
    "'turn ' || i || ' about word' || (i %% 97) || ' and topic' || (i %% 13), md5({session} || i), '{{}}', "
    "0.5, 1.0, 'none', 384, now() - make_interval(secs => %s - i) FROM generate_series(1, %s) i"
)
#: memories of other sessions in the tenant, analysed, so the statements are planned as in a real one
FILLER = 20_000


def _fill(n: int) -> None:
    """Give the current tenant ``n`` memories in 200 other sessions (once), their contexts left
    out (the insert trigger is off meanwhile), and fresh statistics."""
    from django.db import connection, transaction

    from agents.models import Agent
    from core.tenancy import maintenance

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_semanticmemory WHERE session_id LIKE 'filler-%%'")
        if cursor.fetchone()[0] >= n:
            return
    agent = Agent.objects.get(name="ctx-bench")
    # maintenance() before the transaction: with tenant logins the owner's work is a connection of
    # its own, and a transaction cannot span two
    with maintenance(), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("ALTER TABLE memory_semanticmemory DISABLE TRIGGER semantic_context_inserted")
        cursor.execute(INSERT.format(session="'filler-' || (i %% 200)"), [agent.pk, n, n])
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending checks at the ALTER
        cursor.execute("ALTER TABLE memory_semanticmemory ENABLE TRIGGER semantic_context_inserted")
    with maintenance(), connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_semanticmemory")
        cursor.execute("ANALYZE memory_memorycontext")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,2000", help="comma-separated N: memories erased")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    django_setup()
    from django.db import connection, transaction
    from django_tenants.utils import tenant_context

    from core.sqlrules import rule_text
    from core.tenancy import maintenance
    from memory.semantic.services.erase import memories_erase

    # the versions migration 0022 applies and reverses to (memory/sql and memory/sql/history)
    variants = {
        "0020": rule_text("memory", "memory_context_around", "14f7fa1e0bfe3f02")
        + rule_text("memory", "memory_context_refresh", "f755194d418e8463"),
        "0022": rule_text("memory", "memory_context_around", "df5919b172aabf3d")
        + rule_text("memory", "memory_context_refresh", "b8dac672f457282d"),
    }
    tenant, agents, _ = bench_key(TENANT, ["ctx-bench"])
    agent = agents["ctx-bench"]
    times: dict[tuple[str, int, str], list[float]] = {}
    with tenant_context(tenant):
        _fill(FILLER)
        for r in range(args.rounds):
            for n in sizes:
                for name in list(variants) if r % 2 == 0 else list(variants)[::-1]:
                    # one transaction, rolled back: the variant (the function's owner's to
                    # replace) and the statements timed with it, all as the owner (with tenant
                    # logins a transaction cannot switch back to the tenant's login)
                    with maintenance(), transaction.atomic():
                        with connection.cursor() as cursor:
                            cursor.execute(variants[name])
                        with connection.cursor() as cursor:
                            t0 = time.perf_counter()
                            cursor.execute(
                                INSERT.format(session="'bench-session'"),
                                [agent.pk, 2 * n, 2 * n],
                            )
                            inserted = time.perf_counter() - t0
                            cursor.execute(
                                "SELECT id FROM memory_semanticmemory WHERE session_id = 'bench-session' "
                                "ORDER BY created_at, id"
                            )
                            ids = [row[0] for row in cursor.fetchall()][::2]
                        t0 = time.perf_counter()
                        memories_erase(memory_ids=ids)
                        erased = time.perf_counter() - t0
                        times.setdefault((name, n, "insert"), []).append(inserted * 1000)
                        times.setdefault((name, n, "erase"), []).append(erased * 1000)
                        transaction.set_rollback(True)
                    print(
                        f"  round {r + 1}, N={n:,}, {name}: insert {inserted * 1000:,.0f} ms, "
                        f"erase {erased * 1000:,.0f} ms (load {os.getloadavg()[0]:.1f})",
                        flush=True,
                    )
    print(f"median ms over {args.rounds} rounds ({', '.join(f'{x:.1f}' for x in os.getloadavg())} load):")
    print(f"{'N':>7}  {'statement':<22}{'0020':>10}{'0022':>10}")
    for n in sizes:
        for what in ("insert", "erase"):
            cells = [statistics.median(times[(name, n, what)]) for name in variants]
            label = f"{what} ({2 * n if what == 'insert' else n:,} rows)"
            print(f"{n:>7}  {label:<22}{cells[0]:>10,.0f}{cells[1]:>10,.0f}")


if __name__ == "__main__":
    main()
