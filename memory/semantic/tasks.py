"""Background work of semantic memory: embedding the memories written with ``"write": "async"``."""

from __future__ import annotations

from celery import shared_task

from core.tasks import TenantTask, for_each_tenant, queue_later
from core.tenancy import current_tenant

from .selectors import pending_exists
from .services.clocks import accesses_flush
from .services.pending import pending_embed
from .touches import touches_waiting

# One task embeds at most this many batches, then queues the next task for the rest (bounded work
# per message, so a worker killed mid-drain redoes at most one batch's worth of messages).
MAX_BATCHES = 40


@shared_task(base=TenantTask, requires_tenant=True, ignore_result=True)
def embed_pending(batch: int = 256) -> dict[str, int]:
    """Embed the tenant's pending memories, ``batch`` at a time (one embedder call each), until none
    is left or ``MAX_BATCHES`` batches are done (then it queues itself again for the rest). Queued
    by the first async write of a burst to start ``ENGRAM_ASYNC_EMBED_DELAY_SECONDS`` after it
    (``services.writes.embed_schedule``) and swept by beat every ``ENGRAM_ASYNC_EMBED_SWEEP_SECONDS``.
    Idempotent: rows are claimed under lock and an embedded row is no longer pending. Returns the
    counts."""
    policy = current_tenant().retrieval_policy
    embedded = merged = 0
    for _ in range(MAX_BATCHES):
        report = pending_embed(policy=policy, limit=batch)
        embedded += report.embedded
        merged += report.merged
        if report.embedded + report.merged < batch:
            break
    else:
        queue_later("memory.semantic.tasks.embed_pending", batch, seconds=0)
    return {"embedded": embedded, "merged": merged}


@shared_task(base=TenantTask, ignore_result=True)
def pending_sweep() -> int:
    """Queue ``embed_pending`` for every tenant with pending memories (from beat): an async write is
    searchable within ``ENGRAM_ASYNC_EMBED_SWEEP_SECONDS`` plus one batch even when the task queued
    at its commit was lost. Returns how many were queued."""
    return for_each_tenant(embed_pending, when=pending_exists)


@shared_task(base=TenantTask, requires_tenant=True, ignore_result=True)
def touches_flush() -> int:
    """Apply the tenant's buffered recalls to the access clocks (``services.clocks.accesses_flush``).
    Queued by the first recall after each quiet period to run ``ENGRAM_TOUCH_FLUSH_SECONDS`` later,
    and by beat's ``touches_sweep``. Returns how many recalls were applied."""
    return accesses_flush()


@shared_task(base=TenantTask, ignore_result=True)
def touches_sweep() -> int:
    """Queue ``touches_flush`` for every tenant with buffered recalls (from beat, every
    ``ENGRAM_TOUCH_SWEEP_SECONDS``): the clocks restart even when the flush queued by a recall was
    lost (a broker down, a worker killed). Returns how many were queued."""
    return for_each_tenant(touches_flush, when=touches_waiting)
