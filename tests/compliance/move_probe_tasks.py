"""Slow writers for the move tests (tests/compliance/test_tenant_move.py): a unit of work of a
tenant that writes one event, waits, then writes another. Loaded by the test's Celery worker
(``--include``) and by its web app (``move_probe_asgi``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery import shared_task
from django.utils import timezone

from agents.models import Agent
from core.tasks import TenantTask
from memory.episodic.services import EventData, events_append


def write_slowly(agent: Agent, label: str, *, seconds: float) -> list[int]:
    """Append the event ``<label> A``, touch ``$ENGRAM_MOVE_PROBE_DIR/<label>.started``, wait until
    ``$ENGRAM_MOVE_PROBE_DIR/go`` exists or ``seconds`` pass, then append ``<label> B``; the seqs."""
    probe = Path(os.environ["ENGRAM_MOVE_PROBE_DIR"])
    seqs = []
    for part in ("A", "B"):
        event = EventData(
            session_id="slow", kind="message", content=f"{label} {part}", occurred_at=timezone.now()
        )
        seqs += [e.seq for e in events_append(agent=agent, events=[event])]
        if part == "A":
            (probe / f"{label}.started").touch()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and not (probe / "go").exists():
                time.sleep(0.1)
    return seqs


@shared_task(base=TenantTask, requires_tenant=True)
def slow_write(agent_name: str, label: str, seconds: float) -> list[int]:
    """``write_slowly`` as a task of the current tenant, as its agent ``agent_name``."""
    return write_slowly(Agent.objects.get(name=agent_name), label, seconds=seconds)
