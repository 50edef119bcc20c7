"""The data lifecycle at scale: erasing one data subject among a million rows of others, and a
retention pass over a million memories.

1. Erasure. The tenant ``bench_erasure`` holds ``--others`` (default 1,000,000) events, memories
   and facts of other people, and one subject (``--subject-rows``, default 10,000) with as many
   events (the real ``events_append``), memories and facts (entity to entity, projected into Neo4j
   when ``NEO4J_URI`` is set), a few checkpoints and working memory in Redis. The erasure is
   requested and approved through the services and executed in this process
   (``compliance.services.erasure_run``): every layer in batches, Neo4j, Redis, the vacuum of the
   tables, the verification pass and the signed receipt; timed end to end (target < 60 s).
2. Retention. The tenant ``bench_retention`` holds ``--memories`` (default 1,000,000) memories last
   recalled 200 days ago; one pass of the default rules (90 days) removes them all in batches of
   ``ENGRAM_LIFECYCLE_BATCH``; figures: rows/s.

The others' rows are written with SQL (``generate_series``) to keep the fill to minutes, so two
things differ from rows written by agents: the others' events carry stand-in hashes (the erasure
does not verify the chain: ``verify_chain`` has its own benchmark in ``audit_trail.py``), and the
memories carry ``--dims`` (default 16) dimensional vectors, a dimension without an HNSW index (a
million 384-d inserts into HNSW take far longer than the run). Tenants are dropped and made again
on each run. It prints the figures with the load average and exits 1 if a target is missed::

    ENGRAM_NEO4J=1 ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks lifecycle [--others 1000000] [--subject-rows 10000] [--memories 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from _common import django_setup, drop_tenant

TARGET_ERASURE_S = 60.0
SUBJECT = "subject-bench-42"


def signing_key_env() -> None:
    """A signing key for the receipts (``var/bench/secrets``, as ``audit_trail.py`` makes it)."""
    if os.environ.get("ENGRAM_SIGNING_KEY") or os.environ.get("ENGRAM_SIGNING_KEY_FILE"):
        return
    from _common import ROOT

    sys.path.insert(0, str(ROOT))
    from devstack.web import private_signing_key

    os.environ["ENGRAM_SIGNING_KEY_FILE"] = str(
        private_signing_key(ROOT / "var" / "bench" / "secrets" / "signing-key.pem")
    )


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def fresh_tenant(slug: str):  # type: ignore[no-untyped-def]
    from tenants.models import Tenant
    from tenants.services import tenant_create

    old = Tenant.objects.filter(schema_name=slug).first()
    if old is not None:
        drop_tenant(old)
    tenant, _ = tenant_create(slug=slug, name=f"Benchmark {slug}")
    return tenant


def sql(statement: str, params: dict[str, Any] | None = None) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params or {})


EVENTS = """
INSERT INTO memory_event (seq, session_id, agent_id, role, kind, actor, data_subject, content, payload_json,
    occurred_at, recorded_at, hash_version, body_salt, body_digest, prev_hash, hash)
SELECT g, 's-' || (g / 50), %(agent)s, 'user', 'message', '', 'cust-' || (g %% 100000),
    'person ' || (g %% 100000) || ' asked about order ' || (g * 7), '{}', now() - interval '1 day', now(), 2,
    md5(g::text), md5('d' || g) || md5('e' || g),
    CASE WHEN g = 1 THEN repeat('0', 64) ELSE md5('h' || (g - 1)) || md5('x' || (g - 1)) END,
    md5('h' || g) || md5('x' || g)
FROM generate_series(1, %(n)s) g
"""
HEAD = """
UPDATE memory_chainhead SET last_seq = %(n)s, last_hash = md5('h' || %(n)s) || md5('x' || %(n)s) WHERE id = 1
"""
MEMORIES = """
INSERT INTO memory_semanticmemory (id, agent_id, scope, memory_type, session_id, data_subject, tags,
    visible_to_agents, visible_to_roles, content, content_hash, metadata, importance, confidence, embedding,
    embedding_model, embedding_dimensions, created_at)
