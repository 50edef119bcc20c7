"""Reads of a memory's versions: the chain of updates that ``superseded_by`` links (oldest first),
and what a memory replaced."""

from __future__ import annotations

from typing import Any

from agents.models import Agent

from .models import SemanticMemory
from .selectors import memories_visible_to, memory_get

# the longest chain read (a memory updated more often than this shows its newest versions)
MAX_VERSIONS = 200


def memory_versions(*, agent: Agent, memory_id: Any) -> list[SemanticMemory]:
    """Every version ``agent`` may see of the memory ``memory_id`` is one of, oldest first (by
    ``created_at``): the memories it superseded, transitively, the memory, and the ones that
    superseded it up to the current one (``superseded_at`` null), with their agent and access rows.
    One query per step of the chain, at most ``MAX_VERSIONS`` memories. Raises ``NotFound`` (field
    ``id``) for a memory ``agent`` may not see (``memory_get``)."""
    start = memory_get(agent=agent, memory_id=memory_id)
    ids: set[Any] = {start.pk}
    frontier: set[Any] = {start.pk}
    while frontier and len(ids) < MAX_VERSIONS:
        rows = SemanticMemory.objects.filter(pk__in=frontier).values_list("superseded_by_id", flat=True)
        older = SemanticMemory.objects.filter(superseded_by_id__in=frontier).values_list("pk", flat=True)
        frontier = ({pk for pk in rows if pk is not None} | set(older)) - ids
        ids |= frontier
    return list(
        memories_visible_to(agent)
        .filter(pk__in=ids)
        .select_related("agent", "access")
        .defer("search", "embedding", "lexical")
        .order_by("created_at", "id")[:MAX_VERSIONS]
    )


def memory_supersedes(memory_id: Any) -> Any:
    """The id of the memory that ``memory_id`` replaced most recently (an update), else None."""
    return (
        SemanticMemory.objects.filter(superseded_by_id=memory_id)
        .order_by("-superseded_at")
        .values_list("pk", flat=True)
        .first()
    )
