"""The map of every place the tenant's data lives (``STORES``), each with its erasure and its
check in the verification pass, and the models that hold no personal data
(``NO_PERSONAL_DATA``); the verification pass over them and the receipt's signed bytes."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.models import LogEntry
from django.db import models

from agents.models import IdempotencyRecord
from core.canonical_json import canonical_json
from memory.checkpoints.models import CheckpointBlob, CheckpointWrite
from memory.consolidation.models import Promotion
from memory.episodic.models import ChainHead
from memory.knowledge.models import Contradiction, Entity, FactProvenance, GraphOutbox
from memory.semantic.models import LexicalPosting, MemoryAccess, MemoryContext

from ..models import ErasureRequest, Export, LegalHold
from .checks import (
    Counts,
    Target,
    verify_celery,
    verify_checkpoints,
    verify_episodic,
    verify_exports,
    verify_extractions,
    verify_graph,
    verify_index_keys,
    verify_knowledge,
    verify_procedural,
    verify_promotions,
    verify_records,
    verify_redis_files,
    verify_replay,
    verify_semantic,
    verify_statistics,
    verify_store,
    verify_summaries,
    verify_working,
)
from .layers import layer_get


@dataclass(frozen=True)
class Store:
    """One place the tenant's data lives, as an erasure sees it: its ``models`` (the tables of a
    layer and those whose rows go with them; none for a store outside PostgreSQL), where it is
    (``system``), how an erasure removes the target from it (``erased``), and ``verify``: the
    verification pass's counts of what is left there, per system and check, each to be 0 (a
    ``postgres_notes`` entry is reported, not counted). ``verify`` is None only for a store no
    pass can look into; its ``lingers`` says what it keeps and until when (the receipt's
    ``lingering``)."""

    name: str
    label: str
    system: str
    erased: str
    verify: Callable[[Target], Counts] | None
    models: tuple[type[models.Model], ...] = ()
    lingers: str = ""


def _layer_store(
    name: str, system: str, verify: Callable[[Target], Counts], *extra: type[models.Model]
) -> Store:
    layer = layer_get(name)
    assert layer.model is not None
    return Store(name, layer.label, system, "its layer's rows of the target", verify, (layer.model, *extra))


STORES: tuple[Store, ...] = (
    _layer_store("episodic", "postgres", verify_episodic, ChainHead),
    _layer_store("semantic", "postgres", verify_semantic, MemoryAccess, LexicalPosting, MemoryContext),
    _layer_store(
        "knowledge", "postgres", verify_knowledge, FactProvenance, Entity, Contradiction, GraphOutbox
    ),
    Store(
        "promotions",
        "memory-to-fact promotions",
        "postgres",
        "with the memories and facts they link",
        verify_promotions,
        (Promotion,),
    ),
    Store("graph", "the Neo4j projection", "neo4j", "with the facts and entities it projects", verify_graph),
    _layer_store("checkpoints", "postgres", verify_checkpoints, CheckpointWrite, CheckpointBlob),
    _layer_store("summaries", "postgres", verify_summaries),
    _layer_store("extractions", "postgres", verify_extractions),
    _layer_store("procedural", "postgres", verify_procedural),
    _layer_store("store", "postgres", verify_store),
    Store(
        "working",
        "working memory and checkpoint copies (Redis)",
        "redis",
        "the sessions' working memory, the agents' scratchpads, every key holding the subject's id, "
        "the erased checkpoints' copies",
        verify_working,
    ),
    Store(
        "replay",
        "the Idempotency-Key replay cache",
        "postgres",
        "every stored answer written before (reads are never stored): withdrawn, keys kept",
        verify_replay,
        (IdempotencyRecord,),
    ),
    Store(
        "exports",
        "export archives (files)",
        "files",
        "every archive file holding an erased row or the subject's id, whatever its export's state",
        verify_exports,
        (Export,),
    ),
    Store(
        "records",
        "compliance records: legal holds and the admin's log of them",
        "postgres",
        "released holds on the subject keep its digest, not its id; their trail records carry the "
        "subject and are redacted with its events",
        verify_records,
        (LegalHold, ErasureRequest, LogEntry),
    ),
    Store(
        "statistics",
        "PostgreSQL's planner statistics (sampled column values)",
        "postgres",
        "sampled again from the rows left (ANALYZE with the vacuum); a table left empty loses them",
        verify_statistics,
    ),
    Store(
        "index_keys",
        "GIN indexes' keys (full-text words, tags, store namespace labels)",
        "postgres",
        "the GIN indexes of the tables it removed rows from rebuilt (REINDEX CONCURRENTLY)",
        verify_index_keys,
    ),
    Store(
        "task_results",
        "Celery's task results (Redis)",
        "redis",
        "the results naming the subject",
        verify_celery,
    ),
    Store(
        "redis_files",
        "Redis's append-only file and snapshot (disk)",
        "redis",
        "rewritten after the deletes (BGREWRITEAOF, BGSAVE)",
        verify_redis_files,
    ),
    Store(
        "wal",
        "PostgreSQL's write-ahead log, WAL archive and backups",
        "postgres",
        "nothing at once",
        None,
        lingers="until recycled, and the backups' retention (ENGRAM_BACKUP_RETENTION_DAYS)",
    ),
    Store(
        "graph_logs",
        "Neo4j's transaction logs",
        "neo4j",
        "nothing at once",
        None,
        lingers="until rotated (db.tx_log.rotation.retention_policy)",
    ),
)

# The models no store above needs: none holds personal data of the memory's data subjects. A model
# added to the project must join a store or this list, with its reason (tests/compliance walk them).
NO_PERSONAL_DATA: dict[str, str] = {
    "tenants.Tenant": "the customer organisation and its policies",
    "tenants.Domain": "the tenant's host names",
    "tenants.ErasureLedgerEntry": (
        "an erasure's id, kind, finish time, receipt hash and the keyed digest (HMAC, SECRET_KEY) of its"
        " target, never the identifier: what a restore re-applies (decision 0091)"
    ),
    "contenttypes.ContentType": "the names of the models",
    "auth.Permission": "the names of the permissions",
    "auth.Group": "admin roles",
    "auth.Group_permissions": "admin roles' permissions",
    "auth.User": "the people of the admin (officers, operators): accounts, not data subjects of memory",
    "auth.User_groups": "admin people's roles",
    "auth.User_user_permissions": "admin people's permissions",
    "sessions.Session": "admin logins (Django's own expiry)",
    "agents.Agent": "software agents' names and roles (an agent erasure removes what they wrote)",
    "agents.ApiKey": "key ids, scopes and hashed secrets",
    "memory.Predicate": "the names of relations (lives_in, knows)",
    "memory.Tool": "tool contracts (JSON Schema): operators' work",
    "memory.ToolVersion": "tool contracts' versions",
    "memory.Skill": "skills: operators' procedures",
    "memory.SkillVersion": "skills' versioned step lists",
    "memory.SkillRunStats": "run counters per skill version",
    "memory.ConsolidationRun": "counts of the consolidation passes",
    "compliance.ChainCheck": "chain checks: seqs, hashes and findings about them",
    "compliance.Anchor": "signed chain heads (seq and hash)",
    "compliance.RetentionRule": "days per layer",
    "compliance.RetentionRun": "counts per layer",
}


def verification_pass(
    *, kind: str, value: str, progress: Mapping[str, Any], timings: dict[str, float] | None = None
) -> dict[str, dict[str, int]]:
    """Look for what an erasure removed in every store of ``STORES``; each count must be 0.

    Returns the counts per system (``postgres``, ``pgvector``, ``neo4j``, ``redis``, ``files``)
    and check, as each store's ``verify`` reports them (their docstrings in ``STORES``' order:
    rows of the target left per layer, erased rows by id, redacted events with a body, embeddings,
    Neo4j relationships and nodes, Redis keys, replayed answers, archives, holds, statistics, task
    results, Redis's files). ``postgres_notes`` is reported, not counted: live memories with the
    same content digest as an erased one (another agent wrote the same words outside the erasure's
    scope). ``timings`` gets each store's seconds (``verify <store>``)."""
    target = Target(kind, value, progress)
    report: dict[str, dict[str, int]] = {
        "postgres": {},
        "pgvector": {},
        "neo4j": {},
        "redis": {},
        "files": {},
    }
    for store in STORES:
        if store.verify is None:
            continue
        started = time.monotonic()
        for system, counts in store.verify(target).items():
            report.setdefault(system, {}).update(counts)
        if timings is not None:
            timings[f"verify {store.name}"] = round(
                timings.get(f"verify {store.name}", 0.0) + time.monotonic() - started, 3
            )
    return report


def verification_clean(report: Mapping[str, Mapping[str, int]]) -> bool:
    """Whether a ``verification_pass`` found nothing left (notes aside)."""
    return all(
        n == 0 for store, counts in report.items() if store != "postgres_notes" for n in counts.values()
    )


def receipt_bytes(document: dict[str, Any]) -> bytes:
    """The RFC 8785 text of a receipt, the bytes that are signed."""
    return canonical_json(document, root="receipt").encode()
