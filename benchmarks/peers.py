"""Engram side by side with the stores users would pick instead, on the same PostgreSQL, in one run.

Peers (the optional ``peers`` extra: ``.venv/bin/pip install -e '.[peers]'``; never in CI):

- mem0 (``mem0ai``) with ``infer=False``, its pgvector store (HNSW), the same embedder as Engram
  (Engram's ONNX all-MiniLM-L6-v2 behind mem0's embedder interface) and an LLM that raises if
  called, so no call can happen. Without spaCy (its lemmatiser and entity extraction are optional
  and their models cannot be downloaded here) mem0's keyword side matches unlemmatised text;
- LangGraph ``PostgresStore`` (HNSW, cosine; the same embedder) and ``PostgresSaver``.

Each system gets the same corpus (``benchmarks/corpus.py``, the vectors cached by
``search_latency.py``) in its own schema or table of the one database; Engram's tenant is
``bench_search_<N>`` (shared with ``search_latency.py``); these corpora are kept for the next run.
The writes go into an empty tenant, schema or table per system and run (``bench_peers_writes_<hex>``,
``peer_langgraph_writes_<hex>``, ``peer_mem0_writes_<hex>``), dropped at the end, even after an
error. Rounds are interleaved: round r runs
every system on its slice of the questions before round r + 1 starts, so a change in the machine's
load hits all of them alike. Measures:

- search, k=10, the query embedded per call (Engram: ``memory_search`` with ``touch`` on, as the
  API calls it), p50 / p95 ms;
- memory writes per second, one client, the normal add path (Engram: ``memory_create`` with
  dedup; mem0: ``add(infer=False)``; LangGraph: ``put`` with its index), each embedding its text;
- checkpoint save (Engram: ``checkpoint_save`` into PostgreSQL, then Redis after the commit;
  LangGraph: ``PostgresSaver.put``) and latest restore (Engram from Redis, and from PostgreSQL with
  the Redis copy deleted first, untimed, and re-warmed after the answer, untimed, as the API does
  once its response is sent; LangGraph: ``get_tuple``) p50 / p99 ms, the ~2 KiB state and 5-step
  plan of ``checkpoint_restore.py``.

Then one line per measure with Engram's ratio to each peer (below 1: Engram is faster) and the load
average. Needs PostgreSQL (pgvector) and Redis from the environment::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks peers --sizes 10000,100000

``--checkpoints-only`` measures the checkpoints alone (``--rounds 8``); with ``--base <checkout>``
(e.g. ``/work/main``) that checkout's Engram runs in a worker process in the same interleaved
rounds, for a before / after in one run (its code, this checkout's harness and virtualenv). Each
worker prints the file its ``memory.checkpoints.services`` came from, and the run stops if any module
of the project's packages in a worker came from outside that worker's checkout.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import random
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import corpus
import numpy as np
from _ab import Side, serve, worker_root
from _common import ROOT, bench_key, django_setup, drop_tenant, percentiles

os.environ.setdefault("MEM0_TELEMETRY", "False")

WRITES_PER_ROUND = 60
CHECKPOINTS_PER_ROUND = 300


def _libpq_url(schema: str) -> str:
    """``DATABASE_URL`` for psycopg with ``search_path`` set to ``schema`` (then public, for pgvector)."""
    url = os.environ["DATABASE_URL"].replace("postgres://", "postgresql://", 1)
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema},public')}"


def _ensure_schema(schema: str) -> None:
    from django.db import connection

    connection.set_schema_to_public()  # type: ignore[attr-defined]  # django-tenants' wrapper
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')


class Vectors:
    """The embedder with the corpus vectors as a lookup (fills must not re-embed 100k texts)."""

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        from memory.embeddings import get_embedder

        self.embedder = get_embedder()
        self.known = dict(zip(texts, vectors, strict=True))

    def fill(self, texts: list[str]) -> list[list[float]]:
        return [self.known[t].tolist() for t in texts]

    def fresh(self, texts: list[str]) -> list[list[float]]:
        return [v.tolist() for v in self.embedder.embed(list(texts))]


# --- the systems --------------------------------------------------------------------------------------


class Engram:
    name = "Engram"

    def __init__(self, n: int, texts: list[str], vectors: Vectors | None, seed: int) -> None:
        """``vectors`` ``None``: checkpoints only (no corpus, no writes)."""
        from django_tenants.utils import tenant_context
        from search_latency import AGENTS, READER, fill

        from tenants.services import tenant_create

        if vectors is not None:
            self.tenant, agents, _ = bench_key(f"bench_search_{n}", AGENTS)
            fill(self.tenant, agents, n, seed, jobs=2)
            self.reader = agents[READER]
            self.writes, wagents, _ = bench_key(f"bench_peers_writes_{uuid.uuid4().hex[:6]}", ["writer"])
            self.writer = wagents["writer"]
        self.ckpt, _ = tenant_create(slug="bench_peers_ckpt", name="Benchmark peers checkpoints")
        with tenant_context(self.ckpt):
            from agents.models import Agent
            from agents.services import agent_create

            self.ckpt_agent = Agent.objects.filter(name="saver").first() or agent_create(
                by=None, name="saver"
            )
        self.context = tenant_context

    def close(self) -> None:
        """Drop this run's writes tenant (its schema and role); the corpus tenant is kept for the next run."""
        if hasattr(self, "writes"):
            drop_tenant(self.writes)

    def search(self, query: str) -> int:
        from memory.embeddings import embed_query
        from memory.semantic.services.recall import memory_search

        embed_query.cache_clear()  # the query embedded per call
        with self.context(self.tenant):
            return len(memory_search(agent=self.reader, query=query, policy=self.tenant.retrieval_policy))

    def write(self, text: str) -> None:
        from memory.semantic.services.writes import MemoryData, memory_create

        with self.context(self.writes):
            memory_create(
                agent=self.writer, data=MemoryData(content=text), policy=self.writes.retrieval_policy
            )

    def save(self, session: str, step: int, state: dict, plan: list) -> None:
        from memory.checkpoints.services import checkpoint_save

        with self.context(self.ckpt):
            result = checkpoint_save(
                agent=self.ckpt_agent,
                session_id=session,
                step_index=step,
                idempotency_key=f"{session}-{step}",
                state=state,
                plan=plan,
                policy=self.ckpt.working_memory_policy,
            )
            assert result.cached, "the Redis copy was not written"

    def restore(self, session: str, cold: bool) -> Callable[[], None]:
        """A restore of ``session``'s latest; with ``cold`` its Redis copy is deleted now (untimed).

        As the API answers a PostgreSQL restore before it re-warms the Redis copy (once the
        response is sent), the call asks for the re-warm deferred (``defer_rewarm``, where the
        checkout has it) and runs it here, at the next restore's setup, untimed."""
        import inspect

        from core.redis import get_redis
        from memory.checkpoints.services import cache_key, checkpoint_latest

        rewarm, self._rewarm = getattr(self, "_rewarm", None), None
        assert rewarm is None or rewarm(), "the Redis copy was not re-warmed"
        deferred = "defer_rewarm" in inspect.signature(checkpoint_latest).parameters
        defer: dict[str, Any] = {"defer_rewarm": True} if deferred else {}
        with self.context(self.ckpt):
            if cold:
                get_redis().delete(cache_key(session, self.ckpt_agent.pk))

        def call() -> None:
            with self.context(self.ckpt):
                restored = checkpoint_latest(
                    agent=self.ckpt_agent,
                    session_id=session,
                    policy=self.ckpt.working_memory_policy,
                    **defer,
                )
            assert restored.source == ("postgres" if cold else "redis") and restored.body
            self._rewarm = getattr(restored, "rewarm", None)

        return call