SELECT gen_random_uuid(), %(agent)s, 'shared', 'fact', 's-' || (g / 50), %(subject)s || CASE WHEN %(numbered)s
    THEN '' ELSE (g %% 100000)::text END, '{}', '{}', '{}', %(prefix)s || ' remembers detail number ' || g,
    md5(%(prefix)s || g) || md5('c' || g), '{}', 0.5, 1.0, array_fill(0.1::real, ARRAY[%(dims)s])::vector,
    'bench', %(dims)s, now() - interval '300 days'
FROM generate_series(1, %(n)s) g
"""
ACCESS = """
INSERT INTO memory_memoryaccess (memory_id, last_accessed_at, access_count, stability_hours)
SELECT id, now() - make_interval(days => %(days)s), 1, 168 FROM memory_semanticmemory
WHERE id NOT IN (SELECT memory_id FROM memory_memoryaccess)
"""
FACTS = """
INSERT INTO memory_fact (subject_id, predicate_id, literal_type, literal_value, object_key, confidence, status,
    valid_from, recorded_at, agent_id, session_id, data_subject)
SELECT %(first_entity)s + (g %% 1000), %(predicate)s, 'string', to_jsonb('value ' || g), 'string:value ' || g,
    1.0, 'active', now(), now(), %(agent)s, 's-' || (g / 50), 'cust-' || (g %% 100000)
