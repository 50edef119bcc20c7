"""Reinforcement: one more sighting of a memory a write duplicates (the write pipeline's steps 1 and
2, and the async worker's drain)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from django.db import connection
from django.utils import timezone

from agents.models import Agent

from ..models import SemanticMemory
from .clocks import accesses_touch


class Sighting(Protocol):
    """What a duplicate adds to the memory it reinforces (``writes.MemoryData`` is one)."""

    @property
    def tags(self) -> Sequence[str]: ...
    @property
    def importance(self) -> float: ...
    @property
    def confidence(self) -> float: ...


def memories_reinforce(
    targets: Sequence[tuple[Any, Sighting, tuple[list[int], list[str]]]], *, agent: Agent | None
) -> dict[Any, SemanticMemory]:
    """One more sighting of each ``(memory id, the duplicate's data, its audience)``, in order: an
    access each (``accesses_touch``: clock restarted, stability raised, restored if archived; a
    memory seen twice counts twice), confidence and importance = max (one statement), new tags and
    (hierarchical) new agents and roles added. Returns the memories as now stored, by id."""
    if not targets:
        return {}
    ids = [t[0] for t in targets]
    now = timezone.now()
    remaining = list(ids)
    while remaining:  # each round touches each id once: a memory met n times gets n accesses
        distinct = list(dict.fromkeys(remaining))
        accesses_touch(distinct, now=now, agent=agent)
        for memory_id in distinct:
            remaining.remove(memory_id)
    best: dict[Any, tuple[float, float]] = {}
    for memory_id, data, _ in targets:
        c, i = best.get(memory_id, (0.0, 0.0))
        best[memory_id] = (max(c, data.confidence), max(i, data.importance))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_semanticmemory m SET confidence = GREATEST(m.confidence, v.c), "
            "importance = GREATEST(m.importance, v.i) "
            "FROM unnest(%s::uuid[], %s::float8[], %s::float8[]) AS v(id, c, i) "
            "WHERE m.id = v.id AND (v.c > m.confidence OR v.i > m.importance)",
            [[str(k) for k in best], [v[0] for v in best.values()], [v[1] for v in best.values()]],
        )
    current = SemanticMemory.objects.select_related("agent", "access").in_bulk(list(best))
    for memory_id, data, (agent_ids, roles) in targets:
        memory = current[memory_id]
        new_tags = [t for t in dict.fromkeys(data.tags) if t not in memory.tags]
        new_ids = [i for i in agent_ids if i not in memory.visible_to_agents]
        new_roles = [r for r in roles if r not in memory.visible_to_roles]
        if new_tags or new_ids or new_roles:  # rare: a duplicate that widens tags or audience
            memory.tags = memory.tags + new_tags
            memory.visible_to_agents = memory.visible_to_agents + new_ids
            memory.visible_to_roles = memory.visible_to_roles + new_roles
            memory.save(update_fields=["tags", "visible_to_agents", "visible_to_roles"])
    return SemanticMemory.objects.select_related("agent", "access").in_bulk(list(best))
