"""After rows are removed: what PostgreSQL still keeps of them (dead tuples and index entries,
GIN keys, planner statistics), cleared by a vacuum, a rebuild of the GIN indexes and a reset of
the statistics of emptied tables."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.admin.models import LogEntry
from django.db import DatabaseError, connection, models, transaction

from agents.models import IdempotencyRecord
from core.fulltext import identifier_pattern
from core.locks import advisory_lock
from core.tenancy import maintenance
from memory.checkpoints.models import Checkpoint, CheckpointBlob, CheckpointWrite
from memory.consolidation.models import Promotion, SummaryNode
from memory.conversations.models import ExtractionJob
from memory.episodic.models import Event
from memory.knowledge.models import Entity, Fact, FactProvenance
from memory.procedural.models import SkillRun
from memory.semantic.models import LexicalPosting, MemoryAccess, MemoryContext, SemanticMemory
from memory.store.models import StoreItem

from ..models import LegalHold


def vacuum(tables: Sequence[str], *, timings: dict[str, float] | None = None) -> list[str]:
    """``VACUUM (INDEX_CLEANUP ON, ANALYZE)`` each of ``tables``, so the dead tuples of erased rows
    and their index entries (the subject's id in its btree, the vectors in HNSW, the rows in GIN
    posting lists; GIN's keys need ``gin_rebuild``) are gone, not just invisible, and the
    planner's statistics sample only the rows left: they keep column values (most common values,
    histogram bounds), which may be the erased ones.
    ``INDEX_CLEANUP ON``, because the default (``AUTO``) skips the indexes when under 2% of the
    table's pages have dead tuples, as after erasing one person among millions, which would leave
    exactly what an erasure must remove. Needs autocommit (not inside a transaction); returns the
    tables vacuumed (none inside a transaction, as in tests that roll back). Runs as the tables'
    owner (the maintenance role): PostgreSQL skips a VACUUM by a tenant's role with only a
    warning. VACUUM reads only the pages the visibility map does not mark all-visible, so a
    table's cost is the pages the removal touched plus one pass over each of its indexes; ANALYZE
    reads a sample of at most 300 x default_statistics_target pages."""
    if connection.in_atomic_block:
        return []
    with maintenance(), connection.cursor() as cursor:
        for table in tables:
            started = time.monotonic()
            cursor.execute(f'VACUUM (INDEX_CLEANUP ON, ANALYZE) "{table}"')
            if timings is not None:
                timings[f"vacuum {table}"] = round(time.monotonic() - started, 3)
    return list(tables)


def gin_rebuild(tables: Sequence[str], *, timings: dict[str, float] | None = None) -> list[str]:
    """``REINDEX INDEX CONCURRENTLY`` every GIN index of ``tables`` (the full-text words of events,
    memory and skill tags, the store's namespace labels): GIN never removes a key from its entry
    tree, a VACUUM only empties its posting list, so the words of erased text and a person's id
    used as a label would stay in the index's pages, with no row behind them, until a rebuild.
    Concurrently: writes go on meanwhile; each costs a scan of its table. Needs autocommit (none
    inside a transaction); runs as the tables' owner. Returns the indexes rebuilt."""
    if connection.in_atomic_block or not tables:
        return []
    rebuilt = []
    # one rebuild of an index at a time: two erasures of the tenant would race on its copy
    with advisory_lock("gin-rebuild"), maintenance(), connection.cursor() as cursor:
        for index in gin_indexes(tables):
            started = time.monotonic()
            cursor.execute(f'REINDEX INDEX CONCURRENTLY "{index}"')
            rebuilt.append(index)
            if timings is not None:
                timings[f"reindex {index}"] = round(time.monotonic() - started, 3)
    return rebuilt


def gin_indexes(tables: Sequence[str]) -> list[str]:
    """The GIN indexes of ``tables`` (names in the current schema), sorted."""
    from core.tenancy import current_schema

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ic.relname FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = ic.relam JOIN pg_class tc ON tc.oid = i.indrelid "
            "JOIN pg_namespace n ON n.oid = tc.relnamespace "
            "WHERE a.amname = 'gin' AND n.nspname = %s AND tc.relname = ANY(%s) ORDER BY 1",
            [current_schema(), list(tables)],
        )
        return [row[0] for row in cursor.fetchall()]