class LangGraph:
    name = "LangGraph"

    def __init__(self, n: int, texts: list[str], vectors: Vectors | None) -> None:
        """``vectors`` ``None``: the saver only (no store)."""
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.base import PutOp
        from langgraph.store.postgres import PostgresStore
        from psycopg import Connection
        from psycopg.rows import dict_row

        kw: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        _ensure_schema("peer_langgraph_ckpt")
        self.saver = PostgresSaver(Connection.connect(_libpq_url("peer_langgraph_ckpt"), **kw))
        self.saver.setup()
        if vectors is None:
            return
        self.vectors = vectors
        self._filling = True

        def embed(batch: list[str]) -> list[list[float]]:
            return vectors.fill(batch) if self._filling else vectors.fresh(batch)

        index: Any = {"dims": vectors.embedder.dimensions, "embed": embed, "fields": ["text"]}
        schema = f"peer_langgraph_{n}"
        _ensure_schema(schema)
        conn: Any = Connection.connect(_libpq_url(schema), **kw)
        self.store = PostgresStore(conn, index=index)
        self.store.setup()
        have = conn.execute("SELECT count(*) AS n FROM store").fetchone()["n"]
        if have < n:
            print(f"  LangGraph: putting {n - have:,} memories into {schema}...", flush=True)
            for start in range(have, n, 500):
                ops = [
                    PutOp(("memories", f"owner{i % 4}"), str(i), {"text": texts[i]})
                    for i in range(start, min(n, start + 500))
                ]
                self.store.batch(ops)
            conn.execute("ANALYZE store")
            conn.execute("ANALYZE store_vectors")
        self._filling = False
        self.writes_schema = f"peer_langgraph_writes_{uuid.uuid4().hex[:6]}"  # fresh, as Engram's and mem0's
        _ensure_schema(self.writes_schema)
        self.writes_conn: Any = Connection.connect(_libpq_url(self.writes_schema), **kw)
        self.writes = PostgresStore(self.writes_conn, index=index)
        self.writes.setup()

    def close(self) -> None:
        """Drop this run's writes schema; the corpus schema and the saver's are kept."""
        schema = getattr(self, "writes_schema", None)
        if schema is not None:  # by the connection that made its tables (their owner)
            self.writes_conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            self.writes_conn.close()

    def search(self, query: str) -> int:
        return len(self.store.search(("memories",), query=query, limit=10))

    def write(self, text: str) -> None:
        self.writes.put(("memories", "writer"), uuid.uuid4().hex, {"text": text})

    def save(self, session: str, step: int, state: dict, plan: list) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"state": state, "plan": plan}
        checkpoint["channel_versions"] = {"state": str(step), "plan": str(step)}
        config = {"configurable": {"thread_id": session, "checkpoint_ns": ""}}
        self.saver.put(config, checkpoint, {"step": step}, {"state": str(step), "plan": str(step)})  # type: ignore[arg-type]

    def restore(self, session: str, cold: bool) -> Callable[[], None]:
        config = {"configurable": {"thread_id": session, "checkpoint_ns": ""}}

        def call() -> None:
            found = self.saver.get_tuple(config)  # type: ignore[arg-type]
            assert found is not None and found.checkpoint["channel_values"]["state"]

        return call


