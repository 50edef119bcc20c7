"""Graph reads of two checkouts side by side, in one run: their rounds interleaved.

Through the A/B harness (``_ab.py``): a worker per checkout (``--base`` and this one), the rounds'
order alternating, reading the same tenant that ``knowledge_graph.py`` loaded and projected
(``bench_kg``, 100k facts), the same roots in the same order. Each round reads
``--samples / --rounds`` random entities (and, on ``--hubs``, the highest-degree entities apart),
each with both backends (the order alternates) at depth 1 and 2, and times:

- ``neighbourhood``: ``backend.neighbourhood(root, depth)`` (one page, the default ``limit``);
- ``recall``: ``selectors.entity_recall`` as ``GET /api/v1/entities/{name}/facts?depth=N`` runs it
  (entity lookup, direct facts, the page, its names and edge facts);
- ``recall+json``: the same and its rendering to JSON bytes (``EntityRecallSerializer`` and DRF's
  ``JSONRenderer``), what the view does short of the HTTP layer.

Both checkouts read the same database: an index a migration of one adds is there for both (run the
plain ``knowledge_graph --steps read`` before migrating for figures without it). Needs the
services of ``knowledge_graph.py`` (``DATABASE_URL``, ``REDIS_URL``, ``NEO4J_URI``)::

    python -m benchmarks graph_ab --base ../graph-base [--samples 300] [--rounds 6]
"""

from __future__ import annotations

import time
from typing import Any

from _ab import arguments, compare, entry, serve
from _common import percentiles

KINDS = ("neighbourhood", "recall", "recall+json")


def _read(kind: str, backend: Any, pk: int, name: str, depth: int) -> float:
    """One timed read of ``kind`` around entity ``pk`` (``name``) at ``depth``, in ms."""
    from rest_framework.renderers import JSONRenderer

    from api.rest.knowledge import EntityRecallSerializer
    from memory.knowledge import selectors

    t0 = time.perf_counter()
    if kind == "neighbourhood":
        backend.neighbourhood(pk, depth)
    else:
        recall = selectors.entity_recall(name=name, reader=backend, depth=depth)
        if kind == "recall+json":
            JSONRenderer().render(EntityRecallSerializer(recall, context={"graph_next": None}).data)
    return (time.perf_counter() - t0) * 1000


def _roots(samples: int, hubs: int, seed: int) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``samples`` random entities (seeded) and the ``hubs`` highest-degree ones, as ``(pk, name)``."""
    import random
    from collections import Counter

    from django.db import connection

    from memory.knowledge.models import Entity

    entities = list(
        Entity.objects.exclude(name__startswith="Bench island").order_by("pk").values_list("pk", "name")
    )
    sample = random.Random(seed).sample(entities, samples)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT subject_id, object_entity_id FROM memory_fact "
            "WHERE status IN ('active', 'disputed') AND object_entity_id IS NOT NULL"
        )
        degree: Counter[int] = Counter()
        for s, o in cursor.fetchall():
            degree[s] += 1
            degree[o] += 1
    names = dict(entities)
    return sample, [(pk, names[pk]) for pk, _ in degree.most_common(hubs)]


def driver() -> None:
    """Parse the command line, run the rounds and print the percentiles per read."""
    parser = arguments(__doc__)
    parser.add_argument("--tenant", default="bench_kg")
    parser.add_argument("--samples", type=int, default=300, help="random entities")
    parser.add_argument("--hubs", type=int, default=10, help="highest-degree entities, apart (0: none)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    result = compare(
        script=__file__,
        base=args.base,
        rounds=args.rounds,
        warmup=0,
        request=lambda r: r,
        args=[args.tenant, str(args.samples), str(args.hubs), str(args.rounds), str(args.seed)],
    )
    times: dict[str, dict[str, list[float]]] = {}
    for name, answers in result.answers.items():
        for answer in answers:
            for key, values in answer.items():
                times.setdefault(name, {}).setdefault(key, []).extend(values)
    print(
        f"graph reads, tenant {args.tenant}: {args.samples} roots (+ {args.hubs} hubs apart) in "
        f"{args.rounds} interleaved rounds, load {result.load_range}"
    )
    print(f"{'read (ms)':<28}{'backend':<12}{'n':>5}  {'base p50/p95/p99':>24}  {'new p50/p95/p99':>24}")
    figures: dict[str, dict[str, Any]] = {}
    for key in times["new"]:
        label, backend = key.split("|")
        stats = {name: percentiles(times[name].get(key) or [float("nan")]) for name in ("base", "new")}
        figures[key] = stats
        cells = ["/".join(f"{stats[name][q]:.1f}" for q in ("p50", "p95", "p99")) for name in ("base", "new")]
        print(f"{label:<28}{backend:<12}{len(times['new'][key]):>5}  {cells[0]:>24}  {cells[1]:>24}")
    result.record(tenant=args.tenant, samples=args.samples, hubs=args.hubs, reads_ms=figures)


def worker(root: str, tenant_slug: str, *numbers: str) -> None:
    """One side: each request is a round number ``r``; the answer maps ``"<label>|<backend>"`` to
    the round's times (ms) of its share of the roots (every ``rounds``-th from ``r``). ``numbers``:
    samples, hubs, rounds and seed."""
    samples, hubs, rounds, seed = map(int, numbers)

    def setup(stack: Any) -> Any:
        import logging

        from django_tenants.utils import get_tenant_model, tenant_context

        from core.neo4j import get_driver
        from memory.knowledge.graph import Neo4jGraph, PostgresGraph

        logging.getLogger("neo4j").setLevel(logging.ERROR)
        tenant = get_tenant_model().objects.get(schema_name=tenant_slug)
        driver = get_driver()
        if driver is None:
            raise SystemExit("NEO4J_URI is not set")
        backends: dict[str, Any] = {
            "postgresql": PostgresGraph(),
            "neo4j": Neo4jGraph(driver, tenant.schema_name),
        }
        with tenant_context(tenant):
            sample, top = _roots(samples, hubs, seed)
            for pk, name in sample[:10]:  # warm caches and connections, not measured
                for backend in backends.values():
                    for kind in KINDS:
                        _read(kind, backend, pk, name, 2)

        def run(r: int) -> dict[str, list[float]]:
            out: dict[str, list[float]] = {}
            groups = [("", sample[r::rounds])]
            if top:
                groups.append(("hubs ", top[r::rounds]))
            order = list(backends) if r % 2 == 0 else list(backends)[::-1]
            with tenant_context(tenant):
                for prefix, roots in groups:
                    for pk, name in roots:
                        for backend_name in order:
                            for depth in (1, 2):
                                for kind in KINDS:
                                    times = out.setdefault(f"{prefix}{kind} d={depth}|{backend_name}", [])
                                    times.append(_read(kind, backends[backend_name], pk, name, depth))
            return out

        return run

    serve(root, setup, "memory.knowledge.selectors")


if __name__ == "__main__":
    entry(worker=worker, driver=driver)
