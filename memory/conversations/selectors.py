"""Reads of conversations: an agent's extraction job, the last turns of a session."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from agents.models import Agent
from agents.subjects import subject_visible_q
from memory.episodic.models import Event, EventKind

from .models import ExtractionJob


def job_get(*, agent: Agent, job_id: Any) -> ExtractionJob | None:
    """The extraction job ``job_id`` of ``agent`` (another agent's, another end user's than the one
    ``agent`` acts for (``agents.subjects``), or an id that is no UUID: None)."""
    try:
        key = uuid.UUID(str(job_id))
    except ValueError:
        return None
    return ExtractionJob.objects.filter(subject_visible_q(agent), agent=agent, pk=key).first()


def session_turns_last(
    *, agent: Agent, session_id: str, data_subject: str, turn_roles: Iterable[str], limit: int
) -> list[tuple[str, str, str]]:
    """The last ``limit`` turns ``agent`` logged in ``session_id`` about ``data_subject``, oldest
    first, as ``(role, name, content)``: message events of ``turn_roles`` whose content is still
    there (a redacted one is skipped), in the session's order (``occurred_at``, then ``seq``: the
    log's own). One scan of the session index; no query for ``limit`` 0."""
    if limit <= 0:
        return []
    rows = (
        Event.objects.filter(
            agent=agent,
            session_id=session_id,
            data_subject=data_subject,
            kind=EventKind.MESSAGE,
            role__in=list(turn_roles),
            redacted_at__isnull=True,
        )
        .exclude(content="")
        .order_by("-occurred_at", "-seq")
        .values_list("role", "payload_index", "content")[:limit]
    )
    return [
        (role, str((payload or {}).get("name") or ""), content) for role, payload, content in reversed(rows)
    ]
