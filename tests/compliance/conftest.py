"""Helpers of the compliance tests: events in a tenant, SQL behind the append-only triggers' back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from agents.models import Agent
from compliance.models import ErasureRequest
from core.redis import get_redis
from core.tenancy import maintenance
from memory.episodic.models import Event, EventKind
from memory.episodic.services import EventData, events_append

# the tables whose triggers refuse changes: the episodic log, its head and the signed anchors
GUARDED = ("memory_event", "memory_chainhead", "compliance_anchor")


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
    """A cursor in the current tenant's schema with the append-only triggers of the episodic log and
    of the anchors off for the block, as the tables' owner (the maintenance role) could: what an
    attacker with the keys to the database does. The chain and the anchors must still tell."""
    with maintenance(), connection.cursor() as cursor:
        # ALTER TABLE refuses while the transaction's deferred FK checks on the table are pending
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for table in GUARDED:
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        try:
            yield cursor
        finally:
            for table in GUARDED:
                cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")


@pytest.fixture
def redis_on_disk() -> Any:
    """The test Redis with an append-only file and snapshots for the test (it keeps neither)."""
    client = get_redis()
    folder = Path(client.config_get("dir")["dir"])
    client.config_set("appendonly", "yes")
    client.config_set("save", "3600 1")
    try:
        while client.info("persistence")["aof_rewrite_in_progress"]:
            time.sleep(0.05)
        yield client, folder
    finally:
        client.config_set("appendonly", "no")
        client.config_set("save", "")
        for path in folder.iterdir():
            if path.name.startswith(("appendonly", "dump")) or path.suffix in (".aof", ".rdb"):
                if path.is_file():
                    path.unlink()


def on_disk(folder: Path) -> bytes:
    """What Redis's append-only file(s) and snapshot in ``folder`` hold."""
    return b"".join(
        p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and (p.suffix in (".aof", ".rdb") or "appendonly" in p.name)
    )


def finished(request: ErasureRequest, timeout: float = 120.0) -> ErasureRequest:
    """The request once done or failed: a Celery worker of the test session may have taken the
    task queued at the approval (on a committed tenant), and this process's run then returned."""
    deadline = time.monotonic() + timeout
    while not request.is_done:
        assert time.monotonic() < deadline, "the erasure did not finish in time"
        time.sleep(0.25)
        request.refresh_from_db()
    return request


from tests.compliance.servers import second_server  # noqa: E402, F401 (a fixture of the backup and move tests)
