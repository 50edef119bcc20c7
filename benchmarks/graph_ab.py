"""Graph reads of two checkouts side by side, in one run: their rounds interleaved.

On a shared machine the load moves between two runs more than most changes do; here two worker
processes, one running this checkout's code and one another checkout's (``--base``, e.g. ``git
archive`` of main unpacked next to this one, using this checkout's ``.venv``), take turns round by
round (the order alternates), reading the same tenant that ``knowledge_graph.py`` loaded and
projected (``bench_kg``, 100k facts), the same roots in the same order. Each round reads
``--samples / --rounds`` random entities (and, on ``--hubs``, the highest-degree entities apart),
each with both backends (the order alternates) at depth 1 and 2, and times:

- ``neighbourhood``: ``backend.neighbourhood(root, depth)`` (one page, the default ``limit``);
- ``recall``: ``selectors.entity_recall`` as ``GET /api/v1/entities/{name}/facts?depth=N`` runs it
  (entity lookup, direct facts, the page, its names and edge facts);
- ``recall+json``: the same and its rendering to JSON bytes (``EntityRecallSerializer`` and DRF's
  ``JSONRenderer``), what the view does short of the HTTP layer.

Both checkouts read the same database: an index a migration of one adds is there for both (run the
plain ``knowledge_graph.py --steps read`` before migrating for figures without it). Needs the
services of ``knowledge_graph.py`` (``DATABASE_URL``, ``REDIS_URL``, ``NEO4J_URI``)::

    .venv/bin/python benchmarks/graph_ab.py --base ../graph-base [--samples 300] [--rounds 6]
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NEW = str(Path(__file__).resolve().parent.parent)
KINDS = ("neighbourhood", "recall", "recall+json")


def worker(root: str, tenant_slug: str, samples: int, hubs: int, rounds: int, seed: int) -> None:
    sys.path.insert(0, root)
    sys.path.insert(0, f"{root}/benchmarks")
    os.chdir(root)
    from _common import django_setup

    django_setup()
    import logging
    import random
    from collections import Counter

    logging.getLogger("neo4j").setLevel(logging.ERROR)
    from django.db import connection
    from django_tenants.utils import get_tenant_model, tenant_context
    from rest_framework.renderers import JSONRenderer

    from api.rest.knowledge import EntityRecallSerializer
    from core.neo4j import get_driver
    from memory.knowledge import selectors
    from memory.knowledge.graph import Neo4jGraph, PostgresGraph
    from memory.knowledge.models import Entity

    tenant = get_tenant_model().objects.get(schema_name=tenant_slug)
    driver = get_driver()
    if driver is None:
        raise SystemExit("NEO4J_URI is not set")
    with tenant_context(tenant):
        backends: dict[str, Any] = {
            "postgresql": PostgresGraph(),
            "neo4j": Neo4jGraph(driver, tenant.schema_name),
        }
        entities = list(
            Entity.objects.exclude(name__startswith="Bench island").order_by("pk").values_list("pk", "name")
        )
        rng = random.Random(seed)
        sample = rng.sample(entities, samples)
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
        top = [(pk, names[pk]) for pk, _ in degree.most_common(hubs)]

        def read(kind: str, backend: Any, pk: int, name: str, depth: int) -> float:
            t0 = time.perf_counter()
            if kind == "neighbourhood":
                backend.neighbourhood(pk, depth)
            else:
                recall = selectors.entity_recall(name=name, reader=backend, depth=depth)
                if kind == "recall+json":
                    JSONRenderer().render(EntityRecallSerializer(recall, context={"graph_next": None}).data)
            return (time.perf_counter() - t0) * 1000

        for pk, name in rng.sample(entities, 10):  # warm caches and connections, not measured
            for backend in backends.values():
                for kind in KINDS:
                    read(kind, backend, pk, name, 2)
        print("ready", flush=True)
        for line in sys.stdin:
            r = int(line)
            out: dict[str, list[float]] = {}
            groups = [("", sample[r::rounds])]
            if top:
                groups.append(("hubs ", top[r::rounds]))
            names_order = list(backends) if r % 2 == 0 else list(backends)[::-1]
            for prefix, roots in groups:
                for pk, name in roots:
                    for backend_name in names_order:
                        for depth in (1, 2):
                            for kind in KINDS:
                                key = f"{prefix}{kind} d={depth}|{backend_name}"
                                out.setdefault(key, []).append(
                                    read(kind, backends[backend_name], pk, name, depth)
                                )
            print(json.dumps({"times": out, "load": os.getloadavg()[0]}), flush=True)


def driver(base: str, tenant: str, samples: int, hubs: int, rounds: int, seed: int) -> None:
    procs: dict[str, Any] = {}
    for name, root in (("base", str(Path(base).resolve())), ("new", NEW)):
        procs[name] = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                root,
                tenant,
                str(samples),
                str(hubs),
                str(rounds),
                str(seed),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        while True:
            line = procs[name].stdout.readline()
            if not line or line.strip() == "ready":
                break
    times: dict[str, dict[str, list[float]]] = {"base": {}, "new": {}}
    loads = []
    for r in range(rounds):
        for name in ["base", "new"] if r % 2 == 0 else ["new", "base"]:
            p = procs[name]
            p.stdin.write(f"{r}\n")
            p.stdin.flush()
            got = json.loads(p.stdout.readline())
            loads.append(got["load"])
            for key, values in got["times"].items():
                times[name].setdefault(key, []).extend(values)
    for p in procs.values():
        p.stdin.close()
        p.wait(60)
    import numpy as np

    print(
        f"graph reads, tenant {tenant}: {samples} roots (+ {hubs} hubs apart) in {rounds} interleaved rounds, "
        f"load {min(loads):.1f}-{max(loads):.1f}"
    )
    print(f"{'read (ms)':<28}{'backend':<12}{'n':>5}  {'base p50/p95/p99':>24}  {'new p50/p95/p99':>24}")
    for key in times["new"]:
        label, backend = key.split("|")
        cells = []
        for name in ("base", "new"):
            v = np.asarray(times[name].get(key, [float("nan")]))
            cells.append("/".join(f"{np.percentile(v, q):.1f}" for q in (50, 95, 99)))
        print(f"{label:<28}{backend:<12}{len(times['new'][key]):>5}  {cells[0]:>24}  {cells[1]:>24}")


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        root, tenant, samples, hubs, rounds, seed = sys.argv[2:8]
        worker(root, tenant, int(samples), int(hubs), int(rounds), int(seed))
        return
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other checkout (its code, this .venv)")
    parser.add_argument("--tenant", default="bench_kg")
    parser.add_argument("--samples", type=int, default=300, help="random entities")
    parser.add_argument("--hubs", type=int, default=10, help="highest-degree entities, apart (0: none)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    driver(args.base, args.tenant, args.samples, args.hubs, args.rounds, args.seed)


if __name__ == "__main__":
    main()