FROM generate_series(1, %(n)s) g
"""


def erasure_bench(others: int, subject_rows: int, dims: int) -> tuple[float, dict[str, int], bool]:
    from django.db import connection
    from django.utils import timezone
    from django_tenants.utils import tenant_context

    from agents.services import agent_create
    from compliance import services
    from core.tenancy import maintenance
    from memory.checkpoints.services import checkpoint_save
    from memory.episodic.services import EventData, events_append
    from memory.knowledge import services as knowledge
    from memory.knowledge.models import Entity, Predicate, entity_key
    from memory.knowledge.projection import outbox_drain
    from memory.knowledge.services import FactData, FactObject
    from memory.working.services import window_append

    tenant = fresh_tenant("bench_erasure")
    started = time.perf_counter()
    with tenant_context(tenant):
        others_agent, agent = agent_create(by=None, name="others"), agent_create(by=None, name="support")
        sql(EVENTS, {"agent": others_agent.pk, "n": others})
        sql(HEAD, {"n": others})
        sql(
            MEMORIES,
            {
                "agent": others_agent.pk,
                "subject": "cust-",
                "numbered": False,
                "prefix": "other",
                "dims": dims,
                "n": others,
            },
        )
        entities = Entity.objects.bulk_create(
            Entity(name=f"E{i}", key=entity_key(f"E{i}")) for i in range(1000)
        )
        likes = Predicate.objects.create(name="likes", cardinality="many")
        sql(
            FACTS,
            {"first_entity": entities[0].pk, "predicate": likes.pk, "agent": others_agent.pk, "n": others},
        )
        # the subject: real appends, memories, entity-to-entity facts, checkpoints, working memory
        for start in range(0, subject_rows, 5000):
            events_append(
                agent=agent,
                events=[
                    EventData(
                        session_id=f"s-subject-{i // 100}",
                        kind="message",
                        content=f"{SUBJECT} told us about item {i}",
                        occurred_at=timezone.now(),
                        data_subject=SUBJECT,
                    )
                    for i in range(start, min(subject_rows, start + 5000))
                ],
            )
        sql(
            MEMORIES,
            {
                "agent": agent.pk,
                "subject": SUBJECT,
                "numbered": True,
                "prefix": SUBJECT,
                "dims": dims,
                "n": subject_rows,
            },
        )
        sql(ACCESS, {"days": 1})
        for start in range(0, subject_rows, 500):
            knowledge.facts_assert(
                agent=agent,
                facts=[
                    FactData(
                        subject="Zed Subject",
                        predicate="bought",
                        object=FactObject(entity=f"item-{i}"),
                        session_id=f"s-subject-{i // 100}",
                        data_subject=SUBJECT,
                    )
                    for i in range(start, min(subject_rows, start + 500))
                ],
                batch=True,
            )
        outbox_drain()
        policy = tenant.working_memory_policy
        for i in range(20):
            checkpoint_save(
                agent=agent,
                session_id=f"s-subject-{i}",
                step_index=1,
                idempotency_key="k",
                state={"who": SUBJECT},
                plan=[],
                policy=policy,
                data_subject=SUBJECT,
            )
            window_append(agent=agent, session_id=f"s-subject-{i}", role="user", content="hi", policy=policy)
        with maintenance(), connection.cursor() as cursor:  # ANALYZE is the tables' owner's
            cursor.execute("ANALYZE")
    print(f"filled in {time.perf_counter() - started:.0f} s; {load()}")

    with tenant_context(tenant):
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="benchmark", note="", username="requester"
        )
        services.erasure_approve(request_id=request.pk, username="approver")
        before = time.perf_counter()
        done = services.erasure_run(request_id=request.pk)
        seconds = time.perf_counter() - before
        if done.status != "done":
            sys.exit(f"the erasure failed: {done.error}")
        counts = {
            "events": len(done.progress["episodic"]["ids"]),
            "memories": len(done.progress["semantic"]["ids"]),
            "facts": len(done.progress["knowledge"]["ids"]),
            "checkpoints": len(done.progress["checkpoints"]["ids"]),
            "redis_keys": len(done.progress["redis"]["keys"]),
        }
        clean = '"clean":true' in done.receipt
        for step, spent in sorted(done.progress.get("timings", {}).items(), key=lambda kv: -kv[1]):
            print(f"  {step:<40} {spent:8.2f} s")
    return seconds, counts, clean


def retention_bench(memories: int, dims: int) -> tuple[float, int]:
    from django.db import connection
    from django_tenants.utils import tenant_context

    from agents.services import agent_create
    from compliance import services
    from core.tenancy import maintenance

    tenant = fresh_tenant("bench_retention")
    started = time.perf_counter()
    with tenant_context(tenant):
        agent = agent_create(by=None, name="others")
        sql(
            MEMORIES,
            {
                "agent": agent.pk,
                "subject": "cust-",
                "numbered": False,
                "prefix": "old",
                "dims": dims,
                "n": memories,
            },
        )
        sql(ACCESS, {"days": 200})
        with maintenance(), connection.cursor() as cursor:  # ANALYZE is the tables' owner's
            cursor.execute("ANALYZE")
    print(f"filled {memories} memories in {time.perf_counter() - started:.0f} s; {load()}")
    with tenant_context(tenant):
        run = services.retention_run_start(requested_by="job:benchmark")
        before = time.perf_counter()
        run = services.retention_run(run_id=run.pk)
        seconds = time.perf_counter() - before
    return seconds, int(run.removed.get("semantic", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--others", type=int, default=1_000_000)
    parser.add_argument("--subject-rows", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--dims", type=int, default=16)
    parser.add_argument("--skip-erasure", action="store_true")
    parser.add_argument("--skip-retention", action="store_true")
    args = parser.parse_args()
    signing_key_env()  # the receipt is signed
    django_setup()
    from django.conf import settings

    print(
        f"batch {settings.ENGRAM['LIFECYCLE_BATCH']}, NEO4J_URI {'set' if settings.NEO4J_URI else 'unset'}; {load()}"
    )
    missed = False
    if not args.skip_erasure:
        seconds, counts, clean = erasure_bench(args.others, args.subject_rows, args.dims)
        print(
            f"erasure of one subject among {args.others:,} rows of others per layer: {seconds:.1f} s end to end "
            f"(target < {TARGET_ERASURE_S:.0f} s), {counts}, verification clean: {clean}; {load()}"
        )
        missed |= seconds >= TARGET_ERASURE_S or not clean
    if not args.skip_retention:
        seconds, removed = retention_bench(args.memories, args.dims)
        print(
            f"retention pass: {removed:,} memories removed in {seconds:.1f} s, {removed / seconds:,.0f} rows/s; {load()}"
        )
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