class Mem0:
    name = "mem0"

    def __init__(self, n: int, texts: list[str], vectors: Vectors) -> None:
        import hashlib

        from mem0 import Memory
        from mem0.configs.base import MemoryConfig

        class Embedder:
            """mem0's embedder interface around Engram's (the corpus lookup while filling)."""

            filling = True

            def embed(self, text: str, memory_action: str | None = None) -> list[float]:
                if self.filling and text in vectors.known:
                    return vectors.known[text].tolist()
                return vectors.fresh([text])[0]

        class NoLLM:
            def generate_response(self, *args: Any, **kwargs: Any) -> str:
                raise RuntimeError("the benchmark runs mem0 with infer=False: no LLM call may happen")

        def make(collection: str) -> Any:
            config = MemoryConfig(
                vector_store={
                    "provider": "pgvector",
                    "config": {
                        "connection_string": _libpq_url("public"),
                        "collection_name": collection,
                        "embedding_model_dims": vectors.embedder.dimensions,
                        "hnsw": True,
                    },
                },
                embedder={"provider": "openai", "config": {"api_key": "unused"}},  # replaced below
                llm={"provider": "openai", "config": {"api_key": "unused"}},
                history_db_path=f"/tmp/mem0-history-{collection}.db",
            )
            logging.getLogger("mem0").setLevel(logging.WARNING)  # a line per inserted batch otherwise
            memory = Memory(config)
            memory.embedding_model = self.embedder
            memory.llm = NoLLM()
            return memory

        self.embedder = Embedder()
        self.memory = make(f"peer_mem0_{n}")
        store = self.memory.vector_store
        store._ensure_collection()  # mem0 creates its table on first use
        with store._get_cursor() as cur:
            cur.execute(f"SELECT count(*) FROM peer_mem0_{n}")
            have = cur.fetchone()[0]
        if have < n:
            print(f"  mem0: inserting {n - have:,} memories into peer_mem0_{n}...", flush=True)
            # the rows add(infer=False) writes, in batches (mem0 inserts one row per call)
            for start in range(have, n, 500):
                batch = range(start, min(n, start + 500))
                store.insert(
                    vectors=[vectors.known[texts[i]].tolist() for i in batch],
                    payloads=[
                        {
                            "data": texts[i],
                            "text_lemmatized": texts[i],
                            "hash": hashlib.md5(texts[i].encode()).hexdigest(),
                            "user_id": "bench",
                            "created_at": "2026-12-01T00:00:00+00:00",
                            "role": "user",
                        }
                        for i in batch
                    ],
                    ids=[str(uuid.uuid5(uuid.NAMESPACE_URL, f"mem0-{i}")) for i in batch],
                )
            with store._get_cursor(commit=True) as cur:
                cur.execute(f"ANALYZE peer_mem0_{n}")
        self.embedder.filling = False
        self.writes_collection = f"peer_mem0_writes_{uuid.uuid4().hex[:6]}"
        self.writes = make(self.writes_collection)

    def close(self) -> None:
        """Drop this run's writes table (mem0 makes one table per collection, in public) and its
        history file; the corpus collection is kept for the next run."""
        with self.writes.vector_store._get_cursor(commit=True) as cursor:  # the table's owner
            cursor.execute(f'DROP TABLE IF EXISTS public."{self.writes_collection}"')
        Path(f"/tmp/mem0-history-{self.writes_collection}.db").unlink(missing_ok=True)

    def search(self, query: str) -> int:
        return len(self.memory.search(query, filters={"user_id": "bench"}, top_k=10)["results"])

    def write(self, text: str) -> None:
        self.writes.add([{"role": "user", "content": text}], user_id="writer", infer=False)


