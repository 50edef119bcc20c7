"""Write throughput of two checkouts side by side, in one run: their rounds interleaved.

Through the A/B harness (``_ab.py``): a worker per checkout (``--base`` and this one), each in a
fresh tenant of the same database, the rounds' order alternating; the medians are compared. Kinds:

- ``memory-batch``: a batch of 500 memories with client-supplied vectors (``memories_create``);
- ``memory-single``: 30 single writes, each embedded (``memory_create``);
- ``memory-single-vector``: 30 single writes with client-supplied vectors: the write path without
  the model (its statements and Python);
- ``facts``: a batch of 500 facts of ``knowledge_graph.py``'s plan (``facts_assert_batch``);
- ``events-service``: 10 batches of 100 events (``events_append``);
- ``events-http``: 20 requests of 100 events from two keep-alive clients to each worker's own
  uvicorn (2 workers), as ``event_append.py`` sends them.

``--batch N`` (events kinds only) sends batches of N events instead of 100 (the API takes up to
1,000).

Needs what the other benchmarks need (``DATABASE_URL``, ``REDIS_URL``)::

    python -m benchmarks writes_ab facts --base ../engram-main --rounds 12
"""

import contextlib
import json
import os
import statistics
import time
from typing import Any

from _ab import arguments, compare, entry, serve
from _common import ROOT, percentiles, scratch_tenant, web_server

KINDS = ("memory-batch", "memory-single", "memory-single-vector", "facts", "events-service", "events-http")


def _prepare(kind: str, tenant: Any, size: int) -> dict[str, Any]:
    """The inputs of every round of ``kind``, made before the first round (untimed)."""
    import random
    from datetime import UTC, datetime

    from django_tenants.utils import tenant_context

    state: dict[str, Any] = {}
    if kind.startswith("memory"):
        import corpus
        import numpy as np

        texts = [f"{t} (ab {i})" for i, t in enumerate(corpus.memories(8000, 99))]
        path = ROOT / "var" / "bench" / "ab-vectors.npy"
        if kind in ("memory-batch", "memory-single-vector"):
            if path.exists():
                vecs = np.load(path)
            else:
                from memory.embeddings import get_embedder

                vecs = get_embedder().embed(texts[:4500])  # rounds up to 8, after a warm-up
                path.parent.mkdir(parents=True, exist_ok=True)
                np.save(f"{path}.tmp.npy", vecs)
                os.replace(f"{path}.tmp.npy", path)
            state["vecs"] = vecs
        state["texts"] = texts
    if kind == "facts":
        from knowledge_graph import make_plan, set_cardinalities

        with tenant_context(tenant):
            set_cardinalities()
        state["items"] = make_plan(40000, 11).items
    if kind.startswith("events"):
        from event_append import make_batch

        rng = random.Random(3)
        start = datetime.now(UTC)
        count = 2000 if size == 100 else 200_000 // size  # at least 10 rounds of 20 requests
        state["batches"] = [make_batch(rng, size, f"ab-s{i // 10}", start) for i in range(count)]
    return state


