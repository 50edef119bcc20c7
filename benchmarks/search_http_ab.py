"""What HTTP adds to a search, two checkouts side by side: in each checkout's worker (the A/B
harness, ``_ab.py``), the service (``memory_search`` in the worker) and ``POST
/api/v1/memories/search`` to a uvicorn of that checkout (2 workers, one keep-alive client), query
by query (the order of the two paths alternates), each path embedding its own fresh questions.
Besides wall times it prints the CPU each path spends per search (the server's processes, read from
``/proc``; the worker's own process): on a shared, loaded machine the wall times carry everyone's
waits, the CPU mostly one's own work. Uses the tenant ``search_latency.py`` filled
(``bench_search_10000``: run ``python -m benchmarks search_latency --sizes 10000 --no-http`` first)::

    python -m benchmarks search_http_ab --base ../main --queries 200
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from typing import Any

from _ab import arguments, compare, entry, serve
from _common import bench_key, percentiles, web_server

TICK = os.sysconf("SC_CLK_TCK")


def group_cpu(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the processes of process group ``pgid``."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # after the name: state, ppid, pgrp, ..., utime (12), stime (13)
            total += int(fields[11]) + int(fields[12])
    return total / TICK


def driver() -> None:
    """Parse the command line, run the rounds and print each side's paths."""
    parser = arguments(__doc__)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10, help="the queries are split into this many")
    parser.add_argument("--tenant", default="bench_search_10000")
    args = parser.parse_args()
    import corpus

    per_round = max(1, args.queries // args.rounds)
    qs = corpus.questions(30 + args.rounds * per_round)
    result = compare(
        script=__file__,
        base=args.base,
        rounds=args.rounds,
        warmup=1,
        request=lambda r: qs[:30] if r == 0 else qs[30 + (r - 1) * per_round : 30 + r * per_round],
        args=[args.tenant],
    )
    n = args.rounds * per_round
    print(
        f"search in {args.tenant}, {n} fresh queries per path and side, interleaved, load {result.load_range}"
    )
    figures: dict[str, Any] = {}
    for side, answers in result.answers.items():
        service = [ms for a in answers for ms in a["service"]]
        http = [ms for a in answers for ms in a["http"]]
        figures[side] = {
            "service_ms": percentiles(service),
            "http_ms": percentiles(http),
            "http_above_service_p50_ms": statistics.median(http) - statistics.median(service),
            "cpu_per_search_ms": {
                "service": sum(a["service_cpu"] for a in answers) / n * 1000,
                "server": sum(a["server_cpu"] for a in answers) / n * 1000,
            },
        }
        for path in ("service", "http"):
            p = figures[side][f"{path}_ms"]
            print(f"  {side:<5} {path:<8} p50 {p['p50']:6.1f}  p95 {p['p95']:6.1f}  mean {p['mean']:6.1f} ms")
    print(
        "  HTTP above service (p50): "
        + ", ".join(f"{s} {f['http_above_service_p50_ms']:.1f} ms" for s, f in figures.items())
    )
    print(
        "  CPU per search: "
        + "; ".join(
            f"{s}: service {f['cpu_per_search_ms']['service']:.2f} ms (its worker), "
            f"server {f['cpu_per_search_ms']['server']:.2f} ms (all its processes)"
            for s, f in figures.items()
        )
    )
    result.record(tenant=args.tenant, queries=n, search=figures)


def worker(root: str, tenant_slug: str) -> None:
    """One side: each request is a list of questions; the answer holds each path's wall times (ms)
    and CPU seconds, ``{service, http, service_cpu, server_cpu}``."""

    def setup(stack: contextlib.ExitStack[Any]) -> Any:
        import httpx
        from django_tenants.utils import tenant_context

        from memory.semantic.services.recall import memory_search

        tenant, agents, keys = bench_key(tenant_slug, ["bench-reader"])
        agent = agents["bench-reader"]
        server = stack.enter_context(web_server("uvicorn", workers=2, root=root))
        client = stack.enter_context(
            httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {keys['bench-reader']}"}, timeout=60
            )
        )

        def run(questions: list[str]) -> dict[str, Any]:
            out: dict[str, Any] = {"service": [], "http": [], "service_cpu": 0.0}
            cpu0 = group_cpu(server.process.pid)
            for i, q in enumerate(questions):
                for path in ("service", "http") if i % 2 == 0 else ("http", "service"):
                    t = time.perf_counter()
                    if path == "service":
                        c = time.process_time()
                        with tenant_context(tenant):
                            memory_search(agent=agent, query=q, policy=tenant.retrieval_policy)
                        out["service_cpu"] += time.process_time() - c
                    else:
                        client.post("/api/v1/memories/search", json={"query": q}).raise_for_status()
                    out[path].append((time.perf_counter() - t) * 1000)
            out["server_cpu"] = group_cpu(server.process.pid) - cpu0
            return out

        return run

    serve(root, setup, "memory.semantic.services.recall")


if __name__ == "__main__":
    entry(worker=worker, driver=driver)
