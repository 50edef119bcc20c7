"""Hybrid search before / after in one run: this checkout's ``memory_search`` and another's (``--base``)
on the same tenant, through the A/B harness (``_ab.py``: a worker per checkout, rounds
interleaved), every query embedded per call (the ``embed_query`` cache is cleared before each
search), k=10, ``touch`` on as the API calls it. Each round gives both workers the same fresh
questions; the ``--warmup`` rounds are not counted. Uses the tenant ``search_latency.py`` filled
(``bench_search_<N>``: run ``python -m benchmarks search_latency --sizes 100000 --bulk --fill-only``
first)::

    python -m benchmarks search_ab --base /work/main --size 100000 --rounds 10 --queries 30

With ``--locomo FILE`` the tenant is instead the one ``locomo_ingest`` filled (``--tenant``, default
``locomo_dev``: conversation turns, a quarter of them asking something) and the questions are that
file's, each asked as its ``locomo`` agent within its conversation (the ``<sample_id>`` tag), as
``locomo_eval`` asks them.

Prints p50 / p95 / mean per side, the new/base ratios and the load average seen during the run.
``--touch off`` measures the read path alone. Each worker prints the file its
``memory.semantic.selectors`` came from.
"""

from __future__ import annotations

import time
from typing import Any

from _ab import arguments, compare, entry, serve
from _common import bench_key, percentiles


def driver() -> None:
    """Parse the command line, run the rounds and print the percentiles."""
    parser = arguments(__doc__)
    parser.add_argument("--size", type=int, default=100_000, help="the tenant bench_search_<size>")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--queries", type=int, default=30, help="questions per round (both sides)")
    parser.add_argument("--warmup", type=int, default=1, help="rounds not counted")
    parser.add_argument("--touch", choices=["on", "off"], default="on")
    parser.add_argument("--locomo", default="", help="a LoCoMo file: its questions in its ingested tenant")
    parser.add_argument(
        "--tenant", default="locomo_dev", help="with --locomo, the tenant locomo_ingest filled"
    )
    args = parser.parse_args()
    import corpus

    need = (args.warmup + args.rounds) * args.queries
    if args.locomo:
        qs = locomo_questions(args.locomo, need)
        tenant = args.tenant
    else:
        qs = ["\t" + q for q in corpus.questions(need)]
        tenant = f"bench_search_{args.size}"
    result = compare(
        script=__file__,
        base=args.base,
        rounds=args.rounds,
        warmup=args.warmup,
        request=lambda r: qs[r * args.queries : (r + 1) * args.queries],
        args=[tenant, str(int(args.touch == "on"))],
    )
    where = f"the LoCoMo tenant {tenant}" if args.locomo else f"{args.size:,} memories"
    print(
        f"search k=10 at {where}, service layer, query embedded per call, touch {args.touch}; "
        f"{args.rounds} rounds x {args.queries} questions per side, load {result.load_range}"
    )
    stats = {n: percentiles([ms for part in v for ms in part]) for n, v in result.answers.items()}
    for n, p in stats.items():
        print(f"  {n:<5} p50 {p['p50']:6.2f}  p95 {p['p95']:6.2f}  mean {p['mean']:6.2f} ms")
    b, n = stats["base"], stats["new"]
    print(f"  new/base: p50 {n['p50'] / b['p50']:.2f}x  p95 {n['p95'] / b['p95']:.2f}x")
    ratios = {"p50": n["p50"] / b["p50"], "p95": n["p95"] / b["p95"]}
    result.record(
        size=args.size, touch=args.touch, queries=args.queries, search_ms=stats, new_over_base=ratios
    )


def locomo_questions(path: str, n: int) -> list[str]:
    """``n`` questions of the LoCoMo file ``path`` (cycled), each ``"<sample_id>\\t<question>"``."""
    import json

    with open(path, encoding="utf-8") as fh:
        samples = json.load(fh)
    every = [f"{s['sample_id']}\t{qa['question']}" for s in samples for qa in s["qa"]]
    return [every[i % len(every)] for i in range(n)]


def worker(root: str, tenant_slug: str, touch: str) -> None:
    """One side: each request is a list of ``"<sample_id>\\t<question>"`` (an empty sample id: no
    filter), each answer their ``memory_search`` latencies (ms), in the tenant ``tenant_slug`` with
    a reader agent (the ``locomo`` agent where the tenant has one, restricted to the sample's tag),
    ``touch`` (``"1"``) on or off."""

    def setup(stack: Any) -> Any:
        from django_tenants.utils import tenant_context

        from agents.models import Agent
        from memory.embeddings import embed_query
        from memory.semantic.selectors import MemoryFilters
        from memory.semantic.services.recall import memory_search

        tenant, agents, _ = bench_key(tenant_slug, ["bench-reader"])
        with tenant_context(tenant):
            agent = Agent.objects.filter(name="locomo").first() or agents["bench-reader"]
        policy = tenant.retrieval_policy

        def run(questions: list[str]) -> list[float]:
            out = []
            with tenant_context(tenant):
                for line in questions:
                    sample, _, q = line.partition("\t")
                    filters = MemoryFilters(tags_any=[sample]) if sample else None
                    embed_query.cache_clear()
                    t0 = time.perf_counter()
                    memory_search(agent=agent, query=q, policy=policy, filters=filters, touch=touch == "1")
                    out.append((time.perf_counter() - t0) * 1000)
            return out

        return run

    serve(root, setup, "memory.semantic.selectors")


if __name__ == "__main__":
    entry(worker=worker, driver=driver)
