"""The async embedding queue's drain: the memories written with ``"write": "async"`` are stored
pending (no vector) by ``writes``, which also schedules the drain (``writes.embed_schedule``);
``pending_embed`` embeds them in batches and gives them the synchronous path's near-duplicate rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from agents.models import Agent
from core.locks import advisory_xact_lock
from memory.embeddings import Embedder, get_embedder, vector_text
from tenants.models import RetrievalPolicy

from ..models import SemanticMemory
from .duplicates import Match, dedup_plan
from .reinforce import memories_reinforce
from .supersede import Supersession, memories_supersede
from .writes import MemoryData


@dataclass(frozen=True)
class PendingReport:
    """What one ``pending_embed`` batch did: memories embedded (updates included), merged into a
    near duplicate, updates (each supersedes a memory)."""

    embedded: int = 0
    merged: int = 0
    updated: int = 0


def pending_embed(
    *, policy: RetrievalPolicy, limit: int = 256, embedder: Embedder | None = None
) -> PendingReport:
    """Embed up to ``limit`` pending memories (async writes), oldest first, in one batch call of the
    embedder, and give them the synchronous path's near-duplicate rule (``dedup_plan``, the same
    function: a near memory that says something else is no duplicate here either), in order, so
    two near duplicates in one batch merge too: a near duplicate reinforces the memory it matches
    and is merged into it (``merged_into``, hidden; its id still answers with the memory it
    became). Set-based: one statement finds the stored near duplicates, one writes
    the vectors, one marks the merged rows. Drains of a tenant take turns (a transaction's
    advisory lock, taken before the rows are claimed): two at once (a worker of two processes)
    each looked for near duplicates among the vectors committed before the other's, so a pair
    claimed apart stayed two memories or merged the earlier into the later. Rows locked by
    another writer are skipped (``SKIP LOCKED``). Raises ``EmbedderUnavailable`` when the
    embedder is down (the rows stay pending)."""
    embedder = embedder or get_embedder()
    dims = int(embedder.dimensions)
    with transaction.atomic():
        advisory_xact_lock("semantic-embed-drain")
        rows = list(
            SemanticMemory.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(embedding_dimensions=0, forgotten_at__isnull=True)
            .defer("search", "lexical")
            .order_by("created_at")[:limit]
        )
        if not rows:
            return PendingReport()
        vectors = list(embedder.embed([m.content for m in rows]))
        plan = dedup_plan(
            owners=[(m.agent_id, m.scope, m.data_subject) for m in rows],
            # one a stated update replaced already is embedded only (it is history)
            skip=[m.superseded_at is not None for m in rows],
            vectors=vectors,
            contents=[m.content for m in rows],
            embedder=embedder,
            policy=policy,
        )
        keep = [i for i, match in enumerate(plan) if match is None or match.outcome == "update"]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE memory_semanticmemory m SET embedding = v.e::vector({dims}), "
                "embedding_model = %s, embedding_dimensions = %s "
                "FROM unnest(%s::uuid[], %s::text[]) AS v(id, e) WHERE m.id = v.id",
                [
                    embedder.name,
                    dims,
                    [str(rows[i].pk) for i in keep],
                    [vector_text(vectors[i]) for i in keep],
                ],
            )
        _updates_apply(rows, plan)
        merged = [
            (rows[i], m.memory_id if m.item is None else rows[m.item].pk)
            for i, m in enumerate(plan)
            if m and m.outcome != "update"
        ]
        if merged:
            now = timezone.now()
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE memory_semanticmemory m SET forgotten_at = %s, merged_into_id = v.target "
                    "FROM unnest(%s::uuid[], %s::uuid[]) AS v(id, target) WHERE m.id = v.id",
                    [now, [str(r.pk) for r, _ in merged], [str(t) for _, t in merged]],
                )
            by_agent: dict[int, list[tuple[Any, MemoryData, tuple[list[int], list[str]]]]] = {}
            for row, target in merged:
                data = MemoryData(
                    content=row.content, tags=row.tags, confidence=row.confidence, importance=row.importance
                )
                by_agent.setdefault(row.agent_id, []).append(
                    (target, data, (row.visible_to_agents, row.visible_to_roles))
                )
            agents = Agent.objects.in_bulk(list(by_agent))
            for agent_id, targets in by_agent.items():
                memories_reinforce(targets, agent=agents[agent_id])
    return PendingReport(len(keep), len(merged), sum(1 for m in plan if m and m.outcome == "update"))


def _updates_apply(rows: list[SemanticMemory], plan: list[Match | None]) -> None:
    """The drain's updates: each pending memory ``dedup_plan`` found to update a memory (stored, or
    an earlier one of the batch, which is kept) supersedes it (``memories_supersede``, recorded in
    the trail as the agent's)."""
    by_agent: dict[int, list[Supersession]] = {}
    for i, match in enumerate(plan):
        if match is not None and match.outcome == "update":
            old = match.memory_id if match.item is None else rows[match.item].pk
            change = Supersession(old, rows[i], "detected", match.similarity)
            by_agent.setdefault(rows[i].agent_id, []).append(change)
    if by_agent:
        agents = Agent.objects.in_bulk(list(by_agent))
        for agent_id, changes in by_agent.items():
            memories_supersede(agent=agents[agent_id], changes=changes)
