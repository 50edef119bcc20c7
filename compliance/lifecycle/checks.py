"""The verification pass's checks, one per store of ``compliance.lifecycle.stores.STORES``: each
counts what an erasure removed and is still there (every count must be 0)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.models import LogEntry
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from agents.models import IdempotencyRecord
from core.fulltext import identifier_pattern
from memory.checkpoints.models import Checkpoint, CheckpointBlob
from memory.checkpoints.selectors import checkpoint_blobs_unnamed
from memory.consolidation.models import Promotion, SummaryNode
from memory.conversations.models import ExtractionJob
from memory.episodic.models import Event
from memory.knowledge.models import Entity, Fact, entity_key
from memory.procedural.models import SkillRun
from memory.semantic.models import MemoryContext, SemanticMemory
from memory.store.models import StoreItem
from memory.working.services import keys_holding

from .. import copies
from ..models import LegalHold, TargetKind
from .cleanup import gin_indexes, statistics_naming, touched_tables
from .erasure import WORKING_MEMORY_RECORDS
from .layers import layer_get, summaries_stale, target_q


@dataclass(frozen=True)
class Target:
    """What an erasure erased, as its verification pass looks for it: the target and the run's
    ``progress`` (ids per layer, see ``compliance.services.erasure._progress_add``)."""

    kind: str
    value: str
    progress: Mapping[str, Any]

    def ids(self, layer: str, key: str = "ids") -> list[Any]:
        return list(self.progress.get(layer, {}).get(key, []))

    @property
    def memory_ids(self) -> list[Any]:
        return self.ids("semantic") + self.ids("summaries", "memory_ids") + self.ids("store", "memory_ids")

    @property
    def sessions(self) -> list[str]:
        """The sessions whose working memory the erasure deleted."""
        found = set(self.progress.get("sessions", []))
        return sorted(found | {self.value}) if self.kind == TargetKind.SESSION else sorted(found)

    @property
    def needles(self) -> list[str]:
        """Identifiers of the target searched in copies as whole identifiers: a data subject's id."""
        return [self.value] if self.kind == TargetKind.SUBJECT and self.value else []

    def erased(self) -> copies.Erased:
        return copies.Erased.of(self.progress, self.needles)


Counts = dict[str, dict[str, int]]


def _left(name: str, target: Target) -> int:
    layer = layer_get(name)
    q = target_q(layer, target.kind, target.value)
    return 0 if q is None else layer.rows().filter(q).count()


def verify_episodic(target: Target) -> Counts:
    """The target's events left unredacted, erased events still with a body or full-text words, events
    naming the subject."""
    seqs = target.ids("episodic")
    pg = {"episodic_left": _left("episodic", target)}
    pg["events_with_body"] = (
        Event.objects.filter(seq__in=seqs)
        .filter(~Q(content="") | ~Q(payload_json="{}") | ~Q(body_salt="") | ~Q(data_subject=""))
        .count()
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {Event._meta.db_table} WHERE seq = ANY(%s) AND search <> ''::tsvector",
            [list(seqs)],
        )
        pg["events_fulltext"] = int(cursor.fetchone()[0])
    if target.kind == TargetKind.SUBJECT:
        pg["events_naming_subject"] = Event.objects.filter(data_subject=target.value).count()
    return {"postgres": pg}


def verify_semantic(target: Target) -> Counts:
    """The target's memories left, erased memories, contexts built from them, embeddings; notes: live
    memories with an erased one's content digest."""
    memory_ids = target.memory_ids
    pg = {
        "semantic_left": _left("semantic", target),
        "memories": SemanticMemory.objects.filter(pk__in=memory_ids).count(),
        # neighbours' contexts built from an erased memory's text (the triggers rebuild them)
        "memory_contexts": MemoryContext.objects.filter(
            Q(memory_id__in=memory_ids) | Q(sources__overlap=list(memory_ids))
        ).count(),
    }
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {SemanticMemory._meta.db_table} WHERE id = ANY(%s::uuid[]) "
            "AND embedding IS NOT NULL",
            [list(memory_ids)],
        )
        embeddings = int(cursor.fetchone()[0])
    hashes = target.ids("semantic", "content_hashes")
    notes = {"same_content_elsewhere": SemanticMemory.objects.filter(content_hash__in=hashes).count()}
    return {"postgres": pg, "pgvector": {"embeddings": embeddings}, "postgres_notes": notes}


