"""Writes to semantic memory, and hybrid recall (which writes: reads restart the recency clock)."""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from agents.models import Agent
from core.errors import InvalidInput, NotFound
from memory.embeddings import Embedder, check_vector, embed_query, get_embedder
from memory.episodic.models import Event
from memory.episodic.services import agent_session, decision_record, person_session
from tenants.models import RetrievalPolicy

from . import selectors
from .models import MemoryAccess, MemoryScope, MemoryType, SemanticMemory
from .selectors import MemoryFilters

_SPACES = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Unicode NFKC, case-folded, whitespace collapsed and trimmed: the form exact duplicates share."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def content_hash(text: str) -> str:
    """Hex SHA-256 of ``normalise_text(text)``."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class MemoryData:
    """A memory to store. ``importance`` and ``confidence`` are in [0, 1]."""

    content: str
    memory_type: str = MemoryType.FACT
    scope: str = MemoryScope.PRIVATE
    session_id: str | None = None
    tags: Sequence[str] = ()
    importance: float = 0.5
    confidence: float = 1.0
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: Sequence[float] | None = None
    embedding_model: str | None = None
    data_subject: str = ""


@dataclass(frozen=True)
class WriteResult:
    """What ``memory_create`` did: ``created``, or matched an ``exact`` / ``near`` duplicate."""

    memory: SemanticMemory
    outcome: Literal["created", "exact", "near"]
    similarity: float | None = None

    @property
    def deduplicated(self) -> bool:
        return self.outcome != "created"


def _reinforce(
    memory: SemanticMemory, *, confidence: float, importance: float, tags: Sequence[str]
) -> SemanticMemory:
    """One more sighting of ``memory``: access count +1, clock restarted, confidence/importance = max."""
    MemoryAccess.objects.filter(pk=memory.pk).update(
        access_count=F("access_count") + 1, last_accessed_at=timezone.now()
    )
    if confidence > memory.confidence or importance > memory.importance:
        SemanticMemory.objects.filter(pk=memory.pk).update(
            confidence=Greatest("confidence", Value(confidence)),
            importance=Greatest("importance", Value(importance)),
        )
    new_tags = [t for t in tags if t not in memory.tags]
    if new_tags:
        SemanticMemory.objects.filter(pk=memory.pk).update(tags=memory.tags + new_tags)
    return SemanticMemory.objects.select_related("agent", "access").get(pk=memory.pk)


def _validate(data: MemoryData) -> None:
    if not data.content or not data.content.strip():
        raise InvalidInput("Content may not be blank.", field="content")
    for name in ("importance", "confidence"):
        value = getattr(data, name)
        if not (0.0 <= value <= 1.0) or math.isnan(value):
            raise InvalidInput(f"{name} must be between 0 and 1.", field=name)
    if data.scope not in MemoryScope.values:
        raise InvalidInput(f"Unknown scope {data.scope!r}.", field="scope")
    if data.memory_type not in MemoryType.values:
        raise InvalidInput(f"Unknown memory_type {data.memory_type!r}.", field="memory_type")


def memory_create(
    *, agent: Agent, data: MemoryData, policy: RetrievalPolicy, embedder: Embedder | None = None
) -> WriteResult:
    """Store a memory for ``agent``, or reinforce the one it duplicates.

    1. Exact duplicate (same ``normalise_text``, agent and scope, not forgotten): reinforce it.
    2. Near duplicate (cosine >= ``policy.near_duplicate_threshold`` among the same agent and scope):
       reinforce it.
    3. Otherwise insert. Two concurrent identical inserts meet the partial unique constraint; the
       loser returns the winner's row as an exact duplicate.

    Raises ``InvalidInput`` for blank content or out-of-range values and ``EmbeddingMismatch`` for a
    supplied vector of another model or dimension.
    """
    _validate(data)
    embedder = embedder or get_embedder()
    digest = content_hash(data.content)
    same_owner = SemanticMemory.objects.filter(agent=agent, scope=data.scope, forgotten_at__isnull=True)
    existing = same_owner.filter(content_hash=digest).first()
    if existing is not None:
        return WriteResult(
            _reinforce(existing, confidence=data.confidence, importance=data.importance, tags=data.tags),
            "exact",
            1.0,
        )

    if data.embedding is not None:
        vector = check_vector(data.embedding, model=data.embedding_model, embedder=embedder)
    else:
        if data.embedding_model is not None and data.embedding_model != embedder.name:
            check_vector([], model=data.embedding_model, embedder=embedder)
        vector = embedder.embed([data.content])[0]

    nearest = (
        same_owner.filter(embedding_model=embedder.name, embedding_dimensions=embedder.dimensions)
        .annotate(distance=selectors.cosine_distance(vector.tolist(), embedder.dimensions))
        .order_by("distance")
        .first()
    )
    if nearest is not None and 1.0 - nearest.distance >= policy.near_duplicate_threshold:
        return WriteResult(
            _reinforce(nearest, confidence=data.confidence, importance=data.importance, tags=data.tags),
            "near",
            1.0 - nearest.distance,
        )

    now = timezone.now()
    memory = SemanticMemory(
        agent=agent,
        scope=data.scope,
        memory_type=data.memory_type,
        session_id=data.session_id,
        data_subject=data.data_subject,
        tags=list(dict.fromkeys(data.tags)),
        content=data.content,
        content_hash=digest,
        metadata=data.metadata,
        importance=data.importance,
        confidence=data.confidence,
        embedding=vector,
        embedding_model=embedder.name,
        embedding_dimensions=embedder.dimensions,
        created_at=now,
    )
    try:
        with transaction.atomic():
            memory.save(force_insert=True)
            memory.access = MemoryAccess.objects.create(memory=memory, last_accessed_at=now)
    except IntegrityError:
        winner = same_owner.filter(content_hash=digest).first()
        if winner is None:
            raise
        return WriteResult(
            _reinforce(winner, confidence=data.confidence, importance=data.importance, tags=data.tags),
            "exact",
            1.0,
        )
    return WriteResult(memory, "created")


def memory_forget(
    *, agent: Agent, memory_id: uuid.UUID, session_id: str | None = None, username: str | None = None
) -> tuple[SemanticMemory, Event]:
    """Hide a memory from recall (the row stays for audit) and log a ``decision`` event in the
    memory's session; for a memory stored without one, in ``session_id`` (the request's) or else the
    session of whoever decided: the agent's ``agent:<name>``, or ``admin:<username>`` for a person.

    ``agent`` may forget its own memories and shared ones. ``username``: a person forgot it in the
    admin (on behalf of the memory's agent), recorded as the decision's actor ``user:<username>``.
    Raises ``NotFound`` when the memory does not exist, is already forgotten or is another agent's
    private memory.
    """
    with transaction.atomic():
        memory = (
            selectors.memories_visible_to(agent).select_for_update(of=("self",)).filter(pk=memory_id).first()
        )
        if memory is None:
            raise NotFound("No such memory.", field="id")
        memory.forgotten_at = timezone.now()
        memory.forgotten_by = agent
        memory.save(update_fields=["forgotten_at", "forgotten_by"])
        event = decision_record(
            agent=agent,
            session_id=memory.session_id
            or session_id
            or (person_session(username) if username else agent_session(agent)),
            actor=f"user:{username}" if username else "",
            content=f"Forgot semantic memory {memory.pk}."
            + (f" (by {username} in the admin)" if username else ""),
            # no content-derived value here: every agent of the tenant can read the log, and a hash
            # of a short private memory can be reversed by guessing
            payload={
                "action": "memory_forget",
                "memory_id": str(memory.pk),
                "owner": memory.agent.name,
                "scope": memory.scope,
            },
        )
    return memory, event


# Share of the lexical side in the fused relevance. Tuned once on LoCoMo (locomo_eval): dense
# similarity carries paraphrase, the lexical side names, dates and rare words.
TEXT_WEIGHT = 0.3


@dataclass(frozen=True)
class _Scored:
    """A candidate's score and its parts, each in [0, 1], before its memory row is loaded.

    ``relevance = TEXT_WEIGHT * text_relevance + (1 - TEXT_WEIGHT) * similarity`` (hybrid fusion);
    ``score`` is the weighted mean of relevance, recency and importance (Park et al. 2023).
    """

    id: Any
    score: float
    relevance: float
    similarity: float
    text_relevance: float
    recency: float
    importance: float


@dataclass(frozen=True)
class SearchHit(_Scored):
    """One recalled memory (``id`` is its primary key) with the parts of its score."""

    memory: SemanticMemory


def _as_vector(value: Any) -> np.ndarray:
    """A pgvector value from a raw cursor (its text form ``[1,2,...]``) or an array, as float32."""
    if isinstance(value, str):
        return np.asarray(json.loads(value), dtype=np.float32)
    return np.asarray(value, dtype=np.float32)


def _mmr(hits: list[_Scored], vectors: dict[Any, np.ndarray], k: int, lam: float) -> list[_Scored]:
    """Maximal marginal relevance (Carbonell & Goldstein 1998): greedily pick
    ``argmax lam * score - (1 - lam) * max cos(candidate, already picked)``."""
    chosen: list[_Scored] = []
    pool = list(hits)
    while pool and len(chosen) < k:

        def gain(hit: _Scored) -> float:
            if not chosen:
                return hit.score
            redundancy = max(float(vectors[hit.id] @ vectors[c.id]) for c in chosen)
            return lam * hit.score - (1 - lam) * redundancy

        best = max(pool, key=gain)
        chosen.append(best)
        pool.remove(best)
    return chosen


def memory_search(
    *,
    agent: Agent,
    query: str,
    policy: RetrievalPolicy,
    k: int = 10,
    filters: MemoryFilters | None = None,
    weights: dict[str, float] | None = None,
    mmr_lambda: float | None = None,
    touch: bool = True,
    now: datetime | None = None,
) -> list[SearchHit]:
    """Hybrid recall of the ``k`` best memories ``agent`` may see for ``query``.

    Candidates: the nearest ``max(4k, 40)`` by vector (HNSW, cosine) and the best as many by
    full-text rank. Each candidate gets ``similarity = max(0, cos)``, ``text_relevance`` = its
    ``ts_rank_cd`` divided by the best rank among candidates, fused into ``relevance``; then
    ``score = (w_sim * relevance + w_rec * exp(-ln2 * hours / half_life) + w_imp * importance) / sum(w)``
    with the hours since last access (Park et al. 2023, "Generative Agents", eq. in §4.1).
    With ``mmr_lambda`` the top ``k`` are re-picked by MMR over the candidates. Hits are returned
    best first; with ``touch`` their ``last_accessed_at`` and ``access_count`` are updated.
    """
    embedder = get_embedder()
    dims = embedder.dimensions
    w = {"similarity": policy.w_similarity, "recency": policy.w_recency, "importance": policy.w_importance}
    w.update(weights or {})
    w_sum = sum(w.values())
    if w_sum <= 0:
        raise InvalidInput("At least one weight must be above 0, or every score is 0.", field="weights")
    decay = math.log(2) / policy.recency_half_life_hours
    now = now or timezone.now()

    qvec = list(embed_query(query))
    where, params = selectors.visible_filter_sql(
        agent, filters or MemoryFilters(), model=embedder.name, dimensions=dims
    )
    pool_size = max(4 * k, 40)
    with transaction.atomic():
        # HNSW options, and the query's stemmed words without stop words: they bound the lexical
        # candidates; none means the full text cannot match
        lexemes = selectors.search_prepare(query, ef_search=max(pool_size, 40))
        candidates = selectors.hybrid_candidates(
            where=where,
            params=params,
            vector=qvec,
            dimensions=dims,
            text=selectors.or_query_text(query),
            lexemes=lexemes,
            pool=pool_size,
            with_embeddings=mmr_lambda is not None,
        )
    if not candidates:
        return []
    best_rank = max(c.text_rank for c in candidates) or 1.0
    scored = []
    for c in candidates:
        similarity = min(1.0, max(0.0, c.similarity))
        text_relevance = c.text_rank / best_rank
        relevance = TEXT_WEIGHT * text_relevance + (1 - TEXT_WEIGHT) * similarity
        hours = max(0.0, (now - c.last_accessed_at).total_seconds() / 3600.0)
        recency = math.exp(-decay * hours)
        score = (
            w["similarity"] * relevance + w["recency"] * recency + w["importance"] * c.importance
        ) / w_sum
        scored.append(_Scored(c.id, score, relevance, similarity, text_relevance, recency, c.importance))
    scored.sort(key=lambda h: h.score, reverse=True)
    if mmr_lambda is not None:
        vectors = {c.id: _as_vector(c.embedding) for c in candidates}
        scored = _mmr(scored, vectors, k, mmr_lambda)
    else:
        scored = scored[:k]
    rows = (
        SemanticMemory.objects.select_related("agent", "access")
        .defer("search", "embedding")
        .in_bulk([h.id for h in scored])
    )
    hits = [SearchHit(**vars(h), memory=rows[h.id]) for h in scored if h.id in rows]
    if touch and hits:
        touched_at = timezone.now()
        MemoryAccess.objects.filter(pk__in=[h.memory.pk for h in hits]).update(
            last_accessed_at=touched_at, access_count=F("access_count") + 1
        )
        for hit in hits:  # return what is now stored (the score used the previous access time)
            hit.memory.access.last_accessed_at = touched_at
            hit.memory.access.access_count += 1
    return hits


def memories_erase(*, memory_ids: Sequence[uuid.UUID | str]) -> list[str]:
    """Delete the memories ``memory_ids`` of the current tenant for good: the row with its content,
    full-text vector and embedding (vectors can be inverted into text), and its access clock.
    Unlike ``memory_forget`` nothing stays for audit. Returns the ids deleted (as strings); ids
    already gone are skipped. Index entries go when the table is vacuumed (the caller does it).

    The caller records why (an erasure or a retention pass records its own decision)."""
    if not memory_ids:
        return []
    ids = [str(i) for i in memory_ids]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {MemoryAccess._meta.db_table} WHERE memory_id = ANY(%s::uuid[])", [ids])
        cursor.execute(
            f"DELETE FROM {SemanticMemory._meta.db_table} WHERE id = ANY(%s::uuid[]) RETURNING id", [ids]
        )
        return sorted(str(row[0]) for row in cursor.fetchall())
