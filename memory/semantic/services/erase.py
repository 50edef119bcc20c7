"""Memories leaving recall: forgotten (hidden, the row kept for audit, the decision recorded:
``memory_forget``) or erased for good (``memories_erase``, for an erasure or a retention pass)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db import connection, transaction
from django.utils import timezone

from agents.models import Agent
from core.errors import NotFound, PermissionDenied
from memory.episodic.models import Event
from memory.episodic.services import agent_session, decision_record, person_session

from .. import selectors
from ..models import MemoryAccess, SemanticMemory


def memory_forget(
    *,
    agent: Agent,
    memory_id: uuid.UUID | str,
    may_curate: bool = False,
    session_id: str | None = None,
    username: str | None = None,
) -> tuple[SemanticMemory, Event]:
    """Hide a memory from recall (the row stays for audit) and log a ``decision`` event in the
    memory's session; for a memory stored without one, in ``session_id`` (the request's) or else the
    session of whoever decided: the agent's ``agent:<name>``, or ``admin:<username>`` for a person.

    ``agent`` may forget the memories it wrote; with ``may_curate`` (a key with the ``curate``
    scope) also the other memories it can see. ``username``: a person forgot it in the admin (on
    behalf of the memory's agent), recorded as the decision's actor ``user:<username>``. Raises
    ``NotFound`` when the memory does not exist, is already forgotten or is not visible to
    ``agent``, and ``PermissionDenied`` for another agent's memory without ``may_curate``.
    """
    with transaction.atomic():
        memory = (
            selectors.memories_visible_to(agent)
            .select_for_update(of=("self",))
            .filter(pk=selectors.memory_uuid(memory_id))
            .first()
        )
        if memory is None:
            raise NotFound("No such memory.", field="id")
        if memory.agent_id != agent.pk and not may_curate:
            raise PermissionDenied(
                f"Memory {memory.pk} was written by another agent: only its author, or a key with the "
                "'curate' scope, may forget it.",
                field="id",
            )
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


def memories_erase(*, memory_ids: Sequence[uuid.UUID | str]) -> list[str]:
    """Delete the memories ``memory_ids`` of the current tenant for good: the row with its content,
    full-text vector and embedding (vectors can be inverted into text), and its access clock; the
    delete's trigger (memory/sql/memory_context_deleted.sql) removes its context and rebuilds its neighbours' contexts
    without its words (``MemoryContext``). Unlike ``memory_forget`` nothing stays for audit.
    An older version of a deleted memory stays superseded (``superseded_at``) without its pointer.
    Returns the ids deleted (as strings); ids already gone are skipped. Index entries go when the
    table is vacuumed (the caller does it).

    The caller records why (an erasure or a retention pass records its own decision)."""
    if not memory_ids:
        return []
    ids = [str(i) for i in memory_ids]
    with transaction.atomic(), connection.cursor() as cursor:
        # an older version left behind stays superseded (history), pointing at no row
        cursor.execute(
            f"UPDATE {SemanticMemory._meta.db_table} SET superseded_by_id = NULL "
            "WHERE superseded_by_id = ANY(%s::uuid[]) AND NOT id = ANY(%s::uuid[])",
            [ids, ids],
        )
        cursor.execute(f"DELETE FROM {MemoryAccess._meta.db_table} WHERE memory_id = ANY(%s::uuid[])", [ids])
        cursor.execute(
            f"DELETE FROM {SemanticMemory._meta.db_table} WHERE id = ANY(%s::uuid[]) RETURNING id", [ids]
        )
        return sorted(str(row[0]) for row in cursor.fetchall())
