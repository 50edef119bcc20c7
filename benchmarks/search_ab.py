"""Hybrid search before / after in one run: this checkout's ``memory_search`` and another's (``--base``)
on the same tenant, each in a worker process of its own with its checkout's code, taking turns
round by round (the order alternates), every query embedded per call (the ``embed_query`` cache is
cleared before each search), k=10, ``touch`` on as the API calls it. Each round gives both
workers the same fresh questions. Uses the tenant ``search_latency.py`` filled
(``bench_search_<N>``: run ``search_latency.py --sizes 100000 --bulk --fill-only`` first)::

    .venv/bin/python benchmarks/search_ab.py --base /work/main --size 100000 --rounds 10 --queries 30

Prints p50 / p95 / mean per side, the new/base ratios and the load average seen during the run.
``--touch off`` measures the read path alone. Each worker prints the file its
``memory.semantic.selectors`` came from, and stops if any module of the project's packages came
from outside its checkout (``peers.loaded_elsewhere``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from _common import ROOT, checkout_worker, percentiles


def worker(root: str, tenant_slug: str, touch: bool) -> None:
    """``--worker <root> <tenant> <touch>``: read a JSON list of questions per line, answer with
    the latencies (ms) of ``memory_search`` for each as JSON. First line: ``ready <selectors file>``."""
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the setup's prints go to stderr; stdout carries the protocol
    sys.path.insert(0, root)
    if str(ROOT) not in sys.path:  # else ``django_setup`` puts this file's checkout first
        sys.path.append(str(ROOT))
    from _common import bench_key, django_setup

    django_setup()
    from django_tenants.utils import tenant_context
    from peers import loaded_elsewhere

    from memory.embeddings import embed_query
    from memory.semantic import selectors
    from memory.semantic.services.recall import memory_search

    tenant, agents, _ = bench_key(tenant_slug, ["bench-reader"])
    agent = agents["bench-reader"]
    policy = tenant.retrieval_policy
    wrong = loaded_elsewhere(root)
    if wrong:
        print("modules not from", root, *wrong, sep="\n  ", file=sys.stderr)
        protocol.write("wrong-code\n")
        protocol.flush()
        sys.exit(2)
    print(f"ready {selectors.__file__}", file=protocol, flush=True)
    for line in sys.stdin:
        out = []
        with tenant_context(tenant):
            for q in json.loads(line):
                embed_query.cache_clear()
                t0 = time.perf_counter()
                memory_search(agent=agent, query=q, policy=policy, touch=touch)
                out.append((time.perf_counter() - t0) * 1000)
        print(json.dumps(out), file=protocol, flush=True)


class Worker:
    def __init__(self, name: str, root: str, tenant: str, touch: bool) -> None:
        self.name, self.root = name, os.path.realpath(root)
        self.proc, _ = checkout_worker(
            name, self.root, [os.path.abspath(__file__), "--worker", self.root, tenant, str(int(touch))]
        )

    def run(self, questions: list[str]) -> list[float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(questions) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer.startswith("["):
            raise SystemExit(f"{self.name}: the worker failed ({answer.strip()!r}; its stderr above)")
        return list(json.loads(answer))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4] == "1")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other checkout (its code, this .venv)")
    parser.add_argument("--size", type=int, default=100_000, help="the tenant bench_search_<size>")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--queries", type=int, default=30, help="questions per round (both sides)")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--touch", choices=["on", "off"], default="on")
    args = parser.parse_args()
    import corpus

    tenant = f"bench_search_{args.size}"
    touch = args.touch == "on"
    qs = corpus.questions(args.warmup + args.rounds * args.queries)
    workers = [Worker("base", args.base, tenant, touch), Worker("new", str(ROOT), tenant, touch)]
    try:
        for w in workers:
            w.run(qs[: args.warmup])
        res: dict[str, list[float]] = {w.name: [] for w in workers}
        loads = []
        for r in range(args.rounds):
            part = qs[args.warmup + r * args.queries : args.warmup + (r + 1) * args.queries]
            for w in workers if r % 2 == 0 else workers[::-1]:
                res[w.name].extend(w.run(part))
            loads.append(os.getloadavg()[0])
    finally:
        for w in workers:
            w.close()
    print(
        f"search k=10 at {args.size:,} memories, service layer, query embedded per call, touch {args.touch}; "
        f"{args.rounds} rounds x {args.queries} questions per side, load {min(loads):.1f}-{max(loads):.1f}"
    )
    stats = {n: percentiles(v) for n, v in res.items()}
    for n, p in stats.items():
        print(f"  {n:<5} p50 {p['p50']:6.2f}  p95 {p['p95']:6.2f}  mean {p['mean']:6.2f} ms")
    b, n = stats["base"], stats["new"]
    print(f"  new/base: p50 {n['p50'] / b['p50']:.2f}x  p95 {n['p95'] / b['p95']:.2f}x")


if __name__ == "__main__":
    main()
