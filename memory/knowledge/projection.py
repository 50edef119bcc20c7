"""The Neo4j projection of the knowledge graph, kept in step through the transactional outbox.

Nodes ``(:Entity {tenant, id, name, head_facts, head_others})`` and relationships ``[:FACT {tenant,
fact_id, predicate, status, confidence}]`` exist for live entity-to-entity facts only: a fact that is
superseded or retracted loses its relationship, and an entity left with no relationship loses its
node, so nothing is left behind. Every statement names the tenant and passes values as parameters.
All writes are MERGE/DELETE by (tenant, id), so replaying the outbox is harmless.

``head_facts`` / ``head_others`` are the node's first ``HEAD`` relationships in fact id order (their
``fact_id`` and the other end's ``id``), what a neighbourhood page's walk follows from an entity
(``graph.FANOUT`` + 1, to tell a capped entity; ``models.GRAPH_FANOUT``): kept in step by the same transaction that changes
the node's relationships, so a page reads them in one property lookup instead of sorting a hub's
thousands of relationships (``benchmarks/knowledge_graph.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import neo4j
from django.db import transaction
from django.utils import timezone

from core.locks import advisory_xact_lock, advisory_xact_locks, advisory_xact_try_lock
from core.tenancy import current_schema

from .models import GRAPH_FANOUT, LIVE_STATUSES, Fact, GraphOutbox

logger = logging.getLogger(__name__)

SCHEMA_STATEMENTS = [
    "CREATE CONSTRAINT engram_entity_key IF NOT EXISTS FOR (e:Entity) REQUIRE (e.tenant, e.id) IS UNIQUE",
    "CREATE INDEX engram_fact_key IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.tenant, r.fact_id)",
]

UPSERT = """
UNWIND $rows AS row
MERGE (s:Entity {tenant: $tenant, id: row.subject_id}) SET s.name = row.subject_name
MERGE (o:Entity {tenant: $tenant, id: row.object_id}) SET o.name = row.object_name
MERGE (s)-[r:FACT {tenant: $tenant, fact_id: row.fact_id}]->(o)
SET r.predicate = row.predicate, r.status = row.status, r.confidence = row.confidence
"""

REMOVE = """
UNWIND $fact_ids AS fact_id
MATCH (:Entity {tenant: $tenant})-[r:FACT {tenant: $tenant, fact_id: fact_id}]->(:Entity {tenant: $tenant})
DELETE r
"""

#: relationships a node's head holds (see the module docstring): the walk's fan-out and one more
HEAD = GRAPH_FANOUT + 1

# Taken first in a write, on every node it will touch (in id order, so two writes never deadlock):
# a head is recomputed from the relationships the transaction sees, so no other write may change
# them between that read and this commit (Neo4j 5 adds relationships to a dense node without
# locking it).
LOCK_NODES = """
UNWIND $entity_ids AS id
MATCH (n:Entity {tenant: $tenant, id: id})
SET n.head_lock = true
"""

# ``nodes``: per touched node, the lowest fact id the write added to it (or null) and the fact ids
# it removed. A head changes only if it is not full, an added fact sorts before its last entry, or a
# removed fact is in it; then it is read again from the node's relationships.
HEADS = """
UNWIND $nodes AS row
MATCH (n:Entity {tenant: $tenant, id: row.id})
REMOVE n.head_lock
WITH n, row
WHERE n.head_facts IS NULL OR size(n.head_facts) < $k
   OR (row.added_min IS NOT NULL AND row.added_min < n.head_facts[-1])
   OR any(f IN row.removed WHERE f IN n.head_facts)
