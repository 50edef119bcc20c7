"""Helpers of the compliance tests: events in a tenant, SQL behind the append-only triggers' back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from agents.models import Agent
from memory.episodic.models import Event, EventKind
from memory.episodic.services import EventData, events_append


def append(agent: Agent, count: int, *, session_id: str = "s-drill", start: int = 0) -> list[Event]:
    """``count`` message events of ``agent`` in ``session_id`` (call inside the tenant)."""
    return events_append(
        agent=agent,
        events=[
            EventData(
                session_id=session_id,
                kind=EventKind.MESSAGE,
                content=f"turn {start + i}",
                payload={"n": start + i},
                occurred_at=timezone.now(),
            )
            for i in range(count)
        ],
    )


@contextmanager
def behind_the_triggers() -> Iterator[CursorWrapper]:
    """A cursor with triggers switched off (``session_replication_role = replica``), as a database
    superuser could: what an attacker with the keys to the database does."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            yield cursor
        finally:
            cursor.execute("SET session_replication_role = origin")
