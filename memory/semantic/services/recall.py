"""Hybrid recall of semantic memories (``memory_search``), with MMR re-ranking, and the clock
restart every recall makes (reads write: the recency clock restarts)."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import redis
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agents.models import Agent
from core.errors import InvalidInput
from core.tasks import queue_later
from memory.embeddings import get_embedder, recall_vector
from tenants.models import RetrievalPolicy

from .. import selectors, touches
from ..forgetting import stability_after_recall
from ..models import SemanticMemory
from ..selectors import MemoryFilters, consolidation_policy
from .clocks import accesses_touch

logger = logging.getLogger(__name__)

# Share of the lexical side in the fused relevance (the one value: ``selectors.TEXT_WEIGHT``).
TEXT_WEIGHT = selectors.TEXT_WEIGHT


@dataclass(frozen=True)
class _Scored:
    """A candidate's score and its parts, each in [0, 1] (``selectors.hybrid_search`` says how).

    ``relevance = TEXT_WEIGHT * text_relevance + (1 - TEXT_WEIGHT) * similarity * stated`` (hybrid
    fusion; ``stated`` the share of the memory's text that states rather than asks, decision 0121);
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

    Candidates: the nearest ``max(4k, 40)`` by vector (HNSW, cosine; the query's vector is
    ``recall_vector``: a dialogue's last turn weighs as much as the whole) and, per rare query word, as
    many by BM25 weight; each scored by ``selectors.hybrid_search`` (similarity and BM25 relevance
    fused, then ``score = (w_sim * relevance + w_rec * exp(-ln2 * hours / half_life) + w_imp *
    importance) / sum(w)`` with the hours since last access, Park et al. 2023), in one database
    round trip once the query's words are known to the process (``selectors.query_lexemes``).
    With ``mmr_lambda`` the top ``k`` are re-picked by MMR over the candidates. Hits are returned
    best first (ties by id).

    With ``touch`` the recall restarts the hits' clocks (``access_count`` + 1, stability raised):
    buffered in Redis and applied by the worker within ``ENGRAM_TOUCH_FLUSH_SECONDS``
    (``accesses_flush``); each hit's ``access`` shows this recall applied to the stored clock. Archived hits
    (with ``include_archived``) are restored and touched at once, recorded (``accesses_touch``),
    and so is every hit when Redis cannot be reached. Raises ``InvalidInput`` (field ``weights``)
    when every weight is 0.
    """
    embedder = get_embedder()
    dims = embedder.dimensions
    w = {"similarity": policy.w_similarity, "recency": policy.w_recency, "importance": policy.w_importance}
    w.update(weights or {})
    total = sum(w.values())
    if total <= 0:
        raise InvalidInput("At least one weight must be above 0, or every score is 0.", field="weights")
    # the score divides by the weights' sum, so only their ratios count: a weight under a billionth
    # of the sum adds less than float precision to a score in [0, 1], and its products would
    # underflow in PostgreSQL (an error there, not a 0), so it counts as 0
    w = {name: value / total if value / total >= 1e-9 else 0.0 for name, value in w.items()}
    now = now or timezone.now()

    qvec = list(recall_vector(query))
    filters = filters or MemoryFilters()
    where, params = selectors.visible_filter_sql(agent, filters, model=embedder.name, dimensions=dims)
    pool_size = max(4 * k, 40)
    ranked = selectors.hybrid_search(
        where=where,
        params=params,
        vector=qvec,
        dimensions=dims,
        idf=selectors.lexeme_idf(selectors.query_lexemes(query)),
        pool=pool_size,
        weights=selectors.ScoreWeights(
            w["similarity"], w["recency"], w["importance"], math.log(2) / policy.recency_half_life_hours
        ),
        now=now,
        limit=None if mmr_lambda is not None else k,
        ef_search=max(pool_size, 40),
        with_embeddings=mmr_lambda is not None,
        generic_plan=not filters.narrows() and not agent.acting_for,
    )
    by_id = {r.memory.pk: r for r in ranked}
    scored = [
        _Scored(r.memory.pk, r.score, r.relevance, r.similarity, r.text_relevance, r.recency, r.importance)
        for r in ranked
    ]
    if mmr_lambda is not None:
        vectors = {r.memory.pk: _as_vector(r.embedding) for r in ranked}
        scored = _mmr(scored, vectors, k, mmr_lambda)
    hits = [SearchHit(**vars(h), memory=by_id[h.id].memory) for h in scored]
    if touch and hits:
        _recall_touch(hits, agent=agent, now=now)
    return hits


def _recall_touch(hits: list[SearchHit], *, agent: Agent, now: datetime) -> None:
    """Restart the clocks of recalled ``hits``: buffered (``touches``), or at once for archived hits
    (restored and recorded) and when Redis is down; each hit's ``access`` then shows the access."""
    if not any(h.memory.archived_at is not None for h in hits):
        delay = float(settings.ENGRAM_TOUCH_FLUSH_SECONDS)
        try:
            schedule = touches.touches_push(
                ids=[h.memory.pk for h in hits], at=now, agent_id=agent.pk, delay=delay
            )
        except redis.RedisError as exc:
            logger.warning("recall touches go to PostgreSQL at once: Redis is unavailable (%s)", exc)
        else:
            if schedule:
                queue_later("memory.semantic.tasks.touches_flush", seconds=delay)
            growth = consolidation_policy().stability_growth
            for hit in hits:
                access = getattr(hit.memory, "access", None)
                if access is None:
                    continue
                hours = (now - access.last_accessed_at).total_seconds() / 3600.0
                access.stability_hours = stability_after_recall(access.stability_hours, hours, growth)
                access.last_accessed_at = max(access.last_accessed_at, now)
                access.access_count += 1
            return
    with transaction.atomic():
        # the only write of this transaction: losing the last fraction of a second of clock restarts
        # in a database crash is what a recency clock can afford, so the commit does not wait for WAL
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('synchronous_commit', 'off', true)")
        touched = accesses_touch([h.memory.pk for h in hits], now=now, agent=agent)
    for hit in hits:  # what is now stored (the score used the previous access time)
        if hit.memory.pk in touched:
            access = hit.memory.access
            access.last_accessed_at, access.access_count, access.stability_hours = touched[hit.memory.pk]
        hit.memory.archived_at = None  # a recall restores an archived memory
