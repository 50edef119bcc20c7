"""Reads of semantic memory: visibility, filters, and the two candidate generators of hybrid search."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, VectorField

from agents.models import Agent

from .models import MemoryScope, SemanticMemory

RANGE_OPERATORS = ("gt", "gte", "lt", "lte")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class MemoryFilters:
    """Search filters; ``None`` or empty means "no constraint".

    ``created_at`` and ``importance`` map an operator in ``RANGE_OPERATORS`` to a bound.
    """

    agent_name: str | None = None
    scope: str | None = None
    memory_type: str | None = None
    session_id: str | None = None
    tags_any: Sequence[str] = ()
    tags_all: Sequence[str] = ()
    min_confidence: float | None = None
    created_at: dict[str, datetime] = field(default_factory=dict)
    importance: dict[str, float] = field(default_factory=dict)


def memories_visible_to(agent: Agent) -> QuerySet[SemanticMemory]:
    """Live memories ``agent`` may recall: every shared memory of the tenant and its own private ones."""
    return SemanticMemory.objects.filter(forgotten_at__isnull=True).filter(
        Q(scope=MemoryScope.SHARED) | Q(agent=agent)
    )


def memory_filter(qs: QuerySet[SemanticMemory], filters: MemoryFilters) -> QuerySet[SemanticMemory]:
    """Apply ``filters`` to ``qs``."""
    if filters.agent_name is not None:
        qs = qs.filter(agent__name=filters.agent_name)
    if filters.scope is not None:
        qs = qs.filter(scope=filters.scope)
    if filters.memory_type is not None:
        qs = qs.filter(memory_type=filters.memory_type)
    if filters.session_id is not None:
        qs = qs.filter(session_id=filters.session_id)
    if filters.tags_any:
        qs = qs.filter(tags__overlap=list(filters.tags_any))
    if filters.tags_all:
        qs = qs.filter(tags__contains=list(filters.tags_all))
    if filters.min_confidence is not None:
        qs = qs.filter(confidence__gte=filters.min_confidence)
    for op, bound in filters.created_at.items():
        qs = qs.filter(**{f"created_at__{op}": bound})
    for op, bound in filters.importance.items():
        qs = qs.filter(**{f"importance__{op}": bound})
    return qs


def cosine_distance(vector: Sequence[float], dimensions: int) -> CosineDistance:
    """``embedding::vector(d) <=> query``: the expression the per-dimension HNSW index is built on."""
    return CosineDistance(Cast("embedding", VectorField(dimensions=dimensions)), list(vector))


def or_tsquery(text: str) -> SearchQuery | None:
    """An OR of the words of ``text`` (English stemming, stop words dropped), or ``None`` if no words.

    Natural-language questions rarely contain every word of the memory that answers them, so the
    lexical side of hybrid search matches any word and lets the rank weigh how many matched.
    """
    words = {w.lower() for w in _WORD.findall(text)}
    if not words:
        return None
    return SearchQuery(" | ".join(f"'{w}'" for w in sorted(words)), search_type="raw", config="english")


def vector_candidates(
    qs: QuerySet[SemanticMemory], vector: Sequence[float], dimensions: int, limit: int
) -> list:
    """Ids of the ``limit`` nearest memories by cosine distance (HNSW, approximate)."""
    return list(
        qs.annotate(distance=cosine_distance(vector, dimensions))
        .order_by("distance")
        .values_list("id", flat=True)[:limit]
    )


def text_candidates(qs: QuerySet[SemanticMemory], query: SearchQuery, limit: int) -> list:
    """Ids of the ``limit`` memories with the best full-text rank (``ts_rank_cd``, GIN index)."""
    return list(
        qs.filter(search=query)
        .annotate(text_rank=SearchRank(F("search"), query, cover_density=True))
        .order_by("-text_rank")
        .values_list("id", flat=True)[:limit]
    )