def _write_round(kind: str, r: int, agent: Any, tenant: Any, state: dict[str, Any], size: int) -> float:
    """Round ``r`` of a service-layer ``kind``: its writes per second."""
    from datetime import datetime

    t0 = time.perf_counter()
    if kind == "memory-batch":
        from memory.semantic.services.writes import MemoryData, memories_create

        items = [
            MemoryData(content=state["texts"][i], embedding=state["vecs"][i].tolist())
            for i in range(r * 500, r * 500 + 500)
        ]
        t0 = time.perf_counter()
        memories_create(agent=agent, items=items, policy=tenant.retrieval_policy, batch=True)
        n = 500
    elif kind == "memory-single":
        from memory.semantic.services.writes import MemoryData, memory_create

        for i in range(6000 + r * 30, 6000 + r * 30 + 30):
            memory_create(
                agent=agent, data=MemoryData(content=state["texts"][i]), policy=tenant.retrieval_policy
            )
        n = 30
    elif kind == "memory-single-vector":
        from memory.semantic.services.writes import MemoryData, memory_create

        writes = [
            MemoryData(content=state["texts"][i], embedding=state["vecs"][i].tolist())
            for i in range(r * 30, r * 30 + 30)
        ]
        t0 = time.perf_counter()
        for data in writes:
            memory_create(agent=agent, data=data, policy=tenant.retrieval_policy)
        n = 30
    elif kind == "facts":
        from memory.knowledge.services import facts_assert_batch

        facts_assert_batch(agent=agent, facts=[d for _, d in state["items"][r * 500 : r * 500 + 500]])
        n = 500
    else:
        from memory.episodic.services import EventData, events_append

        n = 0
        for b in state["batches"][r * 10 : r * 10 + 10]:
            # the API's body of each event (``event_append.make_batch``), its time parsed
            events = [EventData(**{**e, "occurred_at": datetime.fromisoformat(e["occurred_at"])}) for e in b]
            events_append(agent=agent, events=events)
            n += size
    return n / (time.perf_counter() - t0)


def _http_round(url: str, key: str, batches: list[Any], size: int) -> float:
    """20 requests of ``size`` events from two keep-alive clients: events per second."""
    import threading

    import httpx

    bodies = [json.dumps(b) for b in batches]

    def client(part: list[str]) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
            for body in part:
                resp = c.post("/api/v1/events", content=body, headers={"Content-Type": "application/json"})
                assert resp.status_code == 201, resp.text[:200]

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(bodies[k::2],)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(bodies) * size / (time.perf_counter() - t0)


def driver() -> None:
    """Parse the command line, run the rounds and print the medians."""
    parser = arguments(__doc__)
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--batch", type=int, default=100, help="events per batch (events kinds; default 100)")
    args = parser.parse_args()
    result = compare(
        script=__file__,
        base=args.base,
        rounds=args.rounds,
        warmup=args.warmup,
        request=lambda r: r,
        args=[args.kind, str(args.batch)],
    )
    batches = f" (batches of {args.batch})" if args.kind.startswith("events") else ""
    print(
        f"{args.kind}{batches}: {args.rounds} interleaved rounds "
        f"(after {args.warmup} warm-up), load {result.load_range}"
    )
    for name, rates in result.answers.items():
        v = sorted(rates)
        print(f"  {name:<5} median {statistics.median(v):>8,.0f}/s  (min {v[0]:,.0f}, max {v[-1]:,.0f})")
    ratio = statistics.median(result.answers["new"]) / statistics.median(result.answers["base"])
    print(f"  new/base {ratio:.2f}x")
    rates = {n: percentiles(v) for n, v in result.answers.items()}
    result.record(kind=args.kind, batch=args.batch, writes_per_second=rates, new_over_base=ratio)


def worker(root: str, kind: str, batch: str) -> None:
    """One side: a fresh tenant (dropped when the worker ends), the inputs, then one round per
    request (its number); the answer is the round's writes per second."""
    size = int(batch)

    def setup(stack: contextlib.ExitStack[Any]) -> Any:
        from django_tenants.utils import tenant_context

        prefix = f"bench_ab_{kind.replace('-', '_')}"
        tenant, agents, keys = stack.enter_context(scratch_tenant(prefix, ["w"]))
        state = _prepare(kind, tenant, size)
        if kind == "events-http":
            server = stack.enter_context(web_server("uvicorn", workers=2, root=root))

            def over_http(r: int) -> float:
                return _http_round(server.url, keys["w"], state["batches"][r * 20 : r * 20 + 20], size)

            return over_http

        def in_service(r: int) -> float:
            with tenant_context(tenant):
                return _write_round(kind, r, agents["w"], tenant, state, size)

        return in_service

    serve(root, setup, "memory.semantic.services.writes")


if __name__ == "__main__":
    entry(worker=worker, driver=driver)
