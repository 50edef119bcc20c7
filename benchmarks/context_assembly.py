"""Context assembly latency (``memory.context.services.context_build``, the service layer) with
100,000 memories and 10,000 events in the tenant; target p95 at most 50 ms.

The tenant ``bench_context_<N>`` gets N synthetic memories (``search_latency.fill``, the seed of
``search_latency.py``, so the vectors cached by one serve the other: the corpus of
``benchmarks/corpus.py``, four agents, half shared), 10,000 events over 20 sessions of 500 turns,
facts about the corpus's people, a blackboard and a scratchpad of ten fields each and a window of
20 turns for the measured execution and session. Then ``context_build`` runs for distinct questions
(budget 1,000 tokens; the query embedding computed per call: the ``embed_query`` cache is cleared)
after a warm-up, and the script prints p50/p95/p99, with the sizes of what was assembled and the
saving reported against the whole history (M = 500 turns, and the window's 20 once they reach the
log). A rerun adds no turns while the window lives (an hour) and no facts, so it measures the same
data.

Needs PostgreSQL (with pgvector) and Redis, as ``benchmarks/search_latency.py`` says::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks context_assembly --memories 100000

``ENGRAM_EMBEDDER=model2vec ENGRAM_EMBEDDING_MODEL_PATH=../shared/models/minilm-static-256`` fills
in minutes instead of a quarter of an hour (the query embedding is then ~0.1 ms instead of ~3 ms).
"""

from __future__ import annotations

import argparse
import os
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import corpus
from _common import bench_key, django_setup, percentiles

SESSIONS = 20
TURNS = 500


def fill_events(agent: Any, tenant: Any) -> None:
    from django_tenants.utils import tenant_context

    from memory.episodic.models import Event
    from memory.episodic.services import EventData, events_append

    with tenant_context(tenant):
        if Event.objects.count() >= SESSIONS * TURNS:
            print("  events already there", flush=True)
            return
        texts = corpus.memories(SESSIONS * TURNS, seed=7)
        start = datetime(2026, 1, 1, tzinfo=UTC)
        t0 = time.perf_counter()
        for s in range(SESSIONS):
            batch = [
                EventData(
                    session_id=f"ctx-session-{s}",
                    kind="message",
                    role="user" if i % 2 == 0 else "assistant",
                    content=texts[s * TURNS + i],
                    occurred_at=start + timedelta(minutes=s * TURNS + i),
                )
                for i in range(TURNS)
            ]
            events_append(agent=agent, events=batch)
        print(f"  {SESSIONS * TURNS:,} events in {time.perf_counter() - t0:,.0f} s", flush=True)


def fill_working_and_facts(agent: Any, tenant: Any) -> None:
    from django_tenants.utils import tenant_context

    from memory.knowledge.models import Fact
    from memory.knowledge.services import FactData, FactObject, fact_assert
    from memory.working import services as working

    with tenant_context(tenant):
        policy = tenant.working_memory_policy
        for i in range(10):
            working.scratchpad_write(
                agent=agent,
                execution_id="ctx-exec",
                key=f"note{i}",
                value=f"note {i}",
                policy=policy,
            )
            working.blackboard_write(
                agent=agent,
                execution_id="ctx-exec",
                name=f"field{i}",
                value={"i": i},
                policy=policy,
            )
        # once: each turn also lands in the session's log, so appending on every run would grow
        # the measured session (and its latest events would become these short turns)
        if not working.window_read(agent=agent, session_id="ctx-session-0", last=1):
            for i in range(20):
                working.window_append(
                    agent=agent,
                    session_id="ctx-session-0",
                    role="user",
                    content=f"recent turn {i}",
                    policy=policy,
                )
        if Fact.objects.exists():  # asserted again, random cities would pile up disputes
            return
        for name in corpus.FIRST[:30]:
            fact_assert(
                agent=agent,
                data=FactData(
                    subject=name, predicate="lives_in", object=FactObject(entity=random.choice(corpus.CITIES))
                ),
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    django_setup()
    import search_latency
    from django_tenants.utils import tenant_context

    from memory.context.services import context_build
    from memory.embeddings import embed_query, get_embedder

    tenant, agents, _ = bench_key(f"bench_context_{args.memories}", search_latency.AGENTS)
    reader = agents[search_latency.READER]
    print(f"filling {tenant.schema_name} ({get_embedder().name})", flush=True)
    search_latency.fill(tenant, agents, args.memories, seed=42, jobs=args.jobs)
    fill_events(reader, tenant)
    fill_working_and_facts(reader, tenant)

    questions = corpus.questions(args.queries + 20, seed=3)
    timings = []
    with tenant_context(tenant):
        from memory.episodic.models import Event
        from memory.semantic.models import SemanticMemory

        print(f"  {SemanticMemory.objects.count():,} memories, {Event.objects.count():,} events", flush=True)
        last = None
        for i, question in enumerate(questions):
            embed_query.cache_clear()
            t0 = time.perf_counter()
            last = context_build(
                agent=reader,
                tenant=tenant,
                session_id="ctx-session-0",
                execution_id="ctx-exec",
                query=question,
                budget=args.budget,
            )
            if i >= 20:  # warm-up
                timings.append((time.perf_counter() - t0) * 1000)
    p = percentiles(timings)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"context_build (service), {len(timings)} queries, budget {args.budget}: "
        f"p50 {p['p50']:.1f} ms, p95 {p['p95']:.1f} ms, p99 {p['p99']:.1f} ms (load average {load})"
    )
    assert last is not None
    print(
        f"  last: {last.tokens_used} tokens in {len(last.sections)} sections, {last.candidates} candidates, "
        f"{last.duplicates_merged} merged, {last.dropped} dropped; history M={last.history_turns}, "
        f"full history {last.full_history_tokens:,} tokens, T_total {last.cumulative_full_history_tokens:,}"
    )


if __name__ == "__main__":
    main()