# --- the run ---------------------------------------------------------------------------------------------


def _time(call: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000


def _checkpoint_round(system: Any, rng: random.Random, latencies: dict[tuple[str, str], list[float]]) -> None:
    """``CHECKPOINTS_PER_ROUND`` new sessions of two saves each, then each one's latest restored
    from the hot copy, then from PostgreSQL (Engram's Redis copy deleted first, untimed)."""
    from checkpoint_restore import make_state

    name = system.name
    sessions = [f"peers-{uuid.uuid4().hex[:12]}" for _ in range(CHECKPOINTS_PER_ROUND)]
    for session in sessions:
        for step in range(2):
            state, plan = make_state(rng, 1, step)
            latencies.setdefault((name, "checkpoint save"), []).append(
                _time(functools.partial(system.save, session, step, state, plan))
            )
    for session in sessions:
        latencies.setdefault((name, "restore latest, hot copy"), []).append(
            _time(system.restore(session, cold=False))
        )
    for session in sessions:
        call = system.restore(session, cold=True)
        latencies.setdefault((name, "restore latest, PostgreSQL"), []).append(_time(call))


class BaseWorker:
    """Engram's checkpoints with a checkout's code, in an A/B harness worker (``_ab.Side``) that
    runs a round when told: the same rounds, interleaved with the other systems'."""

    def __init__(self, base: str, seed: int, name: str = "Engram base") -> None:
        self.name = name
        self.side = Side.start(name, base, __file__, [str(seed), name])

    def round(self, latencies: dict[tuple[str, str], list[float]]) -> None:
        for measure, values in self.side.ask("go").items():
            latencies.setdefault((self.name, measure), []).extend(values)

    def close(self) -> None:
        self.side.close()


def checkpoint_worker(root: str, seed: int) -> None:
    """The worker of ``BaseWorker``: rounds of ``Engram`` with the code of ``root``, one per request,
    each answered with its latencies (ms) by measure."""

    def setup(stack: Any) -> Any:
        engram = Engram(0, [], None, seed)
        rng = random.Random(seed + 1)

        def run(_: Any) -> dict[str, list[float]]:
            latencies: dict[tuple[str, str], list[float]] = {}
            _checkpoint_round(engram, rng, latencies)
            return {measure: v for (_, measure), v in latencies.items()}

        return run

    serve(root, setup, "memory.checkpoints.services")


def _run_round(system: Any, rng: random.Random, latencies: dict[tuple[str, str], list[float]]) -> None:
    if isinstance(system, BaseWorker):
        system.round(latencies)
    else:
        _checkpoint_round(system, rng, latencies)


def checkpoints_only(rounds: int, seed: int, base: str | None = None) -> int:
    """Engram's checkpoints against PostgresSaver alone, rounds interleaved (the order rotates
    each round); with ``base``, another checkout's Engram too, and then both Engrams run in
    worker processes of their own (``BaseWorker``), so neither shares a process with LangGraph.
    Prints p50 / p99, the ratios and the load average."""
    systems: list[Any] = (
        [BaseWorker(str(ROOT), seed, "Engram"), LangGraph(0, [], None), BaseWorker(base, seed + 7)]
        if base
        else [Engram(0, [], None, seed), LangGraph(0, [], None)]
    )
    rng = random.Random(seed)
    latencies: dict[tuple[str, str], list[float]] = {}
    for system in systems:  # warm every one (connections, prepared plans, scripts loaded)
        _run_round(system, rng, {})
    loads = []
    for r in range(rounds):
        shift = r % len(systems)
        for system in systems[shift:] + systems[:shift]:
            _run_round(system, rng, latencies)
        loads.append(os.getloadavg()[0])
        print(f"  round {r + 1}/{rounds} done; load {loads[-1]:.1f}", flush=True)
    names = [s.name for s in systems]
    header = "".join(f"{n:>16}" for n in names)
    extra = ", Engram/base p50, p99" if base else ""
    print(f"\n{'measure':<40}{header}   Engram/LangGraph p50, p99{extra}")
    for measure in ("checkpoint save", "restore latest, hot copy", "restore latest, PostgreSQL"):
        by = {n: percentiles(latencies[(n, measure)]) for n in names}
        cells = "".join(f"{by[n]['p50']:>7.3f} / {by[n]['p99']:<6.3f}" for n in names)
        ours, theirs = by["Engram"], by["LangGraph"]
        ratios = f"{ours['p50'] / theirs['p50']:.2f}x, {ours['p99'] / theirs['p99']:.2f}x"
        if base:
            old = by["Engram base"]
            ratios += f"; {ours['p50'] / old['p50']:.2f}x, {ours['p99'] / old['p99']:.2f}x"
        print(f"{measure + ' p50/p99 ms':<40}{cells}   {ratios}")
    for system in systems:
        if isinstance(system, BaseWorker):
            system.close()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average during rounds {min(loads):.1f}-{max(loads):.1f}; (1, 5, 15 min) at the end: {load}")
    return 0


def _measure_size(
    n: int,
    args: argparse.Namespace,
    *,
    first: bool,
    skip: set[str],
    opened: list[Any],
    missing: dict[str, str],
    results: dict[str, dict[str, dict[str, float]]],
) -> None:
    """One corpus size: open the systems (each appended to ``opened`` as soon as it exists, so
    ``main`` drops its writes tables even when a later one fails; a peer left out or not installed
    goes into ``missing``), run the interleaved rounds and put each system's figures into ``results``.
    Writes and checkpoints are measured only with ``first`` (they do not depend on the corpus)."""
    from search_latency import corpus_vectors

    from memory.embeddings import get_embedder

    print(f"\n== {n:,} memories", flush=True)
    texts = corpus.memories(n, args.seed)
    vectors = Vectors(texts, corpus_vectors(texts, get_embedder().name, args.seed, 2))
    systems: list[Any] = [Engram(n, texts, vectors, args.seed)]
    opened.append(systems[0])
    for cls in (Mem0, LangGraph):
        if cls.name.lower() in skip:
            missing[cls.name] = "left out (--skip)"
            continue
        try:
            systems.append(cls(n, texts, vectors))
            opened.append(systems[-1])
        except ImportError as exc:
            missing[cls.name] = f"not installed ({exc.name}): pip install -e '.[peers]'"
    questions = corpus.questions(args.queries + 30)
    warm, measured = questions[:30], questions[30:]
    for system in systems:
        for q in warm:
            system.search(q)
    per_round = max(1, len(measured) // args.rounds)
    fresh_texts = corpus.memories(n + args.rounds * WRITES_PER_ROUND * 2, args.seed + 1)
    rng = random.Random(args.seed)
    latencies: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for system in systems:  # interleaved: every system in round r before round r + 1
            name = system.name
            for q in measured[r * per_round : (r + 1) * per_round]:
                latencies.setdefault((name, f"search k=10 at {n:,}"), []).append(
                    _time(functools.partial(system.search, q))
                )
            if not first or args.search_only:
                continue  # writes and checkpoints do not depend on the corpus: measured once
            writes = fresh_texts[(2 * r + (name == "LangGraph")) * WRITES_PER_ROUND :][:WRITES_PER_ROUND]
            t0 = time.perf_counter()
            for text in writes:
                system.write(text)
            latencies.setdefault((name, "writes per second"), []).append(
                len(writes) / (time.perf_counter() - t0)
            )
            if hasattr(system, "save"):
                _checkpoint_round(system, rng, latencies)
        print(f"  round {r + 1}/{args.rounds} done; load {os.getloadavg()[0]:.1f}", flush=True)
    for (name, measure), values in latencies.items():
        if measure == "writes per second":
            results.setdefault(measure, {})[name] = {"rate": float(np.mean(values))}
        else:
            results.setdefault(measure, {})[name] = percentiles(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=300, help="measured search queries per system")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--skip", default="", help="comma-separated peers to leave out (mem0, LangGraph)")
    parser.add_argument(
        "--search-only", action="store_true", help="measure search alone (no writes, checkpoints)"
    )
    parser.add_argument(
        "--checkpoints-only",
        action="store_true",
        help="measure checkpoint save and restore alone (no corpus, search or writes; mem0 has none)",
    )
    parser.add_argument(
        "--base",
        help="with --checkpoints-only: another checkout (e.g. /work/main) whose Engram runs in the same rounds",
    )
    found = worker_root()
    if found:
        root, (seed, _name) = found
        checkpoint_worker(root, int(seed))
        return 0
    args = parser.parse_args()
    django_setup()
    if args.checkpoints_only:
        return checkpoints_only(args.rounds, args.seed, args.base)
    skip = {s.strip().lower() for s in args.skip.split(",") if s.strip()}
    results: dict[str, dict[str, dict[str, float]]] = {}
    missing: dict[str, str] = {}
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]
    opened: list[Any] = []  # whose writes tables are dropped at the end, even after an error
    try:
        for n in sizes:
            _measure_size(
                n, args, first=n == sizes[0], skip=skip, opened=opened, missing=missing, results=results
            )
    finally:
        for system in opened:
            try:
                system.close()
            except Exception as exc:  # the others are still dropped; the run's figures stand
                print(f"{system.name}: its writes table was not dropped: {exc}", file=sys.stderr)

    peers = ["mem0", "LangGraph"]
    print(f"\n{'measure':<34}{'Engram':>18}" + "".join(f"{p:>18}" for p in peers) + "   Engram/peer")
    for measure, by in results.items():
        if measure == "writes per second":
            cells = {k: f"{v['rate']:.0f}/s" for k, v in by.items()}
            ratios = [f"{p} {by['Engram']['rate'] / by[p]['rate']:.2f}x" for p in peers if p in by]
        else:
            hi = "p99" if "checkpoint" in measure or "restore" in measure else "p95"
            cells = {k: f"{v['p50']:.2f} / {v[hi]:.2f}" for k, v in by.items()}
            ratios = [
                f"{p} {by['Engram']['p50'] / by[p]['p50']:.2f}x / {by['Engram'][hi] / by[p][hi]:.2f}x"
                for p in peers
                if p in by
            ]
            measure = f"{measure} p50/{hi} ms"
        print(
            f"{measure:<34}{cells.get('Engram', '-'):>18}"
            + "".join(f"{cells.get(p, '-'):>18}" for p in peers)
            + "   "
            + ", ".join(ratios)
        )
    for name, why in missing.items():
        print(f"{name}: {why}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the end: {load} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