CALL (n) {
    MATCH (n)-[r:FACT]-(b:Entity)
    WHERE r.tenant = $tenant AND b.tenant = $tenant
    WITH r, b ORDER BY r.fact_id LIMIT $k
    RETURN collect(r.fact_id) AS facts, collect(b.id) AS others
}
SET n.head_facts = facts, n.head_others = others
"""


def _head_rows(
    touched: Iterable[int], added: Iterable[tuple[int, int, int]], removed: Iterable[tuple[int, int, int]]
) -> list[dict[str, Any]]:
    """The ``nodes`` parameter of ``HEADS``: ``added`` / ``removed`` are (fact id, subject id, object id)."""
    rows: dict[int, dict[str, Any]] = {n: {"id": n, "added_min": None, "removed": []} for n in touched}
    for fact, *ends in added:
        for n in ends:
            low = rows[n]["added_min"]
            rows[n]["added_min"] = fact if low is None else min(low, fact)
    for fact, *ends in removed:
        for n in ends:
            rows[n]["removed"].append(fact)
    return [rows[n] for n in sorted(rows)]


DROP_ORPHANS = """
MATCH (n:Entity {tenant: $tenant}) WHERE n.id IN $entity_ids AND NOT (n)-[:FACT]-()
DELETE n
"""

_schema_ready: set[int] = set()

# Drains of a tenant share this lock; ``graph_rebuild`` takes it exclusively.
TENANT_LOCK = "graph"
# One per fact: a drain holds the locks of its facts from reading their state in PostgreSQL until
# Neo4j has acknowledged the write and the outbox rows are marked.
FACT_LOCK = "graph-fact"


# Neo4j's answer to ``CREATE ... IF NOT EXISTS`` when another session created the same rule between
# its check and its create: the rule is there, as asked
RULE_MADE_MEANWHILE = "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists"


def ensure_schema(driver: Any) -> None:
    """Create the constraint and index once per driver. Every process (web, each Celery worker)
    does so on its first write, so on a fresh Neo4j several may at once: one that finds the rule
    made by another meanwhile goes on. Other driver errors pass through."""
    if id(driver) in _schema_ready:
        return
    for statement in SCHEMA_STATEMENTS:
        try:
            driver.execute_query(statement)
        except neo4j.exceptions.ClientError as exc:
            if exc.code != RULE_MADE_MEANWHILE:
                raise
    _schema_ready.add(id(driver))


def projection_enabled() -> bool:
    """Whether fact changes are projected into Neo4j (``NEO4J_URI`` is set)."""
    from core.neo4j import get_driver

    return get_driver() is not None


def _row(fact: Fact) -> dict[str, Any]:
    assert fact.object_entity is not None  # only entity-to-entity facts are projected
    return {
        "fact_id": fact.pk,
        "subject_id": fact.subject_id,
        "subject_name": fact.subject.name,
        "object_id": fact.object_entity_id,
        "object_name": fact.object_entity.name,
        "predicate": fact.predicate.name,
        "status": fact.status,
        "confidence": fact.confidence,
    }


def project(driver: Any, tenant: str, facts: Iterable[Fact]) -> None:
    """Make Neo4j hold the given state of ``facts`` (with subject, object and predicate loaded): live
    entity-to-entity facts as relationships, others removed, entities left without one removed.

    Raises :class:`core.neo4j.Neo4jUnavailable` when Neo4j cannot be reached (the write is then
    not applied); other driver errors pass through.
    """
    from core.neo4j import neo4j_guard, write_timeout

    facts = [f for f in facts if f.object_entity_id is not None]
    if not facts:
        return
    live = [_row(f) for f in facts if f.status in LIVE_STATUSES]
    gone = [f.pk for f in facts if f.status not in LIVE_STATUSES]
    touched = sorted(
        {f.subject_id for f in facts} | {f.object_entity_id for f in facts if f.object_entity_id}
    )
    ends = {f.pk: (f.subject_id, int(f.object_entity_id)) for f in facts if f.object_entity_id is not None}
    heads = _head_rows(
        touched,
        [(r["fact_id"], r["subject_id"], r["object_id"]) for r in live],
        [(pk, *ends[pk]) for pk in gone],
    )

    @neo4j.unit_of_work(timeout=write_timeout())
    def work(tx: Any) -> None:
        tx.run(LOCK_NODES, tenant=tenant, entity_ids=touched).consume()
        if gone:
            tx.run(REMOVE, tenant=tenant, fact_ids=gone).consume()
        if live:
            tx.run(UPSERT, tenant=tenant, rows=live).consume()
        tx.run(HEADS, tenant=tenant, nodes=heads, k=HEAD).consume()
        if gone:
            tx.run(DROP_ORPHANS, tenant=tenant, entity_ids=touched).consume()

    with neo4j_guard():
        ensure_schema(driver)
        with driver.session() as session:
            session.execute_write(work)


# Rows (so at most facts) per drain transaction. Each fact lock is an entry in PostgreSQL's shared
# lock table, which holds max_locks_per_transaction x max_connections entries (6,400 by default):
# batches of 256 leave room for some twenty drains at once across all tenants.
DRAIN_BATCH = 256


def outbox_drain(*, batch_size: int = DRAIN_BATCH) -> int:
    """Project pending outbox rows of the current tenant; returns how many rows were processed.

    Each batch is one PostgreSQL transaction: claim rows with ``FOR UPDATE SKIP LOCKED`` (drains
    never wait for each other's rows), lock their facts, read the facts' *current* state, write it to
    Neo4j, mark the rows processed. The fact locks make drains of the same fact take turns from the
    read to the acknowledged write, so the last write of a fact carries its latest state whatever the
    interleaving (without them a drain holding an older ``active`` state could land its write after
    another drain had removed the retracted fact, and nothing would repair it). Writers never take
    these locks: asserting never waits on Neo4j.

    If Neo4j fails the rows stay pending for the next run (the sweeper runs one within
    ``ENGRAM_OUTBOX_SWEEP_SECONDS``); :class:`core.neo4j.Neo4jUnavailable` when it cannot be
    reached. While ``graph_rebuild`` runs for the tenant, returns at once, leaving rows pending.
    Without ``NEO4J_URI`` there is no projection: rows are marked processed (``graph_rebuild``
    projects everything when Neo4j is added later).
    """
    from core.neo4j import get_driver

    driver = get_driver()
    total = 0
    while True:
        with transaction.atomic():
            if not advisory_xact_try_lock(TENANT_LOCK, shared=True):
                logger.info("graph_rebuild is running for %s: outbox rows left pending", current_schema())
                return total
            rows = list(
                GraphOutbox.objects.select_for_update(skip_locked=True)
                .filter(processed_at__isnull=True)
                .order_by("id")[:batch_size]
            )
            if not rows:
                return total
            if driver is not None:
                fact_ids = sorted({r.fact_id for r in rows})
                advisory_xact_locks(FACT_LOCK, fact_ids)  # before reading the facts' state
                facts = Fact.objects.filter(pk__in=fact_ids).select_related(
                    "subject", "object_entity", "predicate"
                )
                project(driver, current_schema(), facts)
            GraphOutbox.objects.filter(pk__in=[r.pk for r in rows]).update(processed_at=timezone.now())
            total += len(rows)


def outbox_purge(*, older_than: timedelta) -> int:
    """Delete the current tenant's processed outbox rows processed more than ``older_than`` ago;
    returns how many. Pending rows are never deleted."""
    cutoff = timezone.now() - older_than
    deleted, _ = GraphOutbox.objects.filter(processed_at__lt=cutoff).delete()
    return deleted


def graph_rebuild(*, batch_size: int = 5000) -> int:
    """Drop the tenant's projection and project every live entity-to-entity fact again.

    Runs in one PostgreSQL transaction holding the tenant's graph lock exclusively (it waits for
    running drains; drains that start meanwhile leave their rows pending), so no drain writes into
    the graph being rebuilt. Outbox rows pending when it starts are marked processed: the facts read
    afterwards include their changes. Returns the number of facts projected. Raises
    ``RuntimeError`` without ``NEO4J_URI``, :class:`core.neo4j.Neo4jUnavailable` when Neo4j
    cannot be reached.
    """
    from core.neo4j import get_driver, neo4j_guard

    driver = get_driver()
    if driver is None:
        raise RuntimeError("NEO4J_URI is not set: there is no graph to rebuild")
    tenant = current_schema()
    with transaction.atomic():
        advisory_xact_lock(TENANT_LOCK)
        with neo4j_guard():
            ensure_schema(driver)
            while True:
                records, _, _ = driver.execute_query(
                    "MATCH (n:Entity {tenant: $tenant}) WITH n LIMIT 10000 DETACH DELETE n "
                    "RETURN count(*) AS n",
                    tenant=tenant,
                )
                if records[0]["n"] == 0:
                    break
        pending_ids = list(GraphOutbox.objects.filter(processed_at__isnull=True).values_list("pk", flat=True))
        qs = (
            Fact.objects.filter(status__in=LIVE_STATUSES, object_entity__isnull=False)
            .select_related("subject", "object_entity", "predicate")
            .order_by("pk")
        )
        projected = 0
        batch: list[Fact] = []
        for fact in qs.iterator(chunk_size=batch_size):
            batch.append(fact)
            if len(batch) >= batch_size:
                project(driver, tenant, batch)
                projected += len(batch)
                batch = []
        project(driver, tenant, batch)
        projected += len(batch)
        GraphOutbox.objects.filter(pk__in=pending_ids).update(processed_at=timezone.now())
    return projected


DROP_ENTITIES = """
MATCH (n:Entity {tenant: $tenant}) WHERE n.id IN $entity_ids
DETACH DELETE n
"""


def unproject(*, fact_ids: list[int], entity_ids: list[int], touched_ids: list[int]) -> None:
    """Remove facts ``fact_ids`` and entities ``entity_ids`` (with their relationships) from the
    current tenant's projection, and entities of ``touched_ids`` left without a relationship.
    Call inside the transaction that deletes them from PostgreSQL, holding the graph lock shared
    and the facts' locks (as a drain does), so no drain or rebuild projects them again in between.
    Nothing without ``NEO4J_URI``. Raises :class:`core.neo4j.Neo4jUnavailable`."""
    from core.neo4j import get_driver, neo4j_guard, write_timeout

    driver = get_driver()
    if driver is None:
        return
    tenant = current_schema()

    # the touched nodes' heads are read again (``removed`` names every fact the erasure drops)
    heads = [{"id": n, "added_min": None, "removed": list(fact_ids)} for n in sorted(set(touched_ids))]

    @neo4j.unit_of_work(timeout=write_timeout())
    def work(tx: Any) -> None:
        tx.run(LOCK_NODES, tenant=tenant, entity_ids=sorted(set(touched_ids))).consume()
        if fact_ids:
            tx.run(REMOVE, tenant=tenant, fact_ids=fact_ids).consume()
        if entity_ids:
            tx.run(DROP_ENTITIES, tenant=tenant, entity_ids=entity_ids).consume()
        if touched_ids:
            tx.run(HEADS, tenant=tenant, nodes=heads, k=HEAD).consume()
            tx.run(DROP_ORPHANS, tenant=tenant, entity_ids=touched_ids).consume()

    with neo4j_guard():
        ensure_schema(driver)
        with driver.session() as session:
            session.execute_write(work)
