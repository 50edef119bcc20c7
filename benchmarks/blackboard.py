"""Blackboard throughput: writes and reads per second, in the service layer and over HTTP.

Service layer: ``blackboard_write`` (the Lua compare-and-set script, plus the publish) and
``blackboard_get`` / ``blackboard_read`` in one process, sequentially, against the real Redis.
HTTP: ``PUT /api/v1/executions/{id}/blackboard/{field}`` and ``GET .../{agent}/{field}`` against the
project's uvicorn server (``config.asgi``), with ``--clients`` keep-alive clients in threads.
Values are small JSON documents (~200 bytes). Prints operations per second and latency
percentiles. Needs PostgreSQL and Redis from the environment::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"; export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks blackboard [--ops 20000] [--http-ops 4000] [--clients 4]
"""

from __future__ import annotations

import argparse
import threading
import time

from _common import bench_key, django_setup, percentiles, web_server


def report(label: str, latencies_ms: list[float], seconds: float) -> None:
    p = percentiles(latencies_ms)
    print(
        f"{label:34s} {len(latencies_ms) / seconds:>9,.0f} ops/s   p50 {p['p50']:.2f}  p95 {p['p95']:.2f}  "
        f"p99 {p['p99']:.2f} ms",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=20_000, help="service-layer writes (and as many reads)")
    parser.add_argument("--http-ops", type=int, default=4_000, help="HTTP writes (and as many reads)")
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    django_setup()
    from django_tenants.utils import tenant_context

    from memory.working import services

    tenant, agents, keys = bench_key("bench_bb", ["planner", "critic"])
    policy = tenant.working_memory_policy
    value = {"step": 3, "status": "running", "notes": "x" * 150}
    with tenant_context(tenant):
        planner = agents["planner"]
        lat: list[float] = []
        start = time.perf_counter()
        for i in range(args.ops):
            t = time.perf_counter()
            services.blackboard_write(
                agent=planner, execution_id=f"exec-{i % 100}", name=f"f{i % 20}", value=value, policy=policy
            )
            lat.append((time.perf_counter() - t) * 1000)
        report("service write (CAS script)", lat, time.perf_counter() - start)
        lat = []
        start = time.perf_counter()
        for i in range(args.ops):
            t = time.perf_counter()
            services.blackboard_get(
                reader=agents["critic"],
                execution_id=f"exec-{i % 100}",
                agent_name="planner",
                name=f"f{i % 20}",
            )
            lat.append((time.perf_counter() - t) * 1000)
        report("service read (one field)", lat, time.perf_counter() - start)
        lat = []
        start = time.perf_counter()
        for i in range(args.ops // 10):
            t = time.perf_counter()
            services.blackboard_read(reader=agents["critic"], execution_id=f"exec-{i % 100}")
            lat.append((time.perf_counter() - t) * 1000)
        report("service read (all 20 fields)", lat, time.perf_counter() - start)

    import httpx

    with web_server("uvicorn", workers=1) as server:
        for label, method in (("HTTP write (PUT)", "PUT"), ("HTTP read (GET one field)", "GET")):
            results: list[float] = []
            lock = threading.Lock()
            per_client = args.http_ops // args.clients

            def run(
                client_no: int,
                method: str = method,
                results: list[float] = results,
                lock: threading.Lock = lock,
                per_client: int = per_client,
            ) -> None:
                mine: list[float] = []
                key = keys["planner"] if method == "PUT" else keys["critic"]
                with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}) as http:
                    for i in range(per_client):
                        execution, field = f"exec-{(client_no * 7 + i) % 100}", f"f{i % 20}"
                        t = time.perf_counter()
                        if method == "PUT":
                            r = http.put(
                                f"/api/v1/executions/{execution}/blackboard/{field}", json={"value": value}
                            )
                        else:
                            r = http.get(f"/api/v1/executions/{execution}/blackboard/planner/{field}")
                        mine.append((time.perf_counter() - t) * 1000)
                        assert r.status_code == 200, r.text
                with lock:
                    results.extend(mine)

            threads = [threading.Thread(target=run, args=(n,)) for n in range(args.clients)]
            start = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            report(f"{label}, {args.clients} clients", results, time.perf_counter() - start)


if __name__ == "__main__":
    main()
