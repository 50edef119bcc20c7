"""What HTTP adds to a search, two checkouts side by side: the service (``memory_search`` in this
process) and ``POST /api/v1/memories/search`` to a uvicorn of this checkout and one of another
(``--base``, each 2 workers, one keep-alive client each), taking turns query by query (the order
alternates), each path embedding its own fresh questions. Besides wall times it prints the CPU
each path spends per search (the servers' processes, read from ``/proc``; the service's process):
on a shared, loaded machine the wall times carry everyone's waits, the CPU mostly one's own work.
Uses the tenant ``search_latency.py`` filled (``bench_search_10000``: run ``search_latency.py --sizes 10000 --no-http`` first)::

    .venv/bin/python benchmarks/search_http_ab.py --base ../main --queries 200
"""

# ruff: noqa: E402  (Django is set up before the project's modules are imported)
import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path

from _common import ROOT, bench_key, django_setup, percentiles

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--base", required=True, help="the other checkout (its code, this .venv)")
parser.add_argument("--queries", type=int, default=200)
parser.add_argument("--tenant", default="bench_search_10000")
args = parser.parse_args()
django_setup()
import corpus
import httpx
from django_tenants.utils import tenant_context

from devstack import free_port
from devstack.web import uvicorn_command
from memory.semantic.services.recall import memory_search

N = args.queries
TICK = os.sysconf("SC_CLK_TCK")


def group_cpu(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the processes of process group ``pgid``."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # after the name: state, ppid, pgrp, ..., utime (12), stime (13)
            total += int(fields[11]) + int(fields[12])
    return total / TICK


tenant, agents, keys = bench_key(args.tenant, ["bench-reader"])
agent = agents["bench-reader"]
key = keys["bench-reader"]
procs: dict[str, subprocess.Popen[bytes]] = {}
urls: dict[str, str] = {}
env = {**os.environ, "DJANGO_DEBUG": "false"}
for name, root in (("base", str(Path(args.base).resolve())), ("new", str(ROOT))):
    port = free_port()
    procs[name] = subprocess.Popen(
        uvicorn_command(port, workers=2), cwd=root, env=env, start_new_session=True
    )
    urls[name] = f"http://127.0.0.1:{port}"
try:
    for u in urls.values():
        for _ in range(200):
            try:
                httpx.get(u + "/api/v1/me", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.3)
    qs = corpus.questions(N + 30)
    warm, qs = qs[:30], qs[30:]
    clients = {
        n: httpx.Client(base_url=u, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        for n, u in urls.items()
    }
    for q in warm:
        for n, u in urls.items():
            httpx.post(
                u + "/api/v1/memories/search",
                json={"query": q},
                headers={"Authorization": f"Bearer {key}"},
                timeout=60,
            ).raise_for_status()
            clients[n].post("/api/v1/memories/search", json={"query": q}).raise_for_status()
        with tenant_context(tenant):
            memory_search(agent=agent, query=q, policy=tenant.retrieval_policy)
    res: dict[str, list[float]] = {"service": [], "base": [], "new": []}
    loads = []
    cpu0 = {n: group_cpu(p.pid) for n, p in procs.items()}
    service_cpu = 0.0
    for i, q in enumerate(qs):  # each path embeds the query itself, once (fresh questions)
        order = ["service", "base", "new"] if i % 2 == 0 else ["new", "base", "service"]
        for n in order:
            t = time.perf_counter()
            if n == "service":
                c = time.process_time()
                with tenant_context(tenant):
                    memory_search(agent=agent, query=q, policy=tenant.retrieval_policy)
                service_cpu += time.process_time() - c
            else:
                clients[n].post("/api/v1/memories/search", json={"query": q}).raise_for_status()
            res[n].append((time.perf_counter() - t) * 1000)
        loads.append(os.getloadavg()[0])
    cpu = {n: (group_cpu(p.pid) - cpu0[n]) / len(qs) * 1000 for n, p in procs.items()}
    cpu["service"] = service_cpu / len(qs) * 1000
finally:
    for p in procs.values():
        os.killpg(p.pid, 15)
        p.wait()
print(
    f"search at 10k memories, {N} fresh queries per path, interleaved, load {min(loads):.1f}-{max(loads):.1f}"
)
for n, v in res.items():
    p = percentiles(v)
    print(f"  {n:<8} p50 {p['p50']:6.1f}  p95 {p['p95']:6.1f}  mean {p['mean']:6.1f} ms")
s = statistics.median(res["service"])
print(
    f"  HTTP above service (p50): base {statistics.median(res['base']) - s:.1f} ms, new {statistics.median(res['new']) - s:.1f} ms"
)
print(
    f"  CPU per search: service {cpu['service']:.2f} ms (this process), base server {cpu['base']:.2f} ms, "
    f"new server {cpu['new']:.2f} ms (all its processes)"
)
