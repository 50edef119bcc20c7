"""Celery tasks of the knowledge layer: draining the outbox into Neo4j, and its upkeep.

Thin: the drain takes nothing (the tenant comes from the message headers, see ``core.tasks``).
``outbox_sweep`` runs from Celery beat every ``ENGRAM_OUTBOX_SWEEP_SECONDS``: a change whose drain
was never queued (the broker was down at commit) or was lost is projected within that interval
plus the time of one drain, whatever happened to the task queued at commit.
"""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from core.tasks import TenantTask, for_each_tenant

from .projection import outbox_drain, outbox_purge
from .selectors import outbox_pending


@shared_task(
    base=TenantTask,
    requires_tenant=True,
    ignore_result=True,
    autoretry_for=(Exception,),
    retry_backoff=True,
    max_retries=3,  # then the sweeper's next pass
)
def project_facts() -> int:
    """Project the tenant's pending fact changes into Neo4j; returns how many rows were processed."""
    return outbox_drain()


@shared_task(base=TenantTask, ignore_result=True)
def outbox_sweep() -> int:
    """Queue ``project_facts`` for every tenant with pending outbox rows; returns how many were queued."""
    return for_each_tenant(project_facts, when=outbox_pending)


@shared_task(base=TenantTask, requires_tenant=True, ignore_result=True)
def outbox_purge_processed() -> int:
    """Delete the tenant's outbox rows processed more than ``ENGRAM_OUTBOX_RETENTION_HOURS`` ago
    (pending rows stay); returns how many (hourly for every tenant through ``each_tenant``)."""
    return outbox_purge(older_than=timedelta(hours=settings.ENGRAM_OUTBOX_RETENTION_HOURS))
