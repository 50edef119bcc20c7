"""The outbox side of every fact change: a ``GraphOutbox`` row in the change's transaction and one
projection task queued on its commit (best effort: see ``core.tasks``)."""

from __future__ import annotations

from typing import Literal

from django.db import connection
from django.utils import timezone

from core.tasks import queue_on_commit

from ..models import Fact, GraphOutbox
from ..projection import projection_enabled


def queue_projection(facts: list[Fact]) -> None:
    """Add one outbox row per fact (one statement, no model instance each) and queue one
    projection task for the transaction: the task drains the tenant's whole outbox. With the broker
    down the write still succeeds and the outbox sweeper projects it later. Without a projection
    (no ``NEO4J_URI``) nothing: a drain would only mark the rows processed, and ``graph_rebuild``
    projects every fact when Neo4j is added."""
    if not projection_enabled():
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {GraphOutbox._meta.db_table} (fact_id, created_at) SELECT f, %s FROM unnest(%s::bigint[]) f",
            [timezone.now(), [f.pk for f in facts]],
        )
    queue_on_commit("memory.knowledge.tasks.project_facts", once_per_transaction=True)


def projection_state() -> Literal["pending", "none"]:
    """What fact writes answer about the Neo4j projection of their change: ``"pending"`` (queued in
    the outbox; a worker projects it, the sweeper within ``ENGRAM_OUTBOX_SWEEP_SECONDS`` at the
    latest) or ``"none"`` (no ``NEO4J_URI``: nothing is projected)."""
    return "pending" if projection_enabled() else "none"