def verify_knowledge(target: Target) -> Counts:
    """The target's facts left, erased facts and entities, for an entity the entity named."""
    pg = {
        "knowledge_left": _left("knowledge", target),
        "facts": Fact.objects.filter(pk__in=target.ids("knowledge")).count(),
        "entities": Entity.objects.filter(pk__in=target.ids("knowledge", "entity_ids")).count(),
    }
    if target.kind == TargetKind.ENTITY:
        pg["entity_named"] = Entity.objects.filter(key=entity_key(target.value)).count()
    return {"postgres": pg}


def verify_promotions(target: Target) -> Counts:
    """Promotions linking an erased memory or fact."""
    promotions = Promotion.objects.filter(
        Q(memory_id__in=target.memory_ids) | Q(fact_id__in=target.ids("knowledge"))
    ).count()
    return {"postgres": {"promotions": promotions}}


def verify_graph(target: Target) -> Counts:
    """Neo4j relationships and nodes of the erased facts and entities, for an entity the nodes named
    (nothing without Neo4j)."""
    from core.neo4j import get_driver, neo4j_guard
    from core.tenancy import current_schema

    driver = get_driver()
    if driver is None:
        return {}
    neo4j: dict[str, int] = {}
    tenant = current_schema()
    with neo4j_guard():
        records, _, _ = driver.execute_query(
            "MATCH ()-[r:FACT {tenant: $t}]->() WHERE r.fact_id IN $ids RETURN count(r) AS n",
            t=tenant,
            ids=target.ids("knowledge"),
        )
        neo4j["relationships"] = int(records[0]["n"])
        records, _, _ = driver.execute_query(
            "MATCH (n:Entity {tenant: $t}) WHERE n.id IN $ids RETURN count(n) AS n",
            t=tenant,
            ids=target.ids("knowledge", "entity_ids"),
        )
        neo4j["nodes"] = int(records[0]["n"])
        if target.kind == TargetKind.ENTITY:
            records, _, _ = driver.execute_query(
                "MATCH (n:Entity {tenant: $t}) WHERE toLower(n.name) = toLower($name) RETURN count(n) AS n",
                t=tenant,
                name=target.value,
            )
            neo4j["nodes_named"] = int(records[0]["n"])
    return {"neo4j": neo4j}


def verify_checkpoints(target: Target) -> Counts:
    """The target's checkpoints left, erased checkpoints, the target's channel values (blobs) left,
    blobs no checkpoint names in the sessions the erasure touched."""
    left = Checkpoint.objects.filter(pk__in=target.ids("checkpoints")).count()
    q = target_q(layer_get("checkpoints"), target.kind, target.value)  # its targets fit blobs too
    blobs = 0 if q is None else CheckpointBlob.objects.filter(q).count()
    unnamed = checkpoint_blobs_unnamed(CheckpointBlob.objects.filter(session_id__in=target.sessions)).count()
    return {
        "postgres": {
            "checkpoints_left": _left("checkpoints", target),
            "checkpoints": left,
            "checkpoint_blobs_left": blobs,
            "checkpoint_blobs_unnamed": unnamed,
        }
    }


def verify_summaries(target: Target) -> Counts:
    """The target's summary nodes left, erased nodes, nodes written before a redaction of their range."""
    return {
        "postgres": {
            "summaries_left": _left("summaries", target),
            "summary_nodes": SummaryNode.objects.filter(pk__in=target.ids("summaries")).count(),
            # a node written before a redaction of its range holds the erased text (rebuilt ones never do)
            "summaries_stale": SummaryNode.objects.filter(summaries_stale(timezone.now(), "")).count(),
        }
    }


def verify_extractions(target: Target) -> Counts:
    """The target's extraction jobs left, erased jobs."""
    jobs = ExtractionJob.objects.filter(pk__in=target.ids("extractions")).count()
    return {"postgres": {"extractions_left": _left("extractions", target), "extraction_jobs": jobs}}


def verify_procedural(target: Target) -> Counts:
    """The target's skill runs left, erased runs."""
    runs = SkillRun.objects.filter(pk__in=target.ids("procedural")).count()
    return {"postgres": {"procedural_left": _left("procedural", target), "skill_runs": runs}}


