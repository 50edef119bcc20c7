"""Summary memories (the summary tree's nodes, ``memory.consolidation``): stored and rewritten
outside the duplicate rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.services import system_agent_get
from memory.embeddings import Embedder, get_embedder

from ..models import MemoryAccess, MemoryScope, MemoryType, SemanticMemory
from ..selectors import consolidation_policy
from .duplicates import content_hash

# A summary is embedded from its first 1,200 characters (about 256 word pieces): all-MiniLM-L6-v2 was
# trained on 256 and attention costs grow with the square of the length; the full text stays
# searchable by the full-text side of recall.
SUMMARY_EMBED_CHARS = 1200


def _summary_embed_text(content: str) -> str:
    """What a summary is embedded from: its body (the header line after which it starts, naming the
    session and the event range, is the same words in every summary: ~20 of the 256 word pieces
    embedded, that would only pull every summary's vector towards the others), cut at
    ``SUMMARY_EMBED_CHARS``."""
    head, _, body = content.partition("\n")
    return (body or head)[:SUMMARY_EMBED_CHARS]


@dataclass(frozen=True)
class SummaryText:
    """A summary to store as a semantic memory of type ``summary`` (``memory_id`` None: a new one)."""

    session_id: str
    content: str
    memory_id: Any = None


def summaries_put(*, items: Sequence[SummaryText], embedder: Embedder | None = None) -> list[SemanticMemory]:
    """Create or rewrite summary memories (shared, written by the tenant's system agent, confidence
    1), embedded in one batch; returned in the order of ``items``. A summary is derived data, kept
    per node of the summary tree (``memory.consolidation``), so it skips the duplicate rules: its
    text names its session and event range. A forgotten summary is never rewritten nor recreated:
    its item is returned unchanged. The job that calls this records the change."""
    if not items:
        return []
    embedder = embedder or get_embedder()
    existing = SemanticMemory.objects.in_bulk([i.memory_id for i in items if i.memory_id is not None])
    todo = [i for i in items if i.memory_id is None or existing[i.memory_id].forgotten_at is None]
    texts = [_summary_embed_text(i.content) for i in todo]
    vectors = dict(zip(map(id, todo), embedder.embed(texts), strict=True)) if todo else {}
    system = system_agent_get()
    stability = consolidation_policy().initial_stability_hours
    out: list[SemanticMemory] = []
    fresh: list[SemanticMemory] = []
    now = timezone.now()
    with transaction.atomic():
        for item in items:
            if item.memory_id is not None:
                memory = existing[item.memory_id]
                if memory.forgotten_at is not None:
                    out.append(memory)
                    continue
                memory.content = item.content
                memory.content_hash = content_hash(item.content)
                memory.embedding = vectors[id(item)]
                memory.embedding_model = embedder.name
                memory.embedding_dimensions = embedder.dimensions
                memory.save(
                    update_fields=[
                        "content",
                        "content_hash",
                        "embedding",
                        "embedding_model",
                        "embedding_dimensions",
                    ]
                )
            else:
                memory = SemanticMemory(
                    agent=system,
                    scope=MemoryScope.SHARED,
                    memory_type=MemoryType.SUMMARY,
                    session_id=item.session_id,
                    content=item.content,
                    content_hash=content_hash(item.content),
                    importance=0.5,
                    confidence=1.0,
                    embedding=vectors[id(item)],
                    embedding_model=embedder.name,
                    embedding_dimensions=embedder.dimensions,
                    created_at=now,
                )
                fresh.append(memory)
            out.append(memory)
        if fresh:  # one insert for the new ones and one for their clocks
            SemanticMemory.objects.bulk_create(fresh)
            MemoryAccess.objects.bulk_create(
                [MemoryAccess(memory=m, last_accessed_at=now, stability_hours=stability) for m in fresh]
            )
    return out
