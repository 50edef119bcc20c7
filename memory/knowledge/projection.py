"""The Neo4j projection of the knowledge graph, kept in step through the transactional outbox.

Nodes ``(:Entity {tenant, id, name})`` and relationships ``[:FACT {tenant, fact_id, predicate,
status, confidence}]`` exist for live entity-to-entity facts only: a fact that is superseded or
retracted loses its relationship, and an entity left with no relationship loses its node, so nothing
is left behind. Every statement names the tenant and passes values as parameters. All writes are
MERGE/DELETE by (tenant, id), so replaying the outbox is harmless.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from .models import LIVE_STATUSES, Fact, GraphOutbox

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

DROP_ORPHANS = """
MATCH (n:Entity {tenant: $tenant}) WHERE n.id IN $entity_ids AND NOT (n)-[:FACT]-()
DELETE n
"""

_schema_ready: set[int] = set()


def ensure_schema(driver: Any) -> None:
    """Create the constraint and index once per driver."""
    if id(driver) in _schema_ready:
        return
    for statement in SCHEMA_STATEMENTS:
        driver.execute_query(statement)
    _schema_ready.add(id(driver))


def _row(fact: Fact) -> dict[str, Any]:
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
    """Bring the projection of ``facts`` (with subject, object and predicate loaded) up to date."""
    facts = [f for f in facts if f.object_entity_id is not None]
    if not facts:
        return
    live = [_row(f) for f in facts if f.status in LIVE_STATUSES]
    gone = [f.pk for f in facts if f.status not in LIVE_STATUSES]
    touched = sorted({f.subject_id for f in facts} | {f.object_entity_id for f in facts})

    def work(tx: Any) -> None:
        if gone:
            tx.run(REMOVE, tenant=tenant, fact_ids=gone).consume()
        if live:
            tx.run(UPSERT, tenant=tenant, rows=live).consume()
        if gone:
            tx.run(DROP_ORPHANS, tenant=tenant, entity_ids=touched).consume()

    with driver.session() as session:
        session.execute_write(work)


def outbox_drain(*, batch_size: int = 1000) -> int:
    """Project pending outbox rows of the current tenant; returns how many rows were processed.

    Rows are claimed with ``FOR UPDATE SKIP LOCKED`` (workers never block each other) and marked
    processed in the same PostgreSQL transaction as the Neo4j write succeeds; if Neo4j fails, they
    stay pending for the next run. Without ``NEO4J_URI`` there is no projection: rows are marked
    processed (``graph_rebuild`` projects everything when Neo4j is added later).
    """
    from config.neo4j import get_driver

    driver = get_driver()
    total = 0
    while True:
        with transaction.atomic():
            rows = list(
                GraphOutbox.objects.select_for_update(skip_locked=True)
                .filter(processed_at__isnull=True)
                .order_by("id")[:batch_size]
            )
            if not rows:
                return total
            if driver is not None:
                ensure_schema(driver)
                fact_ids = {r.fact_id for r in rows}
                facts = Fact.objects.filter(pk__in=fact_ids).select_related(
                    "subject", "object_entity", "predicate"
                )
                project(driver, connection.schema_name, facts)
            GraphOutbox.objects.filter(pk__in=[r.pk for r in rows]).update(processed_at=timezone.now())
            total += len(rows)


def graph_rebuild(*, batch_size: int = 5000) -> int:
    """Drop the tenant's projection and project every live entity-to-entity fact again.

    Returns the number of facts projected. Raises ``RuntimeError`` without ``NEO4J_URI``.
    """
    from config.neo4j import get_driver

    driver = get_driver()
    if driver is None:
        raise RuntimeError("NEO4J_URI is not set: there is no graph to rebuild")
    ensure_schema(driver)
    tenant = connection.schema_name
    while True:
        records, _, _ = driver.execute_query(
            "MATCH (n:Entity {tenant: $tenant}) WITH n LIMIT 10000 DETACH DELETE n RETURN count(*) AS n",
            tenant=tenant,
        )
        if records[0]["n"] == 0:
            break
    pending_before = GraphOutbox.objects.filter(processed_at__isnull=True).values_list("pk", flat=True)
    pending_ids = list(pending_before)
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
