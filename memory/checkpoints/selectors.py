"""Reads of checkpoints from PostgreSQL (the system of record). The Redis-first restore is a service.

Every read is scoped to one agent's stream in a session (checkpoints are per agent within a
session, see ``memory.checkpoints.services``); each is one query on the unique index
``(session_id, agent, step_index)`` or ``(session_id, agent, idempotency_key)``.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import QuerySet

from agents.models import Agent

from .models import Checkpoint


def _stream(*, agent: Agent, session_id: str) -> QuerySet[Checkpoint]:
    return Checkpoint.objects.select_related("agent").filter(session_id=session_id, agent=agent)


def checkpoint_list(*, agent: Agent, session_id: str, after_step: int = -1) -> QuerySet[Checkpoint]:
    """``agent``'s checkpoints in the session with a step after ``after_step``, in step order.

    ``state`` and ``plan`` are deferred (up to 1 MiB each): use ``Checkpoint.summary()`` on the rows,
    or ``checkpoint_get`` for one checkpoint in full.
    """
    return (
        _stream(agent=agent, session_id=session_id)
        .filter(step_index__gt=after_step)
        .defer("state", "plan")
        .order_by("step_index")
    )


def checkpoint_get(*, agent: Agent, session_id: str, step_index: int) -> Checkpoint | None:
    """``agent``'s checkpoint at ``step_index`` in the session, in full, or ``None``."""
    return _stream(agent=agent, session_id=session_id).filter(step_index=step_index).first()


def checkpoint_by_key(*, agent: Agent, session_id: str, idempotency_key: str) -> Checkpoint | None:
    """The checkpoint ``agent`` saved in the session under ``idempotency_key``, or ``None``."""
    return _stream(agent=agent, session_id=session_id).filter(idempotency_key=idempotency_key).first()


def checkpoint_latest_stored(*, agent: Agent, session_id: str) -> Checkpoint | None:
    """``agent``'s checkpoint with the highest step index in the session, or ``None``."""
    return _stream(agent=agent, session_id=session_id).order_by("-step_index").first()


def checkpoint_latest_step(*, agent: Agent, session_id: str) -> int | None:
    """The highest step index ``agent`` saved in the session, or ``None`` when it saved none."""
    return (
        Checkpoint.objects.filter(session_id=session_id, agent=agent)
        .order_by("-step_index")
        .values_list("step_index", flat=True)
        .first()
    )


def checkpoint_stream_head(
    *, agent: Agent, session_id: str, idempotency_key: str
) -> tuple[int | None, int | None]:
    """``(latest step, id of the checkpoint saved under idempotency_key)`` of ``agent``'s stream in
    the session, each ``None`` when there is none: what a save checks, in one round trip (one probe
    of each unique index) instead of two queries."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT step_index FROM memory_checkpoint WHERE session_id = %s AND agent_id = %s "
            "        ORDER BY step_index DESC LIMIT 1), "
            "       (SELECT id FROM memory_checkpoint WHERE session_id = %s AND agent_id = %s "
            "        AND idempotency_key = %s)",
            [session_id, agent.pk, session_id, agent.pk, idempotency_key],
        )
        latest, by_key = cursor.fetchone()
    return latest, by_key
