"""The access clocks of semantic memories: an access counted at once (``accesses_touch``), the
buffered recalls applied by the worker (``accesses_flush``), and the restore of archived memories
that an access (or an operator) brings back (``memories_restore``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from agents.models import Agent
from agents.services import system_agent_get
from core.locks import advisory_xact_lock
from memory.episodic.services import decision_record

from .. import touches
from ..forgetting import STABILITY_SQL, batch_stability_sql
from ..models import SemanticMemory
from ..selectors import consolidation_policy


def accesses_touch(
    ids: Sequence[Any], *, now: datetime, agent: Agent | None = None
) -> dict[Any, tuple[datetime, int, float]]:
    """Count one access (a recall or a reinforcement) of each memory of ``ids`` at ``now``: the clock
    restarts, ``access_count`` + 1 and the stability grows by the spacing rule of
    ``memory.semantic.forgetting`` (the tenant's ``stability_growth``), in one statement. Archived
    memories among them are restored (``memories_restore``, recorded). Returns ``{id:
    (last_accessed_at, access_count, stability_hours)}`` as now stored."""
    if not ids:
        return {}
    growth = consolidation_policy().stability_growth
    with connection.cursor() as cursor:
        # the memory's archived flag read by the same statement: no second query on recall's path
        cursor.execute(
            f"UPDATE memory_memoryaccess a SET stability_hours = {STABILITY_SQL}, last_accessed_at = %s, "
            "access_count = access_count + 1 FROM memory_semanticmemory m "
            "WHERE m.id = a.memory_id AND a.memory_id = ANY(%s) "
            "RETURNING a.memory_id, a.last_accessed_at, a.access_count, a.stability_hours, m.archived_at IS NOT NULL",
            [growth, now, now, list(ids)],
        )
        rows = cursor.fetchall()
    touched = {row[0]: (row[1], int(row[2]), float(row[3])) for row in rows}
    archived = [row[0] for row in rows if row[4]]
    if archived:
        memories_restore(ids=archived, reason="access", agent=agent)
    return touched


def memories_restore(
    *, ids: Sequence[Any], reason: str, username: str | None = None, agent: Agent | None = None
) -> list[Any]:
    """Bring archived memories back into default recall (``archived_at`` cleared); forgotten ones stay
    forgotten. ``reason`` ``access`` (``agent``'s recall or write reached them) or ``operator``
    (the person ``username`` restored them in the admin). One ``decision`` event records it, in
    session ``consolidation``: ``agent``'s, or the tenant's system agent's with ``actor``
    ``user:<username>``. Returns the ids restored (those archived and not forgotten)."""
    with transaction.atomic():
        restored = list(
            SemanticMemory.objects.select_for_update()
            .filter(pk__in=list(ids), archived_at__isnull=False, forgotten_at__isnull=True)
            .values_list("pk", flat=True)
        )
        if not restored:
            return []
        SemanticMemory.objects.filter(pk__in=restored).update(archived_at=None)
        decision_record(
            agent=agent or system_agent_get(),
            session_id="consolidation",
            actor=f"user:{username}" if username else "",
            content=f"Restored {len(restored)} archived memories ({reason}).",
            payload={
                "action": "memories_restore",
                "reason": reason,
                "memory_ids": sorted(str(i) for i in restored),
            },
        )
    return restored


def accesses_flush(*, batch: int = 2000) -> int:
    """Apply the current tenant's buffered recalls (``touches``) to the access clocks, ``batch``
    entries per transaction, until none is left; returns how many entries were applied.

    Per memory, the ``n`` recalls of a batch count as ``n`` accesses: ``access_count + n``, the clock
    at the latest (never moved back), the stability raised by the spacing rule for ``n`` quick
    recalls (``forgetting.batch_stability_sql``). A memory archived meanwhile is restored, recorded
    as the recalling agent's (``memories_restore``, reason ``access``); rows gone (erased) are
    skipped. Flushes of a tenant take turns (an advisory lock); entries are acknowledged after
    their transaction commits, so a flush killed before that leaves them for the next one, and
    one killed between its commit and the acknowledgement has them counted twice (clocks unchanged).
    """
    growth = consolidation_policy().stability_growth
    applied = 0
    while True:
        with transaction.atomic():
            advisory_xact_lock("semantic-touch-flush")
            entries = touches.touches_read(count=batch)
            if not entries:
                return applied
            first: dict[str, datetime] = {}
            last: dict[str, tuple[datetime, int]] = {}
            counts: dict[str, int] = {}
            for entry in entries:
                for memory_id in entry.ids:
                    first[memory_id] = min(first.get(memory_id, entry.at), entry.at)
                    if memory_id not in last or entry.at >= last[memory_id][0]:
                        last[memory_id] = (entry.at, entry.agent_id)
                    counts[memory_id] = counts.get(memory_id, 0) + 1
            ids = [i for i in first if _is_uuid(i)]
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE memory_memoryaccess a SET stability_hours = "
                    f"{batch_stability_sql('v.first_at', 'v.n')}, "
                    "last_accessed_at = greatest(a.last_accessed_at, v.last_at), "
                    "access_count = a.access_count + v.n "
                    "FROM unnest(%s::uuid[], %s::timestamptz[], %s::timestamptz[], %s::int[]) "
                    "AS v(id, first_at, last_at, n), memory_semanticmemory m "
                    "WHERE a.memory_id = v.id AND m.id = a.memory_id "
                    "RETURNING a.memory_id, m.archived_at IS NOT NULL AND m.forgotten_at IS NULL",
                    [
                        growth,
                        growth,
                        ids,
                        [first[i] for i in ids],
                        [last[i][0] for i in ids],
                        [counts[i] for i in ids],
                    ],
                )
                archived = [row[0] for row in cursor.fetchall() if row[1]]
            by_agent: dict[int, list[Any]] = {}
            for memory_id in archived:
                by_agent.setdefault(last[str(memory_id)][1], []).append(memory_id)
            agents = Agent.objects.in_bulk(list(by_agent))
            for agent_id, memory_ids in by_agent.items():
                memories_restore(ids=memory_ids, reason="access", agent=agents.get(agent_id))
        touches.touches_ack([e.entry for e in entries])
        applied += len(entries)
        if len(entries) < batch:
            return applied


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
