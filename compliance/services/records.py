"""How the console's services write into the trail: a person's decision (actor
``user:<username>``) or a job's (``job:<name>``), in the session of the object it concerns or
else the person's own ``admin:<username>`` session (``memory.episodic.services.person_session``)."""

from __future__ import annotations

from typing import Any

from agents.services import system_agent_get
from memory.episodic.models import Event
from memory.episodic.services import decision_record, person_session

from .. import redaction

LIFECYCLE_SESSION = redaction.LIFECYCLE_SESSION  # the trail session of retention passes and erasures


def person_record(
    *,
    username: str,
    action: str,
    content: str,
    payload: dict[str, Any],
    session_id: str | None = None,
    data_subject: str = "",
) -> Event:
    """Append a decision made by the person ``username`` (actor ``user:<username>``) in
    ``session_id`` or their ``admin:<username>`` session; ``payload`` gets ``action``; a decision
    naming a data subject carries it (``data_subject``: its erasure redacts the record)."""
    return decision_record(
        agent=system_agent_get(),
        session_id=session_id or person_session(username),
        actor=f"user:{username}",
        content=content,
        payload={"action": action, **payload},
        data_subject=data_subject,
    )


def job_record(*, job: str, action: str, content: str, payload: dict[str, Any], session_id: str) -> Event:
    """Append a decision made by the system job ``job`` (actor ``job:<job>``)."""
    return decision_record(
        agent=system_agent_get(),
        session_id=session_id,
        actor=f"job:{job}",
        content=content,
        payload={"action": action, **payload},
    )
