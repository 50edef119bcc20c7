"""Celery tasks of consolidation (per tenant: the schema comes from the message headers).

``consolidate`` is queued for every tenant hourly by beat (``core.tasks.each_tenant``) and runs a
pass when the tenant's ``consolidation_interval_hours`` has passed since the last one. Late
acknowledgement (``TenantTask``): a worker process killed mid-run has its message requeued, and the
next run of the task resumes the unfinished run from its cursor.
"""

from __future__ import annotations

from datetime import datetime

from celery import shared_task

from core.tasks import TenantTask
from core.tenancy import current_schema

from .services.lifecycle import summary_tree_rebuild
from .services.schedule import consolidate as consolidate_pass


@shared_task(base=TenantTask, requires_tenant=True, ignore_result=True)
def consolidate(now: str | None = None, force: bool = False) -> dict[str, object]:
    """One consolidation pass of the tenant if due (``force``: whatever the schedule); ``now`` an ISO
    8601 time with a timezone to reason about instead of the current time (a controlled clock).
    Returns ``{"tenant", "runs": [{"job", "status", "counts"}]}``."""
    clock = datetime.fromisoformat(now) if now else None
    if clock is not None and clock.tzinfo is None:
        raise ValueError("now must carry a timezone")
    runs = consolidate_pass(now=clock, force=force)
    return {
        "tenant": current_schema(),
        "runs": [{"job": r.job, "status": r.status, "counts": r.counts} for r in runs],
    }


@shared_task(base=TenantTask, requires_tenant=True, ignore_result=True)
def summaries_rebuild(session_id: str) -> int:
    """Rebuild one session's summary tree after an erasure or a retention pass removed it (see
    ``services.lifecycle.summary_tree_rebuild``). Returns how many nodes it wrote."""
    return len(summary_tree_rebuild(session_id=session_id))