def verify_store(target: Target) -> Counts:
    """The target's store items left, erased items."""
    items = StoreItem.objects.filter(pk__in=target.ids("store")).count()
    return {"postgres": {"store_left": _left("store", target), "store_items": items}}


def verify_working(target: Target) -> Counts:
    """Deleted Redis keys back, keys holding the subject's id, the trail's unredacted copies of the
    sessions' working memory."""
    from core.redis import get_redis, redis_errors

    deleted = target.ids("redis", "keys") + target.ids("checkpoints", "redis_keys")
    redis: dict[str, int] = {}
    with redis_errors():
        redis["deleted_keys_back"] = int(get_redis().exists(*deleted)) if deleted else 0
    if target.kind == TargetKind.SUBJECT:
        redis["keys_naming_subject"] = len(keys_holding([target.value]))
    records = Event.objects.filter(
        WORKING_MEMORY_RECORDS, session_id__in=target.sessions, redacted_at__isnull=True
    ).count()
    return {"redis": redis, "postgres": {"working_memory_records": records}}


def _naming(texts: Sequence[str], needles: Sequence[str]) -> int:
    pattern = identifier_pattern(list(needles))
    return 0 if pattern is None else sum(1 for text in texts if pattern.search(text))


def verify_replay(target: Target) -> Counts:
    """Replay answers kept from before the erasure, those naming the subject."""
    watermark = target.progress.get("replay", {}).get("watermark")
    if watermark is None:
        kept = IdempotencyRecord.objects.filter(response_body__isnull=False).count()
    else:
        kept = IdempotencyRecord.objects.filter(pk__lte=watermark, response_body__isnull=False).count()
    pg = {"replay_answers_kept_from_before": kept}
    if target.needles:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT response_body::text FROM {IdempotencyRecord._meta.db_table} "
                "WHERE response_body IS NOT NULL AND response_body::text LIKE ANY(%s)",
                [[f"%{n}%" for n in target.needles]],
            )
            pg["replay_answers_naming_subject"] = _naming([r[0] for r in cursor.fetchall()], target.needles)
    return {"postgres": pg}


def verify_exports(target: Target) -> Counts:
    """Archive files holding an erased row or the subject's id."""
    return {"files": {"archives_holding_erased": len(copies.archives_holding(target.erased()))}}


def verify_records(target: Target) -> Counts:
    """Legal holds and the admin's log entries naming the subject."""
    if not target.needles:
        return {}
    from django.contrib.contenttypes.models import ContentType

    holds = LegalHold.objects.filter(kind=target.kind, value=target.value).count()
    logged = list(
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(LegalHold), object_repr__contains=target.value
        ).values_list("object_repr", flat=True)
    )
    return {
        "postgres": {
            "legal_holds_naming_subject": holds,
            "admin_log_naming_subject": _naming(logged, target.needles),
        }
    }


def verify_statistics(target: Target) -> Counts:
    """Tables whose planner statistics name the subject."""
    # the erasure samples them again by ANALYZE, which cannot run inside a transaction (tests
    # that roll back): there the statistics are what they were, and not the erasure's to check
    if not target.needles or connection.in_atomic_block:
        return {}
    return {"postgres": {"statistics_naming_subject": len(statistics_naming(target.needles))}}


def verify_index_keys(target: Target) -> Counts:
    """GIN indexes of the touched tables not rebuilt."""
    # rebuilt with the vacuum, which cannot run inside a transaction (tests that roll back)
    if connection.in_atomic_block:
        return {}
    wanted = set(gin_indexes(touched_tables(target.progress)))
    return {"postgres": {"gin_indexes_not_rebuilt": len(wanted - set(target.progress.get("reindexed", [])))}}


def verify_celery(target: Target) -> Counts:
    """Task results naming the subject."""
    if not target.needles:
        return {}
    return {"redis": {"task_results_naming_subject": len(copies.celery_results_holding(target.needles))}}


def verify_redis_files(target: Target) -> Counts:
    """Redis's files not rewritten since the deletes."""
    return {
        "redis": {"files_not_rewritten": copies.redis_files_pending(target.progress.get("redis_files", {}))}
    }
