"""Hybrid memory search latency at 10k and 100k memories: the service, and over HTTP.

For each size N the script fills the tenant ``bench_search_<N>`` (``bench_search_m2v_<N>`` with
``--embedder model2vec``) with N synthetic memories (``benchmarks/corpus.py``: templated sentences
about people, places, food, work, plans; fixed seed) spread over four agents, half of them shared,
runs ANALYZE, and measures with distinct questions after a warm-up:

- ``memory_search`` (the service, default k=10, ``touch`` on, as the API calls it) with the query
  embedding computed per call (the ``embed_query`` cache is cleared first): the headline figure;
- the same questions again, embeddings now cached: the database and Python part alone;
- again with ``touch=False``: the read path without the write that restarts the recency clock;
- the query embedding alone;
- ``POST /api/v1/memories/search`` against a real server process (gunicorn ``config.wsgi``,
  2 gthread workers, or uvicorn with ``--server uvicorn``; DEBUG off) from one keep-alive client,
  with the peak RSS of that server (master plus workers, sampled every 50 ms).

Reruns are quick: a tenant that already holds its N memories is not refilled, and the vectors of the
corpus are cached in ``var/bench/embeddings/`` (the first N of a larger corpus are the smaller one).
The first fill of 100k memories with the default model (all-MiniLM-L6-v2, ONNX) took about ten
minutes on two cores: six to embed (~250 texts/s in two processes), four to insert (~450 rows/s,
the HNSW index is maintained row by row). ``--embedder model2vec`` uses the static
``minilm-static-256`` model instead (much faster to fill, but not the headline figure).

Needs PostgreSQL (with pgvector) and Redis: ``DATABASE_URL`` and ``REDIS_URL`` are read from the
environment::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks search_latency --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import corpus
import httpx
import numpy as np
from _common import ROOT, bench_key, default_server, django_setup, mib, percentiles, record, web_server

READER = "bench-reader"
AGENTS = [READER, "bench-planner", "bench-support", "bench-research"]
CACHE_DIR = ROOT / "var" / "bench" / "embeddings"
TAGS = ("travel", "food", "work", "family", "health", "money", "hobby", "schedule")
MODEL2VEC_PATH = ROOT.parent / "shared" / "models" / "minilm-static-256"


# --- filling --------------------------------------------------------------------------------------------


def _draw_attributes(
    rng: random.Random, types: list[Any], tags_pool: list[str], now: datetime
) -> tuple[bool, Any, list[str], float, datetime, datetime]:
    """One memory's drawn attributes, in the order both fills draw them: shared?, type, tags,
    importance, creation time (up to 180 days before ``now``) and last access (between the two)."""
    shared = rng.random() < 0.5
    mtype = rng.choice(types)
    tags = rng.sample(tags_pool, rng.randint(0, 2))
    importance = round(rng.betavariate(2, 3), 3)
    created = now - timedelta(days=rng.uniform(0, 180))
    accessed = created + (now - created) * rng.random()
    return shared, mtype, tags, importance, created, accessed


def _pool_init() -> None:
    django_setup()


def _embed_chunk(texts: list[str]) -> np.ndarray:
    from memory.embeddings import get_embedder

    return get_embedder().embed(texts)


def vectors_cache(model: str, seed: int) -> Path:
    """The file of the corpus vectors of ``model`` for ``seed`` (``corpus_vectors``'s cache)."""
    return CACHE_DIR / f"{model.replace('/', '_')}-seed{seed}.npy"


def corpus_vectors(texts: list[str], model: str, seed: int, jobs: int, batch: int = 256) -> np.ndarray:
    """Vectors of ``texts`` (a corpus prefix), computed in ``jobs`` processes and cached on disk."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = vectors_cache(model, seed)
    cached = np.load(path) if path.exists() else np.zeros((0, 0), dtype=np.float32)
    if len(cached) >= len(texts):
        return cached[: len(texts)]
    todo = texts[len(cached) :]
    chunks = [todo[i : i + batch] for i in range(0, len(todo), batch)]
    print(f"  embedding {len(todo):,} texts with {model} in {jobs} processes...", flush=True)
    t0 = time.perf_counter()
    parts = []
    with multiprocessing.get_context("spawn").Pool(jobs, initializer=_pool_init) as pool:
        for i, part in enumerate(pool.imap(_embed_chunk, chunks), 1):
            parts.append(part)
            if i % 40 == 0 or i == len(chunks):
                done = min(i * batch, len(todo))
                rate = done / (time.perf_counter() - t0)
                print(f"    {done:,}/{len(todo):,} ({rate:,.0f} texts/s)", flush=True)
    vectors = np.concatenate([cached, *parts]) if len(cached) else np.concatenate(parts)
    np.save(path, vectors.astype(np.float32))
    return vectors


def fill(tenant: Any, agents: dict[str, Any], n: int, seed: int, jobs: int) -> None:
    """Insert the first ``n`` corpus memories that the tenant does not hold yet, then ANALYZE."""
    from django.db import connection, transaction
    from django.utils import timezone
    from django_tenants.utils import tenant_context

    from core.tenancy import maintenance
    from memory.embeddings import get_embedder
    from memory.semantic.models import MemoryAccess, MemoryScope, MemoryType, SemanticMemory
    from memory.semantic.services.duplicates import content_hash

    embedder = get_embedder()
    with tenant_context(tenant):
        live = SemanticMemory.objects.filter(forgotten_at__isnull=True, embedding_model=embedder.name)
        have = live.count()
        if have >= n:
            print(f"  {tenant.schema_name}: already holds {have:,} memories, no fill", flush=True)
            return
        texts = corpus.memories(n, seed)
        existing = set(live.values_list("content_hash", flat=True))
        vectors = corpus_vectors(texts, embedder.name, seed, jobs)
        rng = random.Random(seed + n)
        now = timezone.now()
        owners = [agents[name] for name in AGENTS]
        types = [MemoryType.FACT] * 5 + [MemoryType.PREFERENCE] * 3 + [MemoryType.OBSERVATION] * 2
        tags_pool = list(TAGS)
        rows: list[SemanticMemory] = []
        clocks: list[tuple[datetime, int]] = []

        def insert(batch: list[SemanticMemory], batch_clocks: list[tuple[datetime, int]]) -> None:
            with transaction.atomic():
                SemanticMemory.objects.bulk_create(batch)
                MemoryAccess.objects.bulk_create(
                    MemoryAccess(memory=m, last_accessed_at=at, access_count=count)
                    for m, (at, count) in zip(batch, batch_clocks, strict=True)
                )

        inserted = 0
        t0 = time.perf_counter()
        print(f"  inserting {n - len(existing):,} memories into {tenant.schema_name}...", flush=True)
        for i, text in enumerate(texts):
            # draw for every index, so a resumed fill gives each memory the same attributes
            owner = owners[i % len(owners)]
            shared, mtype, tags, importance, created, accessed = _draw_attributes(rng, types, tags_pool, now)
            digest = content_hash(text)
            if digest in existing:
                continue
            rows.append(
                SemanticMemory(
                    agent=owner,
                    scope=MemoryScope.SHARED if shared else MemoryScope.PRIVATE,
                    memory_type=mtype,
                    session_id=f"bench-session-{i // 50}",
                    tags=tags,
                    content=text,
                    content_hash=digest,
                    importance=importance,
                    confidence=1.0,
                    embedding=vectors[i],
                    embedding_model=embedder.name,
                    embedding_dimensions=embedder.dimensions,
                    created_at=created,
                )
            )
            clocks.append((accessed, rng.randint(0, 5)))
            if len(rows) == 1000 or i == len(texts) - 1:
                insert(rows, clocks)
                inserted += len(rows)
                rows, clocks = [], []
                if inserted % 10_000 == 0:
                    rate = inserted / (time.perf_counter() - t0)
                    print(f"    {inserted:,} rows ({rate:,.0f} rows/s)", flush=True)
        if rows:
            insert(rows, clocks)
        with maintenance(), connection.cursor() as cursor:  # ANALYZE is the tables' owner's
            cursor.execute("ANALYZE memory_semanticmemory")
            cursor.execute("ANALYZE memory_memoryaccess")
            cursor.execute("ANALYZE memory_lexicalposting")  # the IDFs come from its statistics
        print(f"  filled in {time.perf_counter() - t0:,.0f} s; ANALYZE done", flush=True)


# Synthetic vectors past the cached ones (``fill_bulk``): row i gets the cached vector of row
# i mod len(cache) plus isotropic Gaussian noise of this standard deviation per component, renormalised.
# 0.03 puts a copy at cosine ~0.86 from its source, the median nearest-neighbour cosine of the real
# 100k MiniLM vectors (0.87): the copies are as close to their source as real neighbours are, not
# near-duplicates an index walks past for free, nor isotropic noise (far harder than text).
SYNTHETIC_SIGMA = 0.03
# Rows per COPY statement (and transaction). The context trigger of migration 0020 runs once per
# statement and costs about the square of its rows (``memory_context_refresh``'s ``sources``
# subquery scans every new row's neighbours once per new row), so small statements keep the fill
# linear in its rows.
BULK_CHUNK = 1_000


def synthetic_vectors(cached: np.ndarray, start: int, stop: int, seed: int) -> np.ndarray:
    """Rows ``start``..``stop`` of a corpus larger than ``cached``: the cached vector where there is
    one, else ``cached[i % len(cached)]`` plus ``N(0, SYNTHETIC_SIGMA^2)`` per component, renormalised
    (deterministic in ``seed`` and the chunk's bounds)."""
    base = len(cached)
    idx = np.arange(start, stop)
    out = cached[idx % base].astype(np.float32, copy=True)
    noisy = idx >= base
    if noisy.any():
        rng = np.random.default_rng([seed, start, stop])
        out[noisy] += (
            rng.standard_normal((int(noisy.sum()), out.shape[1]), dtype=np.float32) * SYNTHETIC_SIGMA
        )
        out[noisy] /= np.linalg.norm(out[noisy], axis=1, keepdims=True)
    return out


# The most corpus texts ``fill_bulk`` embeds itself on a machine without the cache (100k took 4.5
# minutes on two quiet cores, ~380 texts/s); rows past them get ``synthetic_vectors``.
BULK_EMBED_MAX = 100_000


def fill_bulk(tenant: Any, agents: dict[str, Any], n: int, seed: int, jobs: int = 2) -> None:
    """Fill the tenant with the first ``n`` corpus memories by COPY, for sizes whose vectors cannot be
    embedded here (1M texts would take over an hour on two cores): the cached ONNX vectors as they
    are, then ``synthetic_vectors``. The rows get the attributes ``fill`` draws; the lexical index is
    kept by the table's own triggers (migration 0014: ``lexical`` before insert, the postings after),
    so it is what any write makes. The HNSW index of the embedder's dimensions is dropped before
    the load and built again after it from its own definition (one build instead of a graph insert
    per row), then VACUUM ANALYZE; all as the tables' owner (``maintenance()``). Resumes after the
    rows already there (chunks of ``BULK_CHUNK`` commit in order). Without the cache (a fresh
    machine), the first ``min(n, BULK_EMBED_MAX)`` texts are embedded first (``corpus_vectors``, in
    ``jobs`` processes)."""
    from django.db import connection
    from django.utils import timezone
    from django_tenants.utils import tenant_context
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    from core.tenancy import maintenance
    from memory.embeddings import get_embedder
    from memory.semantic.models import MemoryScope, MemoryType, SemanticMemory
    from memory.semantic.services.duplicates import content_hash

    embedder = get_embedder()
    d = embedder.dimensions
    with tenant_context(tenant), maintenance():
        have = SemanticMemory.objects.filter(embedding_model=embedder.name).count()
        if have >= n:
            print(f"  {tenant.schema_name}: already holds {have:,} memories, no fill", flush=True)
            return
        t0 = time.perf_counter()
        texts = corpus.memories(n, seed)
        cache = vectors_cache(embedder.name, seed)
        want = min(n, BULK_EMBED_MAX)
        cached = np.load(cache, mmap_mode="r") if cache.exists() else None
        if cached is None or len(cached) < want:
            corpus_vectors(texts[:want], embedder.name, seed, jobs)
            cached = np.load(cache, mmap_mode="r")
        print(
            f"  {n:,} texts in {time.perf_counter() - t0:,.0f} s; {len(cached):,} cached vectors, the rest "
            f"synthetic (sigma {SYNTHETIC_SIGMA})",
            flush=True,
        )
        index = f"semantic_hnsw_{d}"
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_get_indexdef(to_regclass(%s))", [index])
            (index_sql,) = cursor.fetchone()
            if index_sql is not None:
                cursor.execute(f"DROP INDEX {index}")
            else:  # a bulk fill died before building it again: migration 0002's definition
                index_sql = (
                    f"CREATE INDEX {index} ON memory_semanticmemory USING hnsw "
                    f"((embedding::vector({d})) vector_cosine_ops) "
                    f"WHERE embedding_dimensions = {d} AND forgotten_at IS NULL"
                )
        raw = connection.connection
        register_vector(raw)
        rng = random.Random(seed + n)
        now = timezone.now()
        owners = [agents[name].pk for name in AGENTS]
        types = [MemoryType.FACT] * 5 + [MemoryType.PREFERENCE] * 3 + [MemoryType.OBSERVATION] * 2
        tags_pool = list(TAGS)
        columns = (
            "id, agent_id, scope, memory_type, session_id, data_subject, tags, visible_to_agents, "
            "visible_to_roles, content, content_hash, metadata, importance, confidence, embedding, "
            "embedding_model, embedding_dimensions, created_at"
        )
        types_sql = [
            "uuid", "int8", "varchar", "varchar", "varchar", "varchar", "varchar[]", "int8[]",
            "varchar[]", "text", "varchar", "jsonb", "float8", "float8", "vector", "varchar", "int2",
            "timestamptz",
        ]  # fmt: skip
        t1, reported = time.perf_counter(), 0
        for start in range(0, n, BULK_CHUNK):
            stop = min(n, start + BULK_CHUNK)
            vectors = synthetic_vectors(cached, start, stop, seed) if stop > have else None
            rows: list[tuple[Any, ...]] = []
            clocks: list[tuple[Any, ...]] = []
            for i in range(start, stop):
                # drawn for every index, as in ``fill``, so each memory gets the same attributes
                shared, mtype, tags, importance, created, accessed = _draw_attributes(
                    rng, types, tags_pool, now
                )
                count = rng.randint(0, 5)
                if i < have or vectors is None:
                    continue
                memory_id = uuid.uuid4()
                rows.append(
                    (
                        memory_id,
                        owners[i % len(owners)],
                        MemoryScope.SHARED.value if shared else MemoryScope.PRIVATE.value,
                        str(mtype),
                        f"bench-session-{i // 50}",
                        "",
                        tags,
                        [],
                        [],
                        texts[i],
                        content_hash(texts[i]),
                        Jsonb({}),
                        importance,
                        1.0,
                        vectors[i - start],
                        embedder.name,
                        d,
                        created,
                    )
                )
                clocks.append((memory_id, accessed, count, 168.0))
            if not rows:
                continue
            with raw.transaction(), raw.cursor() as cur:
                with cur.copy(f"COPY memory_semanticmemory ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(types_sql)
                    for row in rows:
                        copy.write_row(row)
                with cur.copy(
                    "COPY memory_memoryaccess (memory_id, last_accessed_at, access_count, stability_hours) "
                    "FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["uuid", "timestamptz", "int4", "float8"])
                    for clock in clocks:
                        copy.write_row(clock)
            if stop % 10_000 == 0 or stop == n:
                rate = (stop - max(have, reported)) / (time.perf_counter() - t1)
                print(f"    {stop:,} rows ({rate:,.0f} rows/s)", flush=True)
                t1, reported = time.perf_counter(), stop
        t2 = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '4GB'")
            cursor.execute("SET max_parallel_maintenance_workers = 1")
            cursor.execute(index_sql)
            cursor.execute("RESET maintenance_work_mem")
            cursor.execute("RESET max_parallel_maintenance_workers")
        print(f"  {index} built in {time.perf_counter() - t2:,.0f} s", flush=True)
        with connection.cursor() as cursor:
            for table in ("memory_semanticmemory", "memory_memoryaccess", "memory_lexicalposting"):
                cursor.execute(f"VACUUM (ANALYZE) {table}")
        print(f"  bulk fill done in {time.perf_counter() - t0:,.0f} s (VACUUM ANALYZE included)", flush=True)


# --- measuring ------------------------------------------------------------------------------------------
def measure_service(
    tenant: Any, agent: Any, warm: list[str], measured: list[str]
) -> dict[str, dict[str, float]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django_tenants.utils import tenant_context

    from memory.embeddings import embed_query, get_embedder
    from memory.semantic.services.recall import memory_search

    embedder = get_embedder()
    policy = tenant.retrieval_policy
    out: dict[str, dict[str, float]] = {}
    with tenant_context(tenant):
        for q in warm:
            memory_search(agent=agent, query=q, policy=policy)
        embed_query.cache_clear()
        fresh = []
        hits = 0
        for q in measured:
            t0 = time.perf_counter()
            result = memory_search(agent=agent, query=q, policy=policy)
            fresh.append((time.perf_counter() - t0) * 1000)
            hits += len(result)
        out["service, query embedded per call"] = percentiles(fresh)
        cached = []
        for q in measured:
            t0 = time.perf_counter()
            memory_search(agent=agent, query=q, policy=policy)
            cached.append((time.perf_counter() - t0) * 1000)
        out["service, embedding cached"] = percentiles(cached)
        reads = []
        for q in measured:
            t0 = time.perf_counter()
            memory_search(agent=agent, query=q, policy=policy, touch=False)
            reads.append((time.perf_counter() - t0) * 1000)
        out["service, cached, touch=False"] = percentiles(reads)
        embed = []
        for q in measured:
            t0 = time.perf_counter()
            embedder.embed([q])
            embed.append((time.perf_counter() - t0) * 1000)
        out["query embedding alone"] = percentiles(embed)
        with CaptureQueriesContext(connection) as ctx:
            memory_search(agent=agent, query=measured[0], policy=policy)
        out["_meta"] = {"queries_per_search": float(len(ctx.captured_queries)), "hits": hits / len(measured)}
    return out


def measure_http(url: str, key: str, warm: list[str], measured: list[str]) -> dict[str, float]:
    headers = {"Authorization": f"Bearer {key}"}
    # warm every worker: a fresh connection per warm-up request lands on either worker
    for q in warm:
        r = httpx.post(f"{url}/api/v1/memories/search", json={"query": q}, headers=headers, timeout=120)
        r.raise_for_status()
    latencies = []
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for q in measured:
            t0 = time.perf_counter()
            r = client.post("/api/v1/memories/search", json={"query": q})
            latencies.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
    return percentiles(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--queries", type=int, default=300, help="measured distinct queries per path")
    parser.add_argument("--warmup", type=int, default=30, help="warm-up queries per path")
    parser.add_argument("--embedder", choices=["default", "model2vec"], default="default")
    parser.add_argument("--jobs", type=int, default=2, help="embedding processes for the fill")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--server", choices=["gunicorn", "uvicorn"], default=default_server())
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP measurement")
    parser.add_argument("--fill-only", action="store_true", help="fill the tenants, measure nothing")
    parser.add_argument(
        "--bulk",
        action="store_true",
        help="fill by COPY, vectors past the cached ones synthetic (fill_bulk): for 1M memories",
    )
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]

    if args.embedder == "model2vec":
        # the web server child inherits these, so both sides embed with the same model
        os.environ["ENGRAM_EMBEDDER"] = "model2vec"
        os.environ["ENGRAM_EMBEDDING_MODEL_PATH"] = str(MODEL2VEC_PATH)
    django_setup()
    from memory.embeddings import get_embedder

    print(f"embedder: {get_embedder().name} ({get_embedder().dimensions}-d)", flush=True)
    qs = corpus.questions(2 * (args.warmup + args.queries))
    svc_warm, svc_q = qs[: args.warmup], qs[args.warmup : args.warmup + args.queries]
    rest = qs[args.warmup + args.queries :]
    http_warm, http_q = rest[: args.warmup], rest[args.warmup :]

    table: list[tuple[int, str, dict[str, float]]] = []
    rss: dict[int, tuple[int, int]] = {}
    meta: dict[int, dict[str, float]] = {}
    for n in sizes:
        slug = f"bench_search_{'m2v_' if args.embedder == 'model2vec' else ''}{n}"
        print(f"\n== {n:,} memories (tenant {slug})", flush=True)
        tenant, agents, keys = bench_key(slug, AGENTS)
        if args.bulk:
            fill_bulk(tenant, agents, n, args.seed, args.jobs)
        else:
            fill(tenant, agents, n, args.seed, args.jobs)
        if args.fill_only:
            continue
        print("  measuring the service...", flush=True)
        results = measure_service(tenant, agents[READER], svc_warm, svc_q)
        meta[n] = results.pop("_meta")
        table += [(n, name, stats) for name, stats in results.items()]
        if not args.no_http:
            print(f"  measuring over HTTP ({args.server}, {args.workers} workers)...", flush=True)
            with web_server(args.server, workers=args.workers) as server:
                table.append(
                    (
                        n,
                        "HTTP POST /memories/search",
                        measure_http(server.url, keys[READER], http_warm, http_q),
                    )
                )
                server.rss.sample()
                rss[n] = (server.rss.peak_total, server.rss.peak_single)

    if args.fill_only:
        return
    print(f"\nHybrid search latency, k=10, {args.queries} distinct queries per row (ms)")
    print(f"{'memories':>9}  {'path':<36}{'p50':>8}{'p95':>8}{'p99':>8}{'mean':>8}{'max':>8}")
    for n, name, s in table:
        print(
            f"{n:>9,}  {name:<36}{s['p50']:>8.1f}{s['p95']:>8.1f}{s['p99']:>8.1f}{s['mean']:>8.1f}{s['max']:>8.1f}"
        )
    print()
    # the figures of --json: ms per path and corpus size (the docs' benchmarks page plots them)
    record(
        queries=args.queries,
        embedder=get_embedder().name,
        latency_ms=[{"memories": n, "path": name, **stats} for n, name, stats in table],
    )
    for n in sizes:
        line = f"{n:>9,}  SQL queries per search: {meta[n]['queries_per_search']:.0f}"
        line += f", mean hits {meta[n]['hits']:.1f}"
        if n in rss:
            line += f"; web peak RSS {mib(rss[n][0])} (largest process {mib(rss[n][1])})"
        print(line)


if __name__ == "__main__":
    main()
