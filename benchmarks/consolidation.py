"""Consolidation figures: a pass over 1M memories, summarising 100k events, async vs sync writes, and
what the level-1 summaries of LoCoMo keep.

- ``pass``: fills tenant ``bench_consolidation`` with N memories (``--memories``, default 1,000,000;
  SQL ``generate_series``, fixed seed): created 60 days ago, last accessed uniformly 0-60 days ago
  (so about two thirds fall below the default threshold p < 0.05, t > 3 S with S = 168 h), 1% with
  confidence 0.95, five accesses and a fact hint (promotion candidates). Vectors are 8-d, a
  dimension without an HNSW index, so the fill takes minutes instead of hours; ``--hnsw-sample``
  (default 20,000) repeats the forgetting pass over that many 384-d memories under the HNSW index to
  give the per-row cost of archiving a fully indexed memory (an archived row is rewritten: its
  index entries are added again), with random vectors; ``--memories 0`` runs that sample only.
  Prints each job's time and rows/s.
- ``summarize``: appends E events (``--events``, default 100,000) in sessions of 100, then times
  the summary pass (leaves, parents, summary memories embedded with the configured embedder).
- ``async``: W writes (``--writes``, default 1,000) through ``memory_create`` synchronously, then the
  same number (other texts, on an empty store again) with ``write="async"`` while a real Celery
  worker (``--concurrency`` processes, default 2 as ``./engram up`` runs it) drains them as
  deployed; ``--rounds`` (default 2) pairs side by side. Prints the embedder's own cost per text by call size (the ceiling), writes/s
  of both paths, the ratio (accepted, and end to end: first request -> last memory embedded,
  searchable), the delay until searchable (p50/p95/max), and (``--no-batches`` skips it) the same W
  written in batches of 500 (``memories_create``, the batch POST), embedded by the service and
  with client-supplied vectors.
- ``locomo``: every turn of ``../shared/data/locomo/locomo-dev5.json`` as an event (a session per
  LoCoMo session), the summary trees built, then, for each gold evidence turn of the category 1-4
  questions, how many of its named entities and numbers/dates (by the summarizer's own detectors)
  appear in the level-1 summary covering it, and the compression ratio (characters of the level-1
  summaries over characters of the events; of the whole tree too).

Needs PostgreSQL (with pgvector) and Redis: ``DATABASE_URL`` / ``REDIS_URL`` from the environment::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks consolidation pass|summarize|async|locomo
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from _common import ROOT, django_setup


def tenant(slug: str) -> Any:
    from tenants.services import tenant_create

    created, _ = tenant_create(slug=slug, name=f"Benchmark {slug}")
    return created


def fill_memories(count: int, dims: int, *, hint_every: int = 100) -> None:
    """``count`` memories of one agent (see the module docstring), in one statement per 100k."""
    from django.db import connection
    from django.utils import timezone

    from agents.models import Agent
    from agents.services import agent_create
    from core.tenancy import maintenance
    from memory.semantic.models import INDEXED_DIMENSIONS

    agent = Agent.objects.filter(name="bulk").first() or agent_create(by=None, name="bulk")
    now = timezone.now()
    # under an HNSW index, random vectors (one per row: the subquery's WHERE names i, so it runs per
    # row); the same vector for every row would make every distance 0, a degenerate graph to build
    vector = (
        "(SELECT array_agg(random()) FROM generate_series(1, %s) WHERE i IS NOT NULL)::vector"
        if dims in INDEXED_DIMENSIONS
        else "array_fill(0.05, ARRAY[%s])::vector"
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.42)")
        for start in range(0, count, 100_000):
            n = min(100_000, count - start)
            cursor.execute(
                "INSERT INTO memory_semanticmemory (id, agent_id, scope, memory_type, tags, visible_to_agents, "
                "visible_to_roles, content, content_hash, metadata, importance, confidence, embedding, "
                "embedding_model, embedding_dimensions, created_at, fact_hint, data_subject) "
                "SELECT gen_random_uuid(), %s, 'private', 'fact', '{}', '{}', '{}', "
                "'memory ' || i || ' about topic ' || (i %% 997), md5('m' || i || %s), '{}', 0.5, "
                "CASE WHEN i %% %s = 0 THEN 0.95 ELSE 0.8 END, "
                f"{vector}, 'bench', %s, %s, "
                "CASE WHEN i %% %s = 0 THEN jsonb_build_object('subject', 'entity ' || (i %% 5000), "
                "'predicate', 'related_to', 'object', jsonb_build_object('entity', 'thing ' || i)) END, '' "
                "FROM generate_series(%s, %s) i",
                [
                    agent.pk,
                    dims,
                    hint_every,
                    dims,
                    dims,
                    now - timedelta(days=60),
                    hint_every,
                    start + 1,
                    start + n,
                ],
            )
            cursor.execute(
                "INSERT INTO memory_memoryaccess (memory_id, last_accessed_at, access_count, stability_hours) "
                "SELECT m.id, %s - random() * interval '60 days', CASE WHEN m.confidence > 0.9 THEN 5 ELSE 0 END, "
                "168 FROM memory_semanticmemory m LEFT JOIN memory_memoryaccess a ON a.memory_id = m.id "
                "WHERE a.memory_id IS NULL",
                [now],
            )
            print(f"  filled {start + n:,} memories", flush=True)
    with maintenance(), connection.cursor() as cursor:  # ANALYZE is the tables' owner's
        cursor.execute("ANALYZE memory_semanticmemory")
        cursor.execute("ANALYZE memory_memoryaccess")


def timed_run(job: Any) -> tuple[float, dict[str, int]]:
    started = time.perf_counter()
    run = job()
    return time.perf_counter() - started, dict(run.counts if run else {})


def bench_pass(args: argparse.Namespace) -> None:
    from django.db import connection
    from django_tenants.utils import tenant_context

    from core.tenancy import maintenance
    from memory.consolidation.services.forgetting import forgetting_pass
    from memory.consolidation.services.promotion import promotion_pass
    from memory.consolidation.services.summaries import summaries_pass
    from memory.semantic.models import SemanticMemory

    if args.memories:  # 0: the HNSW sample only
        t = tenant("bench_consolidation")
        with tenant_context(t):
            have = SemanticMemory.objects.count()
            # TRUNCATE is the tables' owner's (a tenant's role may not)
            with maintenance(), connection.cursor() as cursor:
                cursor.execute(
                    "TRUNCATE memory_promotion, memory_consolidationrun, memory_summarynode, memory_fact, "
                    "memory_factprovenance, memory_contradiction, memory_graphoutbox, memory_entity CASCADE"
                )
                if have != args.memories:
                    cursor.execute("TRUNCATE memory_memoryaccess CASCADE")
                    cursor.execute("DELETE FROM memory_semanticmemory")
            if have != args.memories:
                started = time.perf_counter()
                fill_memories(args.memories, 8)
                print(f"fill: {time.perf_counter() - started:.0f} s")
            else:
                SemanticMemory.objects.filter(archived_at__isnull=False).update(
                    archived_at=None
                )  # archive again
                with maintenance(), connection.cursor() as cursor:
                    cursor.execute("VACUUM ANALYZE memory_semanticmemory")
            total = 0.0
            for name, job in (
                ("promotion", promotion_pass),
                ("forgetting", forgetting_pass),
                ("summaries", summaries_pass),
            ):
                took, counts = timed_run(job)
                total += took
                print(f"{name}: {took:.1f} s  {counts}  ({args.memories / took:,.0f} memories/s)")
            print(f"consolidation pass over {args.memories:,} memories: {total:.1f} s ({total / 60:.1f} min)")
    if args.hnsw_sample:
        t = tenant("bench_consolidation_hnsw")
        with tenant_context(t):
            if SemanticMemory.objects.count() != args.hnsw_sample:
                with maintenance(), connection.cursor() as cursor:
                    cursor.execute("TRUNCATE memory_consolidationrun, memory_memoryaccess CASCADE")
                    cursor.execute("DELETE FROM memory_semanticmemory")
                started = time.perf_counter()
                fill_memories(args.hnsw_sample, 384, hint_every=10**9)
                print(
                    f"fill of {args.hnsw_sample:,} 384-d memories under HNSW: {time.perf_counter() - started:.0f} s"
                )
            else:
                SemanticMemory.objects.update(archived_at=None)
            took, counts = timed_run(forgetting_pass)
            per_row = took / max(1, counts.get("archived", 1)) * 1000
            print(
                f"forgetting over {args.hnsw_sample:,} HNSW-indexed 384-d memories: {took:.1f} s {counts} "
                f"({per_row:.2f} ms per archived row)"
            )


def bench_summarize(args: argparse.Namespace) -> None:
    from django.db import connection
    from django.utils import timezone
    from django_tenants.utils import tenant_context

    from agents.models import Agent
    from agents.services import agent_create
    from core.tenancy import maintenance
    from memory.consolidation.services.summaries import summaries_pass
    from memory.episodic.models import Event
    from memory.episodic.services import EventData, events_append

    t = tenant("bench_summaries")
    with tenant_context(t):
        agent = Agent.objects.filter(name="talker").first() or agent_create(by=None, name="talker")
        have = Event.objects.count()
        if have < args.events:
            now = timezone.now()
            lines = [
                "Alice asked Bob to move the Lisbon meeting to Thursday at 3pm.",
                "We must keep the budget under 12,000 EUR for the Q3 campaign.",
                "Thanks, that sounds good to me!",
                "The deploy of version 4.2.1 finished in 37 minutes without errors.",
                "Never send customer data to the staging cluster.",
                "Priya from Acme confirmed the contract renewal for 2027.",
            ]
            for start in range(have, args.events, 1000):
                batch = []
                for i in range(start, min(start + 1000, args.events)):
                    kind = ("message", "message", "tool_call", "tool_result", "decision")[i % 5]
                    batch.append(
                        EventData(
                            session_id=f"bench-{i // 100}",
                            kind=kind,
                            role="tool" if kind == "tool_result" else "user",
                            content=f"{lines[i % len(lines)]} (turn {i})",
                            occurred_at=now,
                        )
                    )
                events_append(agent=agent, events=batch)
            print(f"appended {args.events - have:,} events", flush=True)
        with maintenance(), connection.cursor() as cursor:
            cursor.execute("TRUNCATE memory_summarynode, memory_consolidationrun CASCADE")
            cursor.execute(
                "DELETE FROM memory_memoryaccess WHERE memory_id IN "
                "(SELECT id FROM memory_semanticmemory WHERE memory_type = 'summary')"
            )
            cursor.execute("DELETE FROM memory_semanticmemory WHERE memory_type = 'summary'")
        took, counts = timed_run(summaries_pass)
        print(f"summary pass: {took:.1f} s {counts}: {counts.get('events', 0) / took:,.0f} events/s")


@contextlib.contextmanager
def celery_worker(concurrency: int) -> Iterator[subprocess.Popen[bytes]]:
    """A real Celery worker on the bench database and Redis, as ``./engram up`` starts one (prefork,
    ``concurrency`` processes, each with its embedder; 1: ``--pool solo``), its queue purged first;
    stopped on exit."""
    from config.celery import app

    app.control.purge()
    pool = ["--pool", "solo"] if concurrency == 1 else ["--concurrency", str(concurrency)]
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", *pool, "--loglevel", "WARNING"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_DEBUG": "false"},
    )
    try:
        deadline = time.monotonic() + 120
        while not app.control.ping(timeout=0.5):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the Celery worker did not start")
        yield worker
    finally:
        worker.terminate()
        worker.wait(30)


def embedder_threads() -> str:
    from django.conf import settings

    return str(settings.ENGRAM["EMBEDDING_THREADS"] or "one per core")


def bench_async(args: argparse.Namespace) -> None:
    import threading

    import numpy as np
    from django.db import connection
    from django_tenants.utils import tenant_context

    from agents.models import Agent
    from agents.services import agent_create
    from core.tenancy import maintenance
    from memory.embeddings import get_embedder
    from memory.semantic.models import SemanticMemory
    from memory.semantic.services.writes import MemoryData, memories_create, memory_create

    t = tenant("bench_async")
    policy = t.retrieval_policy
    embedder = get_embedder()
    topics = ["invoice", "deploy", "meeting", "customer", "contract", "incident", "budget", "travel"]

    def text(i: int, tag: str) -> str:
        return f"{tag} note {i}: the {topics[i % 8]} of team {i % 37} is tracked under ticket {i * 7919 % 100000}."

    def reset() -> None:
        with maintenance(), connection.cursor() as cursor:
            cursor.execute("TRUNCATE memory_memoryaccess CASCADE")
            cursor.execute("DELETE FROM memory_semanticmemory")

    def pending() -> int:
        return SemanticMemory.objects.filter(embedding_dimensions=0, forgotten_at__isnull=True).count()

    n = args.writes
    print(f"worker processes: {args.concurrency}; ONNX threads per process: {embedder_threads()}")
    with tenant_context(t), celery_worker(args.concurrency):
        reset()
        agent = Agent.objects.filter(name="writer").first() or agent_create(by=None, name="writer")
        embedder.embed(["warm-up"])
        for size in (1, 32, 64, 128, 256):  # the ceiling: the embedder's own cost per text by call size
            texts = [text(i, f"probe-{size}") for i in range(256)]
            started = time.perf_counter()
            for start in range(0, 256, size):
                embedder.embed(texts[start : start + size])
            per_text = (time.perf_counter() - started) / 256 * 1000
            print(
                f"embedder alone, calls of {size}: {per_text:.2f} ms per text  (load {os.getloadavg()[0]:.1f})"
            )
        # the worker loads its embedder on its first task
        memory_create(agent=agent, data=MemoryData(content="warm-up"), policy=policy, write="async")
        while pending():
            time.sleep(0.1)

        for round_ in range(args.rounds):  # sync and async side by side, each on an empty store
            reset()
            started = time.perf_counter()
            for i in range(n):
                memory_create(agent=agent, data=MemoryData(content=text(i, f"r{round_}")), policy=policy)
            sync = time.perf_counter() - started
            live = SemanticMemory.objects.filter(forgotten_at__isnull=True).count()
            print(
                f"[{round_}] sync (accepted = embedded = searchable): {n / sync:,.1f} writes/s ({sync:.1f} s); "
                f"{live} live memories  (load {os.getloadavg()[0]:.1f})"
            )

            # async, the same texts on an empty store again (so the same memories must stay live): the
            # client writes while the real worker (another process) drains; a thread of this process
            # counts what is still pending every 20 ms
            reset()
            accepted_at: list[float] = []
            drained: list[tuple[float, int]] = []  # (when, how many of the writes were embedded or merged)
            done = threading.Event()

            def watch(
                accepted_at: list[float], drained: list[tuple[float, int]], done: threading.Event
            ) -> None:
                with tenant_context(t):
                    while True:
                        written = len(accepted_at)  # committed before the count below starts
                        left = pending()
                        drained.append((time.perf_counter(), written - left))
                        if done.is_set() and written == n and left == 0:
                            break
                        time.sleep(0.02)
                connection.close()

            watcher = threading.Thread(target=watch, args=(accepted_at, drained, done))
            started = time.perf_counter()
            watcher.start()
            for i in range(n):
                memory_create(
                    agent=agent,
                    data=MemoryData(content=text(i, f"r{round_}")),
                    policy=policy,
                    write="async",
                )
                accepted_at.append(time.perf_counter())
            accepted = time.perf_counter() - started
            done.set()
            watcher.join()
            end_to_end = drained[-1][0] - started
            delays, k = [], 0
            for i, at in enumerate(accepted_at):  # oldest first: memory i is embedded once the count passes i
                while drained[k][1] <= i:
                    k += 1
                delays.append(drained[k][0] - at)
            p50, p95 = np.percentile(delays, [50, 95])
            live = SemanticMemory.objects.filter(forgotten_at__isnull=True).count()
            print(f"[{round_}] async accepted: {n / accepted:,.1f} writes/s ({accepted:.1f} s)")
            print(
                f"[{round_}] async end to end (first request -> last embedded, searchable): "
                f"{n / end_to_end:,.1f} writes/s ({end_to_end:.1f} s); delay until searchable "
                f"p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms; "
                f"{live} live memories  (load {os.getloadavg()[0]:.1f})"
            )
            print(
                f"[{round_}] ratio async/sync: accepted {sync / accepted:.1f}x, end to end {sync / end_to_end:.1f}x"
            )

        if not args.batches:
            return
        # the same writes in batches of 500 (POST /api/v1/memories with an array: one embedder call each)
        for label, vectors in (("embedded by the service", False), ("client-supplied vectors", True)):
            texts = [text(i, f"batch-{vectors}") for i in range(n)]
            supplied = embedder.embed(texts) if vectors else None
            started = time.perf_counter()
            for start in range(0, n, 500):
                memories_create(
                    agent=agent,
                    items=[
                        MemoryData(
                            content=texts[i],
                            embedding=supplied[i].tolist() if supplied is not None else None,
                        )
                        for i in range(start, min(n, start + 500))
                    ],
                    policy=policy,
                    batch=True,
                )
            took = time.perf_counter() - started
            print(f"batches of 500, {label}: {n / took:,.0f} memories/s ({took:.1f} s, dedup on)")


def bench_locomo(args: argparse.Namespace) -> None:
    from django.db import connection
    from django_tenants.utils import tenant_context

    from agents.models import Agent
    from agents.services import agent_create
    from benchmarks.locomo import clean_evidence, iter_turns
    from core.tenancy import maintenance
    from memory.consolidation.models import SummaryNode
    from memory.consolidation.services.summaries import summaries_pass
    from memory.consolidation.summarizer import entities, numbers_and_dates
    from memory.episodic.models import Event
    from memory.episodic.services import EventData, events_append

    data = json.loads(open(args.path).read())
    t = tenant("bench_locomo_summaries")
    with tenant_context(t):
        with maintenance(), connection.cursor() as cursor:
            cursor.execute("TRUNCATE memory_summarynode, memory_consolidationrun CASCADE")
            cursor.execute(
                "DELETE FROM memory_memoryaccess WHERE memory_id IN "
                "(SELECT id FROM memory_semanticmemory WHERE memory_type = 'summary')"
            )
            cursor.execute("DELETE FROM memory_semanticmemory WHERE memory_type = 'summary'")
        agent = Agent.objects.filter(name="locomo").first() or agent_create(by=None, name="locomo")
        turn_event: dict[tuple[str, str], tuple[str, int]] = {}
        text_of: dict[tuple[str, str], str] = {}
        if not Event.objects.exists():
            for sample in data:
                turns = list(iter_turns(sample))
                events = events_append(
                    agent=agent,
                    events=[
                        EventData(
                            session_id=f"{turn.sample_id}:{turn.session_key}",
                            kind="message",
                            role="user",
                            content=turn.text,
                            occurred_at=turn.occurred_at,
                            payload={"speaker": turn.speaker, "dia_id": turn.dia_id},
                        )
                        for turn in turns
                    ],
                )
                print(f"  {sample['sample_id']}: {len(events)} turns", flush=True)
        for e in Event.objects.all().only("seq", "session_id", "payload_json", "content"):
            key = (e.session_id.split(":")[0], e.payload["dia_id"])
            turn_event[key] = (e.session_id, e.seq)
            text_of[key] = e.content
        took, counts = timed_run(summaries_pass)
        print(f"summary trees: {took:.1f} s {counts}")
        leaves = list(SummaryNode.objects.filter(level=1))
        by_session: dict[str, list[SummaryNode]] = {}
        for leaf in leaves:
            by_session.setdefault(leaf.session_id, []).append(leaf)
        ent_total = ent_kept = num_total = num_kept = turns_total = turns_all = 0
        for sample in data:
            sid = sample["sample_id"]
            known = {d for (s, d) in turn_event if s == sid}
            for qa in sample.get("qa", []):
                if qa.get("category") not in (1, 2, 3, 4):
                    continue
                gold, _ = clean_evidence(qa.get("evidence"), known)
                for dia in gold:
                    session_id, seq = turn_event[(sid, dia)]
                    leaf = next(n for n in by_session[session_id] if n.first_seq <= seq <= n.last_seq)
                    text = text_of[(sid, dia)]
                    names, numbers = entities(text), numbers_and_dates(text)
                    kept_names = [n for n in names if n in leaf.content]
                    kept_numbers = [n for n in numbers if n in leaf.content]
                    ent_total, ent_kept = ent_total + len(names), ent_kept + len(kept_names)
                    num_total, num_kept = num_total + len(numbers), num_kept + len(kept_numbers)
                    turns_total += 1
                    turns_all += len(kept_names) == len(names) and len(kept_numbers) == len(numbers)
        source_chars = sum(len(c) for c in text_of.values())
        leaf_chars = sum(len(n.content) for n in leaves)
        tree_chars = sum(len(n.content) for n in SummaryNode.objects.all())
        print(f"gold evidence turns (categories 1-4, with repeats): {turns_total}")
        print(
            f"  entities kept in their level-1 summary: {ent_kept}/{ent_total} = {ent_kept / max(1, ent_total):.1%}"
        )
        print(f"  numbers and dates kept: {num_kept}/{num_total} = {num_kept / max(1, num_total):.1%}")
        print(f"  turns with every entity and number kept: {turns_all / max(1, turns_total):.1%}")
        print(
            f"compression: level 1 {leaf_chars / source_chars:.2f} of the events' characters "
            f"({source_chars:,} -> {leaf_chars:,}); whole tree {tree_chars / source_chars:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("pass")
    p.add_argument("--memories", type=int, default=1_000_000)
    p.add_argument("--hnsw-sample", type=int, default=20_000)
    s = sub.add_parser("summarize")
    s.add_argument("--events", type=int, default=100_000)
    a = sub.add_parser("async")
    a.add_argument("--writes", type=int, default=1_000)
    a.add_argument("--rounds", type=int, default=2)
    a.add_argument("--concurrency", type=int, default=2)
    a.add_argument("--batches", action=argparse.BooleanOptionalAction, default=True)
    lo = sub.add_parser("locomo")
    lo.add_argument("--path", default=str(ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev5.json"))
    args = parser.parse_args()
    django_setup()
    print(f"load average: {os.getloadavg()}", file=sys.stderr)
    {"pass": bench_pass, "summarize": bench_summarize, "async": bench_async, "locomo": bench_locomo}[
        args.what
    ](args)
    print(f"load average: {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
