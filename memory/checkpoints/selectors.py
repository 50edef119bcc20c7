"""Reads of checkpoints from PostgreSQL (the system of record). The Redis-first restore is a service."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Checkpoint


def checkpoint_list(*, session_id: str) -> QuerySet[Checkpoint]:
    """The session's checkpoints in the current tenant, in step order (oldest first)."""
    return Checkpoint.objects.select_related("agent").filter(session_id=session_id).order_by("step_index")


def checkpoint_latest_stored(*, session_id: str) -> Checkpoint | None:
    """The session's checkpoint with the highest step index, or ``None``; one indexed query."""
    return (
        Checkpoint.objects.select_related("agent")
        .filter(session_id=session_id)
        .order_by("-step_index")
        .first()
    )


def checkpoint_latest_step(*, session_id: str) -> int | None:
    """The highest step index saved for the session, or ``None`` when it has no checkpoint."""
    return (
        Checkpoint.objects.filter(session_id=session_id)
        .order_by("-step_index")
        .values_list("step_index", flat=True)
        .first()
    )
