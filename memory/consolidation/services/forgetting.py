"""Archiving by the forgetting curve."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.db import connection, transaction

from agents.services import system_agent_get
from memory.episodic.services import decision_record
from memory.semantic.models import SemanticMemory
from memory.semantic.selectors import consolidation_policy

from ..models import ConsolidationRun, Job
from .runs import ACTOR, NIL, TRAIL_SESSION, batch_size, counts_add, run_execute

_ARCHIVE_SQL = """
UPDATE memory_semanticmemory m SET archived_at = %(clock)s
FROM memory_memoryaccess a
WHERE a.memory_id = m.id AND m.id > %(after)s AND (%(upper)s::uuid IS NULL OR m.id <= %(upper)s::uuid)
  AND m.forgotten_at IS NULL AND m.archived_at IS NULL AND m.embedding_dimensions > 0
  AND m.memory_type <> 'store'
  AND m.created_at <= %(born_before)s
  AND extract(epoch FROM (%(clock)s - a.last_accessed_at)) / 3600.0 > -a.stability_hours * ln(%(threshold)s)
RETURNING m.id
"""


def forgetting_pass(*, now: datetime | None = None, batch: int | None = None) -> ConsolidationRun | None:
    """Archive the memories that the forgetting curve has let go: live (not forgotten, not already
    archived, embedded) memories created at least ``archive_min_age_hours`` before the run's clock
    whose recall probability ``exp(-t / S)`` (``memory.semantic.forgetting``) is below the tenant's
    ``archive_below_recall``, i.e. ``t > -S ln θ`` hours since their last access. Archived memories
    leave default recall (``include_archived`` finds them; a recall, a reinforcement or an operator
    restores them); nothing is deleted.

    Batches walk the memories in id order (``batch`` rows each, ``ENGRAM_CONSOLIDATION_BATCH`` by
    default); each batch that archives something records one decision listing the ids. Counts:
    ``examined``, ``archived``. Returns the run, or None when one is already running."""
    size = batch_size(batch)
    policy = consolidation_policy()

    def body(run: ConsolidationRun) -> None:
        if not 0.0 < policy.archive_below_recall:
            return  # a threshold of 0: nothing is ever below it
        clock = run.clock
        born_before = clock - timedelta(hours=policy.archive_min_age_hours)
        after = uuid.UUID(run.cursor["after"]) if run.cursor.get("after") else NIL
        while True:
            with transaction.atomic():
                ids = list(
                    SemanticMemory.objects.filter(pk__gt=after)
                    .order_by("pk")
                    .values_list("pk", flat=True)[:size]
                )
                if not ids:
                    break
                upper = ids[-1] if len(ids) == size else None
                with connection.cursor() as cursor:
                    cursor.execute(
                        _ARCHIVE_SQL,
                        {
                            "clock": clock,
                            "after": after,
                            "upper": upper,
                            "born_before": born_before,
                            "threshold": min(policy.archive_below_recall, 1.0),
                        },
                    )
                    archived = sorted(str(row[0]) for row in cursor.fetchall())
                if archived:
                    decision_record(
                        agent=system_agent_get(),
                        session_id=TRAIL_SESSION,
                        actor=ACTOR,
                        content=f"Archived {len(archived)} memories below recall probability "
                        f"{policy.archive_below_recall} (forgetting curve).",
                        payload={
                            "action": "memories_archive",
                            "run_id": run.pk,
                            "clock": clock.isoformat(),
                            "threshold": policy.archive_below_recall,
                            "min_age_hours": policy.archive_min_age_hours,
                            "memory_ids": archived,
                        },
                    )
                after = ids[-1]
                counts_add(run.counts, examined=len(ids), archived=len(archived))
                run.cursor = {"after": str(after)}
                run.save(update_fields=["cursor", "counts"])
            if upper is None:
                break

    return run_execute(Job.FORGETTING, now, body)
