"""The statement that inserts the new memories of a write with their access clocks (shared by the
three insert paths of ``writes``: a batch's, a single write's, an async write's), and the unsaved
rows it is given."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from django.db import connection

from agents.models import Agent
from memory.embeddings import Embedder

from ..models import MemoryAccess, SemanticMemory

if TYPE_CHECKING:
    from .writes import MemoryData

# The memories of a write and their access clocks in one statement: the rows travel as one JSON
# document (``jsonb_to_recordset``), the vectors as pgvector text, so the statement has the same few
# placeholders for one memory as for 500 (decision 0040), and every placeholder's type is in the text, as
# a prepared statement needs (``core.db.prepared``).
INSERT_ROWS = f"""
    INSERT INTO {SemanticMemory._meta.db_table} (id, agent_id, scope, memory_type, session_id,
        data_subject, tags, visible_to_agents, visible_to_roles, content, content_hash, metadata,
        importance, confidence, embedding, embedding_model, embedding_dimensions, created_at,
        fact_hint, source_event_id)
    SELECT r.id, %s::bigint, r.scope, r.memory_type, r.session_id, r.data_subject, r.tags,
        r.visible_to_agents, r.visible_to_roles, r.content, r.content_hash, r.metadata,
        r.importance, r.confidence, r.embedding::vector, %s::text, r.embedding_dimensions,
        %s::timestamptz + r.i * interval '1 microsecond', r.fact_hint, r.source_event_id
    FROM jsonb_to_recordset(%s::jsonb) AS r(id uuid, i int, scope text, memory_type text,
        session_id text, data_subject text, tags varchar(64)[], visible_to_agents bigint[],
        visible_to_roles varchar(100)[], content text, content_hash text, metadata jsonb,
        importance float8, confidence float8, embedding text, embedding_dimensions int,
        fact_hint jsonb, source_event_id bigint)
    {{where}}
    ORDER BY r.i
    {{conflict}}
    RETURNING id
"""
INSERT_ACCESS = (
    f"INSERT INTO {MemoryAccess._meta.db_table} (memory_id, last_accessed_at, access_count, stability_hours) "
    "SELECT id, %s::timestamptz, 0, %s::float8 FROM ins"
)
INSERT_SQL = f"WITH ins AS ({INSERT_ROWS.format(where='', conflict='')}) {INSERT_ACCESS}"


def insert_params(
    created: dict[int, SemanticMemory], *, texts: dict[int, str], now: datetime, stability: float
) -> list[Any]:
    """The parameters of ``INSERT_ROWS`` then ``INSERT_ACCESS`` for the new memories ``created``
    (by item index: ``created_at`` is ``now`` plus that many µs; access clocks at ``now`` with
    ``stability`` hours)."""
    rows = [
        {
            "id": str(m.pk),
            "i": i,
            "scope": m.scope,
            "memory_type": m.memory_type,
            "session_id": m.session_id,
            "data_subject": m.data_subject,
            "tags": m.tags,
            "visible_to_agents": m.visible_to_agents,
            "visible_to_roles": m.visible_to_roles,
            "content": m.content,
            "content_hash": m.content_hash,
            "metadata": m.metadata,
            "importance": m.importance,
            "confidence": m.confidence,
            "embedding": texts.get(i) if m.embedding is not None else None,
            "embedding_dimensions": m.embedding_dimensions,
            "fact_hint": m.fact_hint,
            "source_event_id": m.source_event_id,
        }
        for i, m in created.items()
    ]
    first = next(iter(created.values()))
    return [first.agent_id, first.embedding_model, now, json.dumps(rows), now, stability]


def mark_saved(created: dict[int, SemanticMemory], *, agent: Agent, now: datetime, stability: float) -> None:
    """The instances of ``created`` become the rows ``INSERT_SQL`` stored, with their ``access``."""
    alias = connection.alias
    for memory in created.values():
        memory._state.adding = False
        memory._state.db = alias
        memory.agent = agent
        memory.access = MemoryAccess(memory=memory, last_accessed_at=now, stability_hours=stability)
        memory.access._state.adding = False
        memory.access._state.db = alias


def new_memory(
    *,
    agent: Agent,
    data: MemoryData,
    index: int,
    digest: str,
    audience: tuple[list[int], list[str]],
    vector: np.ndarray | None,
    embedder: Embedder,
    now: datetime,
) -> SemanticMemory:
    """The unsaved row of item ``index`` of a write."""
    return SemanticMemory(
        agent=agent,
        scope=data.scope,
        memory_type=data.memory_type,
        session_id=data.session_id,
        data_subject=data.data_subject,
        tags=list(dict.fromkeys(data.tags)),
        visible_to_agents=audience[0],
        visible_to_roles=audience[1],
        content=data.content,
        content_hash=digest,
        metadata=data.metadata,
        importance=data.importance,
        confidence=data.confidence,
        embedding=vector,
        embedding_model=embedder.name,
        embedding_dimensions=embedder.dimensions if vector is not None else 0,
        fact_hint=data.fact_hint,
        source_event_id=data.source_event_id,
        # a microsecond apart: the batch keeps its order wherever memories are read oldest first
        # (the async worker's queue applies the near-duplicate rule in that order)
        created_at=now + timedelta(microseconds=index),
    )
