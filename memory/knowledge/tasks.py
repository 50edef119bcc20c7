"""Celery task of the knowledge layer: draining the outbox into Neo4j.

Thin: the drain takes nothing (the tenant comes from the message headers, see ``config.tasks``).
"""

from __future__ import annotations

from celery import shared_task

from config.tasks import TenantTask

from .projection import outbox_drain


@shared_task(
    base=TenantTask,
    requires_tenant=True,
    ignore_result=True,
    autoretry_for=(Exception,),
    retry_backoff=True,
    max_retries=3,
)
def project_facts() -> int:
    """Project the tenant's pending fact changes into Neo4j; returns how many rows were processed."""
    return outbox_drain()
