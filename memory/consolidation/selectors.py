"""Reads of consolidation: runs, promotions, and the summary tree of a session."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from core.errors import InvalidInput, NotFound

from .models import ConsolidationRun, Job, RunStatus, SummaryNode


def run_last_finished(job: str) -> ConsolidationRun | None:
    """The latest run of ``job`` that ended (done or failed), or None."""
    return (
        ConsolidationRun.objects.filter(job=job, status__in=[RunStatus.DONE, RunStatus.FAILED])
        .order_by("-started_at", "-id")
        .first()
    )


def run_unfinished(job: str) -> ConsolidationRun | None:
    """The run of ``job`` still marked running (its worker stopped or was killed mid-run), or None."""
    return ConsolidationRun.objects.filter(job=job, status=RunStatus.RUNNING).order_by("-started_at").first()


def consolidation_due(*, interval_hours: float, now: datetime) -> bool:
    """Whether a pass is due: some job never ran, has a run to resume, or last started more than
    ``interval_hours`` before ``now``."""
    for job in Job.values:
        if run_unfinished(job) is not None:
            return True
        last = run_last_finished(job)
        if last is None or (now - last.started_at).total_seconds() >= interval_hours * 3600:
            return True
    return False


def summary_tree(*, session_id: str, level: int | None = None) -> QuerySet[SummaryNode]:
    """The nodes of ``session_id``'s summary tree, root first then level by level in position order
    (one level with ``level``). Raises ``NotFound`` (field ``session_id``) when the session has no
    tree, and ``InvalidInput`` (field ``level``) for a level above its root."""
    nodes = SummaryNode.objects.filter(session_id=session_id).select_related("memory")
    top = nodes.order_by("-level").values_list("level", flat=True).first()
    if top is None:
        raise NotFound("This session has no summary yet.", field="session_id")
    if level is not None:
        if level > top:
            raise InvalidInput(f"The tree of this session has {top} levels.", field="level")
        nodes = nodes.filter(level=level)
    return nodes.order_by("-level", "position")


def summary_depth(session_id: str) -> int:
    """How many levels ``session_id``'s tree has (0: none)."""
    top = (
        SummaryNode.objects.filter(session_id=session_id)
        .order_by("-level")
        .values_list("level", flat=True)
        .first()
    )
    return int(top or 0)
