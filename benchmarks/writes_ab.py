"""Write throughput of two checkouts side by side, in one run: their rounds interleaved.

On a shared machine the load moves between two runs more than most changes do; here two worker
processes, one running this checkout's code and one another checkout's (``--base``, e.g. a
``git archive`` of main unpacked next to this one, using this checkout's ``.venv``), take turns
round by round (the order alternates), each in a fresh tenant of the same database, and the
medians are compared. Kinds:

- ``memory-batch``: a batch of 500 memories with client-supplied vectors (``memories_create``);
- ``memory-single``: 30 single writes, each embedded (``memory_create``);
- ``facts``: a batch of 500 facts of ``knowledge_graph.py``'s plan (``facts_assert_batch``);
- ``events-service``: 10 batches of 100 events (``events_append``);
- ``events-http``: 20 requests of 100 events from two keep-alive clients to each worker's own
  uvicorn (2 workers), as ``event_append.py`` sends them.

``--batch N`` (events kinds only) sends batches of N events instead of 100 (the API takes up to
1,000).

Needs what the other benchmarks need (``DATABASE_URL``, ``REDIS_URL``)::

    .venv/bin/python benchmarks/writes_ab.py facts --base ../engram-main --rounds 12
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NEW = str(Path(__file__).resolve().parent.parent)


def worker(kind: str, root: str, base: bool, size: int = 100) -> None:
    sys.path.insert(0, f"{root}/benchmarks")
    os.chdir(root)
    from _common import bench_key, django_setup

    django_setup()
    import random
    import threading
    import uuid
    from datetime import UTC, datetime

    import numpy as np
    from django_tenants.utils import tenant_context

    tag = "b" if base else "n"
    tenant, agents, keys = bench_key(f"bench_ab_{kind.replace('-', '_')}_{tag}_{uuid.uuid4().hex[:6]}", ["w"])
    agent = agents["w"]
    state: dict[str, Any] = {"round": 0}
    if kind.startswith("memory"):
        import corpus

        texts = [f"{t} (ab {i})" for i, t in enumerate(corpus.memories(8000, 99))]
        path = f"{NEW}/var/bench/ab-vectors.npy"
        if kind == "memory-batch":
            if os.path.exists(path):
                vecs = np.load(path)
            else:
                from memory.embeddings import get_embedder

                vecs = get_embedder().embed(texts[:4500])  # rounds up to 8, after a warm-up
                os.makedirs(os.path.dirname(path), exist_ok=True)
                np.save(path + ".tmp.npy", vecs)
                os.replace(path + ".tmp.npy", path)
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
    server: Any = None
    if kind == "events-http":
        from _common import web_server

        server_cm = web_server("uvicorn", workers=2)
        server = server_cm.__enter__()
    print("ready", flush=True)
    for _line in sys.stdin:
        r = state["round"]
        state["round"] += 1
        t0 = time.perf_counter()
        n = 0
        with tenant_context(tenant):
            if kind == "memory-batch":
                from memory.semantic.services.writes import MemoryData, memories_create

                lo = r * 500
                items = [
                    MemoryData(content=state["texts"][i], embedding=state["vecs"][i].tolist())
                    for i in range(lo, lo + 500)
                ]
                t0 = time.perf_counter()
                memories_create(agent=agent, items=items, policy=tenant.retrieval_policy, batch=True)
                n = 500
            elif kind == "memory-single":
                from memory.semantic.services.writes import MemoryData, memory_create

                for i in range(6000 + r * 30, 6000 + r * 30 + 30):
                    memory_create(
                        agent=agent,
                        data=MemoryData(content=state["texts"][i]),
                        policy=tenant.retrieval_policy,
                    )
                n = 30
            elif kind == "facts":
                from memory.knowledge.services import facts_assert_batch

                chunk = state["items"][r * 500 : r * 500 + 500]
                facts_assert_batch(agent=agent, facts=[d for _, d in chunk])
                n = 500
            elif kind == "events-service":
                from memory.episodic.services import EventData, events_append

                for b in state["batches"][r * 10 : r * 10 + 10]:
                    events_append(
                        agent=agent,
                        events=[
                            EventData(
                                session_id=e["session_id"],
                                execution_id=e["execution_id"],
                                role=e["role"],
                                kind=e["kind"],
                                content=e["content"],
                                payload=e["payload"],
                                occurred_at=datetime.fromisoformat(e["occurred_at"]),
                            )
                            for e in b
                        ],
                    )
                    n += size
        if kind == "events-http":
            import httpx

            mine = state["batches"][r * 20 : r * 20 + 20]
            bodies = [json.dumps(b) for b in mine]

            def client(part: list[str]) -> None:
                with httpx.Client(
                    base_url=server.url, headers={"Authorization": f"Bearer {keys['w']}"}, timeout=60
                ) as c:
                    for body in part:
                        resp = c.post(
                            "/api/v1/events", content=body, headers={"Content-Type": "application/json"}
                        )
                        assert resp.status_code == 201, resp.text[:200]

            t0 = time.perf_counter()
            threads = [threading.Thread(target=client, args=(bodies[k::2],)) for k in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            n = 20 * size
        print(json.dumps({"rate": n / (time.perf_counter() - t0), "load": os.getloadavg()[0]}), flush=True)
    if server is not None:
        server_cm.__exit__(None, None, None)


def driver(kind: str, base: str, rounds: int, warm: int, size: int = 100) -> None:
    env = {**os.environ}
    procs: dict[str, Any] = {}
    for name, root in (("base", str(Path(base).resolve())), ("new", NEW)):
        procs[name] = subprocess.Popen(
            [sys.executable, __file__, "--worker", kind, root, name, str(size)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        while True:  # one at a time: the first may write the shared vectors
            line = procs[name].stdout.readline()
            if not line or line.strip() == "ready":
                break
    rates: dict[str, list[float]] = {"base": [], "new": []}
    loads = []
    for r in range(rounds + warm):
        order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
        for name in order:
            p = procs[name]
            p.stdin.write("go\n")
            p.stdin.flush()
            out = json.loads(p.stdout.readline())
            if r >= warm:
                rates[name].append(out["rate"])
                loads.append(out["load"])
    for p in procs.values():
        p.stdin.close()
        p.wait(60)
    import statistics

    print(
        f"{kind}{f' (batches of {size})' if kind.startswith('events') else ''}: {rounds} interleaved rounds "
        f"(after {warm} warm-up), load {min(loads):.1f}-{max(loads):.1f}"
    )
    for name in ("base", "new"):
        v = sorted(rates[name])
        print(f"  {name:<5} median {statistics.median(v):>8,.0f}/s  (min {v[0]:,.0f}, max {v[-1]:,.0f})")
    print(f"  new/base {statistics.median(rates['new']) / statistics.median(rates['base']):.2f}x")


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], sys.argv[3], sys.argv[4] == "base", int(sys.argv[5]))
        return
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "kind", choices=["memory-batch", "memory-single", "facts", "events-service", "events-http"]
    )
    parser.add_argument("--base", required=True, help="the other checkout (its code, this .venv)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--batch", type=int, default=100, help="events per batch (events kinds; default 100)")
    args = parser.parse_args()
    driver(args.kind, args.base, args.rounds, args.warmup, args.batch)


if __name__ == "__main__":
    main()
