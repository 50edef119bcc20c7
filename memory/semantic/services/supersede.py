"""Updates of semantic memory: a newer memory supersedes an older one (``superseded_by``,
``superseded_at``), which leaves default recall, listing and every job but stays readable as
history. Two ways in, one way to apply it (``memories_supersede``): the caller states the update
(``supersedes=<id>`` on a write: ``stated_targets``), or the write pipeline finds it
(``duplicates.dedup_plan``: a near duplicate that differs in what matters)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.db import connection
from django.utils import timezone

from agents.models import Agent
from core.errors import Conflict, InvalidInput, NotFound
from memory.episodic.models import EventKind, EventRole
from memory.episodic.services import EventData, agent_session, events_append

from .. import selectors
from ..models import SemanticMemory

# the trail's ``payload.action`` of an update
SUPERSEDE_ACTION = "memory_supersede"


@dataclass(frozen=True)
class Supersession:
    """``new`` replaces ``old_id``: ``how`` is ``stated`` (the caller named it) or ``detected`` (a
    near duplicate that differs, ``dedup_plan``); ``similarity`` the cosine of the two when known."""

    old_id: Any
    new: SemanticMemory
    how: Literal["stated", "detected"]
    similarity: float | None = None


def current_version(memory_id: Any) -> Any:
    """The id of the current version of ``memory_id``'s chain (following ``superseded_by``; the
    memory itself when it is current, or when its newer version was erased)."""
    seen = {memory_id}
    current = memory_id
    while True:
        nxt = SemanticMemory.objects.filter(pk=current).values_list("superseded_by_id", flat=True).first()
        if nxt is None or nxt in seen:
            return current
        seen.add(nxt)
        current = nxt


def stated_targets(
    *, agent: Agent, wanted: Sequence[tuple[Any, str, str]], prefixes: Sequence[str]
) -> dict[int, SemanticMemory]:
    """The memories the items of a write say they supersede, locked for the write's transaction, by
    item index. ``wanted``: per item, ``(memory id or None, the item's data_subject, its scope)``.

    Raises ``NotFound`` (field ``<prefix>supersedes``) for an id that is malformed, unknown,
    forgotten or not visible to ``agent``; ``Conflict`` for a memory already superseded (the message
    and ``extra.current`` name the current version) or named by two items; ``InvalidInput`` for a
    memory of another data subject (an update never crosses end users)."""
    asked = {i: selectors.memory_uuid(w[0]) for i, w in enumerate(wanted) if w[0] is not None}
    if not asked:
        return {}
    found = (
        selectors.memories_visible_to(agent)
        .select_for_update(of=("self",))
        .select_related("agent")
        .in_bulk(list(set(asked.values())))
    )
    out: dict[int, SemanticMemory] = {}
    claimed: dict[Any, int] = {}
    for i, pk in asked.items():
        field = f"{prefixes[i]}supersedes"
        memory = found.get(pk)
        if memory is None:
            raise NotFound(f"No memory {pk} to supersede.", field=field)
        if memory.superseded_at is not None:
            current = current_version(memory.pk)
            raise Conflict(
                f"Memory {pk} was already superseded; its current version is {current}.",
                field=field,
                extra={"current": str(current)},
            )
        if pk in claimed:
            raise Conflict(f"Memory {pk} is superseded by item {claimed[pk]} already.", field=field)
        if memory.data_subject != wanted[i][1]:
            raise InvalidInput(
                f"Memory {pk} is about another data subject: an update keeps the subject.", field=field
            )
        claimed[pk] = i
        out[i] = memory
    return out


def memories_supersede(*, agent: Agent, changes: Sequence[Supersession], now: datetime | None = None) -> None:
    """Mark each ``old_id`` superseded by its ``new`` memory at ``now`` (one statement; a memory
    superseded already keeps its first successor) and record each update in the trail: a
    ``decision`` event per change, in the new memory's session (``agent:<name>`` for none), naming
    both ids, how it was found and the owner, never the content (every agent of the tenant reads the
    log). Call inside the write's transaction."""
    if not changes:
        return
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SemanticMemory._meta.db_table} m SET superseded_by_id = v.new, superseded_at = %s "
            "FROM unnest(%s::uuid[], %s::uuid[]) AS v(old, new) "
            "WHERE m.id = v.old AND m.superseded_at IS NULL AND m.id <> v.new",
            [now, [str(c.old_id) for c in changes], [str(c.new.pk) for c in changes]],
        )
    events_append(
        agent=agent,
        events=[
            EventData(
                session_id=c.new.session_id or agent_session(agent),
                kind=EventKind.DECISION,
                role=EventRole.SYSTEM,
                content=f"Semantic memory {c.old_id} superseded by {c.new.pk} ({c.how}).",
                payload={
                    "action": SUPERSEDE_ACTION,
                    "memory_id": str(c.old_id),
                    "superseded_by": str(c.new.pk),
                    "how": c.how,
                    "similarity": None if c.similarity is None else round(c.similarity, 6),
                    "owner": agent.name,
                    "scope": c.new.scope,
                },
                occurred_at=now,
                data_subject=c.new.data_subject,
            )
            for c in changes
        ],
    )
