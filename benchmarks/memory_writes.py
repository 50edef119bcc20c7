"""Semantic memory write throughput: batches of 500 and single writes, the service and over HTTP.

Every figure is taken in a fresh tenant (``bench_mwrites_<random>``, one agent, dropped at the end),
so runs of two checkouts start from the same table sizes; each line prints the load average. Steps:

1. **The embedder alone**: ms per text at batch 1 and in one call of ``--batch`` texts (what a
   batch write asks of it): the ceiling of any write path that embeds.
2. **Batches** through ``memories_create`` (what ``POST /api/v1/memories`` with an array runs; dedup
   on): ``--batches`` batches of ``--batch`` new texts embedded by the service, then as many with
   client-supplied vectors (the embedder's time excluded: the write path alone).
3. **Single writes** through ``memory_create`` (dedup on), ``--singles`` of them, each embedded.
4. **Over HTTP** (``--http``): the same batches as arrays to ``POST /api/v1/memories`` from one
   keep-alive client against a real server (uvicorn ``config.asgi``, 2 workers, DEBUG off), with
   client-supplied vectors and embedded by the service.

``ENGRAM_EMBEDDER=model2vec ENGRAM_EMBEDDING_MODEL_PATH=../shared/models/minilm-static-256`` runs
the same steps with the static model (256-d). Needs PostgreSQL (pgvector) and Redis::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks memory_writes [--batches 4] [--batch 500] [--singles 200] [--http]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import corpus
import httpx
from _common import django_setup, scratch_tenant, web_server


def load() -> str:
    return "load " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--singles", type=int, default=200)
    parser.add_argument("--http", action="store_true", help="also POST the batches to a real server")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    django_setup()
    from django_tenants.utils import tenant_context

    from memory.embeddings import get_embedder
    from memory.semantic.services.writes import MemoryData, memories_create, memory_create

    embedder = get_embedder()
    print(f"embedder {embedder.name} ({embedder.dimensions}-d); {load()}")
    n_batch = args.batches * args.batch
    # distinct texts for every step (a repeat would be an exact duplicate, a cheaper write)
    texts = [
        f"{t} (note {i})" for i, t in enumerate(corpus.memories(4 * n_batch + 2 * args.singles, args.seed))
    ]
    embedder.embed(texts[:8])

    t0 = time.perf_counter()
    for text in texts[: args.singles]:
        embedder.embed([text])
    one = (time.perf_counter() - t0) / args.singles * 1000
    t0 = time.perf_counter()
    supplied = embedder.embed(texts[n_batch : 2 * n_batch])
    many = (time.perf_counter() - t0) / n_batch * 1000
    print(
        f"embedder alone: {one:.2f} ms per text at batch 1; {many:.2f} ms per text in calls of {n_batch}; {load()}"
    )

    def rate(label: str, count: int, seconds: float) -> None:
        print(
            f"{label:<58} {count / seconds:>8,.0f} memories/s  ({count} in {seconds:.2f} s; {load()})",
            flush=True,
        )

    def batches(agent: Any, policy: Any, start: int, vectors: Any) -> float:
        t0 = time.perf_counter()
        for b in range(args.batches):
            lo = start + b * args.batch
            items = [
                MemoryData(
                    content=texts[i], embedding=vectors[i - start].tolist() if vectors is not None else None
                )
                for i in range(lo, lo + args.batch)
            ]
            memories_create(agent=agent, items=items, policy=policy, batch=True)
        return time.perf_counter() - t0

    with scratch_tenant("bench_mwrites", ["writer"]) as (tenant, agents, _), tenant_context(tenant):
        agent = agents["writer"]
        policy = tenant.retrieval_policy
        rate(f"batches of {args.batch}, embedded by the service", n_batch, batches(agent, policy, 0, None))
        rate(
            f"batches of {args.batch}, client-supplied vectors (no embedder)",
            n_batch,
            batches(agent, policy, n_batch, supplied),
        )
        t0 = time.perf_counter()
        for text in texts[2 * n_batch + args.singles : 2 * n_batch + 2 * args.singles]:
            memory_create(agent=agent, data=MemoryData(content=text), policy=policy)
        rate("single writes (memory_create, each embedded)", args.singles, time.perf_counter() - t0)

    if not args.http:
        return
    start = 2 * n_batch + 2 * args.singles
    http_vectors = embedder.embed(texts[start + n_batch : start + 2 * n_batch])
    with (
        scratch_tenant("bench_mwrites", ["writer"]) as (_, _, keys),
        web_server("uvicorn", workers=2) as server,
        httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {keys['writer']}"}, timeout=120
        ) as client,
    ):
        for label, lo, vectors in (
            ("embedded by the service", start, None),
            ("client-supplied vectors", start + n_batch, http_vectors),
        ):
            bodies = [
                json.dumps(
                    [
                        {
                            "content": texts[i],
                            **({"embedding": vectors[i - lo].tolist()} if vectors is not None else {}),
                        }
                        for i in range(lo + b * args.batch, lo + (b + 1) * args.batch)
                    ]
                )
                for b in range(args.batches)
            ]
            t0 = time.perf_counter()
            for body in bodies:
                response = client.post(
                    "/api/v1/memories", content=body, headers={"Content-Type": "application/json"}
                )
                if response.status_code != 201:
                    raise SystemExit(f"{response.status_code}: {response.text[:300]}")
            rate(f"HTTP batches of {args.batch}, {label}", n_batch, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