def touched_tables(progress: Mapping[str, Any]) -> list[str]:
    """The tables an erasure removed rows from or changed (by its ``progress``), with those removed
    alongside (access clocks, lexical postings, provenance, entities, promotions, pending writes):
    the ones to vacuum."""

    def did(layer: str, key: str = "ids") -> bool:
        return bool(progress.get(layer, {}).get(key))

    tables: list[type[models.Model]] = []
    if did("episodic"):
        tables.append(Event)
    if did("semantic") or did("summaries", "memory_ids") or did("store", "memory_ids"):
        tables += [SemanticMemory, MemoryAccess, LexicalPosting, MemoryContext]
    if did("store"):
        tables.append(StoreItem)
    if did("knowledge") or did("knowledge", "entity_ids"):
        tables += [Fact, FactProvenance, Entity]
    if did("checkpoints"):
        tables += [Checkpoint, CheckpointWrite, CheckpointBlob]
    if did("summaries"):
        tables.append(SummaryNode)
    if did("procedural"):
        tables.append(SkillRun)
    if did("extractions"):
        tables.append(ExtractionJob)
    if did("semantic", "promotion_ids") or did("knowledge", "promotions_detached"):
        tables.append(Promotion)
    if progress.get("replay", {}).get("withdrawn"):
        tables.append(IdempotencyRecord)
    if did("records", "hold_ids"):
        tables += [LegalHold, LogEntry]
    return [model._meta.db_table for model in tables]


def statistics_naming(needles: Sequence[str]) -> list[str]:
    """The tables of the current tenant whose planner statistics (``pg_stats``: most common values
    and elements, histogram bounds, those of their expression indexes too) hold one of ``needles`` as a whole
    identifier: ANALYZE samples them again (``vacuum``)."""
    pattern = identifier_pattern(list(needles))
    if pattern is None:
        return []
    from core.tenancy import current_schema

    like = [f"%{n}%" for n in needles]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(t.relname, c.relname), concat_ws(' ', s.most_common_vals::text, "
            "s.histogram_bounds::text, s.most_common_elems::text) FROM pg_stats s "
            "JOIN pg_namespace n ON n.nspname = s.schemaname "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename "
            "LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid "
            "WHERE s.schemaname = %s AND (s.most_common_vals::text LIKE ANY(%s) "
            "OR s.histogram_bounds::text LIKE ANY(%s) OR s.most_common_elems::text LIKE ANY(%s))",
            [current_schema(), like, like, like],
        )
        return sorted({table for table, text in cursor.fetchall() if pattern.search(text)})


def statistics_forget(tables: Sequence[str]) -> list[str]:
    """After ``vacuum``: ANALYZE samples no row of an empty table, so it keeps the statistics it
    had, sampled from the rows an erasure removed (values of their columns). For each of
    ``tables`` that is empty (checked under an exclusive lock, waited for at most 5 s), every
    column with statistics is declared again with its own type, which drops them (an empty table:
    nothing to rewrite); a column that cannot be (a dependent view, say) keeps them, for the
    verification pass to find. Needs autocommit; returns the ``table.column`` done."""
    if connection.in_atomic_block:
        return []
    from core.tenancy import current_schema

    done = []
    with maintenance():
        for table in tables:
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '5s'")
                    cursor.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
                    cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")')
                    if cursor.fetchone()[0]:
                        continue
                    cursor.execute(
                        "SELECT s.attname, format_type(a.atttypid, a.atttypmod) FROM pg_stats s "
                        "JOIN pg_namespace n ON n.nspname = s.schemaname "
                        "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename "
                        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = s.attname "
                        "WHERE s.schemaname = %s AND s.tablename = %s",
                        [current_schema(), table],
                    )
                    for column, kind in cursor.fetchall():
                        try:
                            with transaction.atomic():
                                cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" TYPE {kind}')
                            done.append(f"{table}.{column}")
                        except DatabaseError:
                            continue
            except DatabaseError:  # the lock was not granted in time: the verification pass tells
                continue
    return done
